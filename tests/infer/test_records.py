"""The typed seams between the runners, the driver and the estimators
(``ppgpc.infer.records``): a runner's ``RunOutput``, a fit's frozen ``FitInfo``, and its
JSON form, old saves' flat dicts included."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ppgpc.infer import fit
from ppgpc.infer.methods import register_method
from ppgpc.infer.convergence import ConvergenceReport
from ppgpc.infer.records import (CAVIInfo, FitInfo, OptimizerInfo, SamplerInfo, SVIInfo,
                                 ValidationInfo)


def _toy(n=30, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 2))
    return X, (X[:, 0] > 0).astype(int)


def test_a_driver_fit_records_a_typed_frozen_info_that_survives_json():
    X, y = _toy()
    result = fit("ilr_gp", X, y, method="exact", num_draws=10)
    info = result.info
    assert isinstance(info, FitInfo) and isinstance(info.convergence, ConvergenceReport)
    assert info.hyperparameters == "type-II ML" and info.fit_seconds > 0
    assert isinstance(info.optimizer, OptimizerInfo) and info.optimizer.converged
    assert info.optimizer.objective == "log_marginal_likelihood"
    assert info.iterations == info.optimizer.iterations > 0
    assert info.sampler is None and info.svi is None and info.cavi is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.hyperparameters = "changed"  # type: ignore[misc]
    text = json.dumps(info.to_dict())
    assert FitInfo.from_dict(json.loads(text)) == info


def test_an_estimators_result_info_is_typed_and_its_report_is_the_estimators():
    from ppgpc import ILRGPClassifier

    X, y = _toy(40)
    clf = ILRGPClassifier(progress=False).fit(X, y)
    assert isinstance(clf.result_.info, FitInfo)
    assert isinstance(clf.result_.info.convergence, ConvergenceReport)
    assert clf.convergence_ is clf.result_.info.convergence
    assert clf.n_iter_ == clf.result_.info.iterations


def test_the_flat_info_of_an_older_save_reads_into_its_parts():
    report = ConvergenceReport(method="svi").to_dict()
    flat = {"hyperparameters": "SVI ELBO (type-II ML)", "elbo": -12.5, "svi_steps": 300,
            "svi_converged": True, "batch_size": 30, "seconds_per_step": 0.01,
            "seconds_per_epoch": 0.02, "stopped_on": "validation",
            "validation_nll": [0.5, 0.4], "validation_steps": [100, 200],
            "best_validation_nll": 0.4, "best_step": 200, "best_window_elbo": -13.0,
            "restored_best": True, "validation_size": 12, "fit_seconds": 1.5,
            "convergence": report}
    info = FitInfo.from_dict(flat)
    assert info.svi == SVIInfo(steps=300, converged=True, elbo=-12.5, batch_size=30,
                               seconds_per_step=0.01, seconds_per_epoch=0.02,
                               stopped_on="validation")
    assert info.validation == ValidationInfo(nll=(0.5, 0.4), steps=(100, 200), best_nll=0.4,
                                             best_step=200, size=12, best_window_elbo=-13.0,
                                             restored_best=True)
    assert info.iterations == 300 and info.convergence.method == "svi"
    nuts = FitInfo.from_dict({"form": "collapsed", "init_optimizer": "lbfgs",
                              "init_optimizer_iterations": 7, "init_log_posterior": -3.0,
                              "num_draws": 500, "stop_reason": "converged",
                              "divergences": 2})
    assert nuts.sampler == SamplerInfo(num_draws=500, stop_reason="converged", divergences=2,
                                       form="collapsed")
    assert nuts.initial_optimizer.iterations == 7 and nuts.optimizer is None
    assert nuts.initial_optimizer.objective == "log_posterior"
    assert nuts.initial_optimizer.value == -3.0 and nuts.iterations == 7
    cavi = FitInfo.from_dict({"cavi_iterations": 40, "cavi_converged": False,
                              "cavi_relative_change": 1e-3, "elbo": -8.0})
    assert cavi.cavi == CAVIInfo(iterations=40, converged=False, relative_change=1e-3,
                                 elbo=-8.0)


@pytest.mark.parametrize("bad", [
    [1, 2],
    {"hyperparameters": "given", "sampler": {"num_draws": 5}},
    {"hyperparameters": "given", "svi": {"steps": 3, "unknown": 1}},
    {"hyperparameters": "given", "convergence": {"method": "exact"}},
])
def test_a_damaged_record_is_refused_by_name(bad):
    with pytest.raises((ValueError, TypeError)):
        FitInfo.from_dict(bad)


def test_a_runner_that_returns_no_run_output_is_refused_by_name():
    from ppgpc.infer import methods

    def runner(spec, data, kernel, key, opts):
        return {"hypers": {}, "latent": None}

    register_method("dict_runner", runner, "conjugate", {})
    try:
        X, y = _toy()
        with pytest.raises(TypeError, match="dict_runner.*RunOutput"):
            fit("ilr_gp", X, y, method="dict_runner")
    finally:
        methods.METHODS.pop("dict_runner", None)


def test_nan_survives_the_json_form():
    info = FitInfo(svi=SVIInfo(steps=1, converged=False, elbo=-1.0, batch_size=1,
                               seconds_per_step=math.nan, seconds_per_epoch=math.nan,
                               stopped_on="max_iter"))
    back = FitInfo.from_dict(json.loads(json.dumps(info.to_dict())))
    assert math.isnan(back.svi.seconds_per_step) and back.svi.steps == 1


def test_the_method_table_is_declared_in_one_place_and_importing_a_method_registers_nothing():
    """``ppgpc.infer.methods.METHODS`` lists the six methods in its order; a method module
    only declares its ``Method``: none registers itself or reaches for the table."""
    import inspect

    from ppgpc.infer import cavi, exact, gibbs, methods, nuts, svi

    assert list(methods.METHODS) == ["exact", "map", "nuts", "cavi", "gibbs", "svi"]
    assert methods.METHODS["svi"] is svi.SVI_METHOD and methods.METHODS["map"] is exact.MAP_METHOD
    assert (methods.METHODS["nuts"], methods.METHODS["cavi"], methods.METHODS["gibbs"]) == \
        (nuts.NUTS_METHOD, cavi.CAVI_METHOD, gibbs.GIBBS_METHOD)
    for module in (cavi, exact, gibbs, nuts, svi):
        source = inspect.getsource(module)
        assert "register_method" not in source and "infer.methods import" not in source, \
            module.__name__

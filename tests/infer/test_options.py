"""A method's options are a typed, frozen ``Options`` (``ppgpc.infer.common``), checked once
at the driver's entry; the driver's ``validation_data`` is scored in one place."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ppgpc.evaluation import metrics
from ppgpc.infer import fit
from ppgpc.infer.cavi import CAVIOptions
from ppgpc.infer.common import Options
from ppgpc.infer.exact import OptimizerOptions
from ppgpc.infer.gibbs import GibbsOptions
from ppgpc.infer.methods import METHODS, check_method_options, register_method
from ppgpc.infer.nuts import NUTSOptions
from ppgpc.infer.records import CAVIInfo, FitInfo, OptimizerInfo, SamplerInfo, SVIInfo
from ppgpc.infer.svi import SVIOptions


def _toy(n=40, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 2))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("method, kind", [("exact", OptimizerOptions), ("map", OptimizerOptions),
                                          ("nuts", NUTSOptions), ("cavi", CAVIOptions),
                                          ("gibbs", GibbsOptions), ("svi", SVIOptions)])
def test_each_method_checks_its_typed_options_once(method, kind):
    opts = check_method_options(method, {})
    assert type(opts) is kind and opts == kind()
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.progress_bar = False  # type: ignore[misc]
    with pytest.raises(TypeError, match="no_such_option.*its options are"):
        check_method_options(method, {"no_such_option": 1})
    count = next(f for f in ("num_draws", "num_chains", "max_iter") if hasattr(opts, f))
    with pytest.raises(ValueError, match=count):
        check_method_options(method, {count: 0})


def test_the_options_normalise_what_they_accept():
    assert check_method_options("nuts", {"num_warmup": np.int64(7)}).num_warmup == 7
    with pytest.raises(ValueError, match="target_accept"):
        check_method_options("nuts", {"target_accept": 1.5})
    with pytest.raises(ValueError, match="form"):
        check_method_options("nuts", {"form": "other"})
    gibbs = check_method_options("gibbs", {"hyperparameters": "sample"})
    assert gibbs.sample_hyperparameters and gibbs.hyperparameters is None
    with pytest.raises(ValueError, match="inducing"):
        check_method_options("gibbs", {"sample_hyperparameters": True, "num_inducing": 5})
    assert check_method_options("svi", {"natural_gradient": 1}).natural_gradient == 1.0
    assert check_method_options("cavi", {"batch_size": 8}).stochastic


def test_a_method_declared_with_a_dict_gets_typed_options():
    seen = []

    def runner(spec, data, kernel, key, opts):
        seen.append(opts)
        return METHODS["exact"].runner(spec, data, kernel, key, OptimizerOptions(
            num_draws=opts.draws))

    entry = register_method("typed_runner", runner, "conjugate", {"draws": 5, "extra": [1]})
    try:
        assert issubclass(entry.options, Options)
        X, y = _toy()
        result = fit("ilr_gp", X, y, method="typed_runner", draws=3)
        assert seen[-1].draws == 3 and seen[-1].extra == [1]
        assert result.latent.shape[:2] == (1, 3)
        assert result.settings["method_options"] == {"draws": 3, "extra": [1]}
        with pytest.raises(TypeError, match="unknown option"):
            fit("ilr_gp", X, y, method="typed_runner", draw=3)
    finally:
        METHODS.pop("typed_runner", None)


def test_the_driver_scores_held_out_data_for_a_method_without_a_monitor():
    X, y = _toy(60)
    Xv, yv = _toy(20, seed=1)
    result = fit("logistic_softmax", X, y, method="cavi", num_draws=50, validation_data=(Xv, yv))
    validation = result.info.validation
    nll = float(metrics.nll(result.predict_proba(Xv), yv))
    assert validation.nll == (nll,) and validation.best_nll == nll and validation.size == 20
    assert validation.best_step == result.info.iterations > 0
    assert fit("logistic_softmax", X, y, method="cavi", num_draws=50).info.validation is None
    with pytest.raises(ValueError, match="pair"):
        fit("logistic_softmax", X, y, method="cavi", num_draws=50, validation_data=Xv)
    with pytest.raises(ValueError, match="validation inputs"):   # refused before the fit
        fit("logistic_softmax", X, y, method="cavi", num_draws=50,
            validation_data=(Xv[:, :1], yv))


def test_an_estimators_held_out_share_is_the_drivers_to_score():
    from ppgpc import LogisticSoftmaxGPClassifier

    X, y = _toy(80)
    clf = LogisticSoftmaxGPClassifier(inference="cavi", progress=False, inference_options={
        "batch_size": 16, "max_iter": 40, "validation_fraction": 0.25}).fit(X, y)
    validation = clf.result_.info.validation
    assert validation is not None and validation.size == 20
    assert clf.result_.data.X.shape[0] == 60     # fitted on the rest


def test_each_record_derives_its_own_check():
    opt = OptimizerInfo(optimizer="lbfgs", objective="log_posterior", value=1.0, iterations=7,
                        evaluations=9, grad_norm=1e-3, converged=False, stop_reason="max_iter")
    assert opt.check().stage == "type-II MAP (lbfgs)" and opt.check().problems()
    cavi = CAVIInfo(iterations=3, converged=True, relative_change=1e-9, elbo=-2.0,
                    stochastic=True)
    assert cavi.check().stage == "stochastic CAVI" and not cavi.check().problems()
    svi = SVIInfo(steps=100, converged=False, elbo=-3.0, batch_size=8, seconds_per_step=0.1,
                  seconds_per_epoch=0.2, stopped_on="max_iter", relative_change=0.5)
    assert svi.check().last_change == 0.5 and svi.check().problems()
    info = FitInfo(cavi=cavi, optimizer=opt, initial_optimizer=opt)
    assert [c.stage for c in info.checks()] == ["stochastic CAVI", "type-II MAP (lbfgs)"]
    draws = {"f": np.random.default_rng(0).normal(size=(4, 100, 3))}
    sampler = SamplerInfo(num_draws=100, stop_reason="converged", divergences=2,
                          hyper_divergences=1, num_warmup=50)
    check = sampler.check(draws)
    assert (check.divergences, check.stop_reason, check.num_warmup) == (3, "converged", 50)

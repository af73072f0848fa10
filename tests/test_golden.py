"""The predictions the code gave before a change of layout, reproduced after it.

``tests/data/golden/make_golden.py`` recorded, with the code before the move into
subpackages, the mean class probabilities of every driver method on every model it runs
(the shared tiny fits of ``fitted_cases``) and of every estimator's defaults on a small
problem, and saved each estimator. Here the same fits run again and the saves are loaded:
the code that moved must compute the same numbers, and a save written before the move must
load after it and predict what it predicted then.

Tolerance follows what is pinned (``tolerance``), so that the file holds on any machine and
still catches a changed prior, draw count or optimiser:

* a closed form (given hyperparameters, a loaded save): rounding, 1e-9 absolute in
  probabilities, which allows for another BLAS or XLA version and nothing more;
* an optimiser (type-II ML or MAP by L-BFGS, CAVI, SVI): ``OPTIMIZER_ATOL`` = 1e-6, the
  L-BFGS stopping tolerance; another machine's rounding moves the path by far less, a
  changed objective, start or schedule by far more;
* a sampler (NUTS, Gibbs): five times the Monte Carlo standard error of the difference of
  two runs, sqrt(2) sd_s(p) / sqrt(ESS_bulk(p)) per entry, from the fit's own draws: another
  CPU's floating-point kernels send a sampler down another path, whose estimate is another
  draw of the same Monte Carlo error.

Entries re-recorded since, each within its Monte Carlo error of the value before
(docs/records/speed.md, "Run lengths set by the check"): the NUTS and Gibbs driver fits
(windowed samplers with new keys) and the ``defaults/`` predictions of the estimators whose
defaults now stop at their check (the logistic-softmax GP's NUTS, the SVGP's SVI); the
saves still predict their ``estimator/`` entries. ``defaults/SoftmaxSVGPClassifier`` was
re-recorded when SVI's schedule became an argument of its programs: the learning rate is
now computed in float64 where optax's schedule had rounded it to float32 (a relative
change of about 1e-7 per step), which moved it by 1.1e-6 (docs/records/structure.md).
"""

import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pytest

import ppgpc
from ppgpc.evaluation import exports
from arviz_versions import loo
from fitted_cases import (HYPERPARAMETER_CASES, NUM_PRED, SPARSE_VARIANTS, cases,
                          estimator_problem, fitted, toy)

GOLDEN = Path(__file__).parent / "data" / "golden"
RECORDED = dict(np.load(GOLDEN / "predictions.npz"))
ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "LogisticSoftmaxGPClassifier",
              "SoftmaxSVGPClassifier")
ATOL = 1e-9
OPTIMIZER_ATOL = 1e-6
SAMPLERS = ("nuts", "gibbs")


def tolerance(result, X):
    """Absolute tolerance on ``result.predict_proba(X)`` (n, C): by what the numbers rest on
    (module docstring)."""
    if result.method in SAMPLERS:
        from ppgpc.evaluation.chain_diagnostics import ess_bulk

        draws = np.asarray(result.predict_proba_draws(X))      # (chain, draw, n, C)
        sd = draws.std(axis=(0, 1))
        ess = np.maximum(np.nan_to_num(ess_bulk(draws), nan=1.0), 1.0)
        return np.maximum(5.0 * np.sqrt(2.0) * sd / np.sqrt(ess), ATOL)
    fitted_hypers = result.info.hyperparameters not in (None, "given")
    if fitted_hypers or result.method in ("cavi", "svi"):
        return OPTIMIZER_ATOL
    return ATOL


def assert_as_recorded(result, X, recorded, key):
    probs = result.predict_proba(X)
    gap = np.abs(probs - recorded)
    allowed = np.broadcast_to(tolerance(result, X), gap.shape)
    worst = np.unravel_index(np.argmax(gap - allowed), gap.shape)
    assert np.all(gap <= allowed), (f"{key}: a gap of {gap[worst]:.3g} where "
                                    f"{allowed[worst]:.3g} is allowed")


def test_every_recorded_case_is_still_a_case():
    expected = {f"fit/{m}/{k}" for m, k in cases()}
    expected |= {f"fit/{m}/{k}/{n}" for m, k, n in SPARSE_VARIANTS}
    expected |= {f"hyperparameters/{m}/{k}" for m, k in HYPERPARAMETER_CASES}
    expected |= {f"{kind}/{name}" for name in ESTIMATORS for kind in ("estimator", "defaults")}
    assert set(RECORDED) == expected


@pytest.mark.parametrize("model, method", cases())
def test_driver_methods_predict_as_recorded(model, method):
    assert_as_recorded(fitted(model, method), toy()[0][:NUM_PRED],
                       RECORDED[f"fit/{model}/{method}"], f"fit/{model}/{method}")


@pytest.mark.parametrize("model, method, num_inducing", SPARSE_VARIANTS)
def test_sparse_variants_predict_as_recorded(model, method, num_inducing):
    key = f"fit/{model}/{method}/{num_inducing}"
    assert_as_recorded(fitted(model, method, num_inducing=num_inducing), toy()[0][:NUM_PRED],
                       RECORDED[key], key)


@pytest.mark.parametrize("model, method", HYPERPARAMETER_CASES)
def test_driver_fits_of_their_hyperparameters_predict_as_recorded(model, method):
    """The method chooses the hyperparameters (type-II ML / MAP by L-BFGS, CAVI's ELBO), so
    a changed prior, objective, start or optimiser moves these, held to the optimiser's
    tolerance."""
    result = fitted(model, method, fit_hyperparameters=True)
    assert result.info.hyperparameters not in (None, "given")
    key = f"hyperparameters/{model}/{method}"
    assert_as_recorded(result, toy()[0][:NUM_PRED], RECORDED[key], key)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_saves_from_before_load_and_predict_as_recorded(name):
    X_test = estimator_problem()[2]
    loaded = ppgpc.load(GOLDEN / "saves" / name)
    assert type(loaded).__name__ == name
    np.testing.assert_allclose(loaded.predict_proba(X_test), RECORDED[f"estimator/{name}"],
                               rtol=0, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_defaults_fit_as_recorded_with_one_set_of_probabilities(name):
    """Every estimator's defaults predict as recorded; its export is one that the installed
    ArviZ summarises and scores by LOO; and (on the same fit, which is the costly part) its
    export's mean probabilities are ``predict_proba``: ``p_mean`` is it,
    the export of every draw draws its predictions with the same normals, so their mean
    agrees to rounding, and the default export's thinned draws by Monte Carlo error."""
    X, y, X_test = estimator_problem()
    estimator = getattr(ppgpc, name)(progress=False).fit(X, y)
    result = estimator.result_
    assert_as_recorded(result, X_test, RECORDED[f"defaults/{name}"], f"defaults/{name}")
    proba = estimator.predict_proba(X_test)
    idata = estimator.to_inference_data(X_test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # Pareto k warnings on 30 points
        assert len(az.summary(idata, var_names=["f"])) == idata.posterior["f"][0, 0].size
        assert np.isfinite(loo(idata).elpd)    # ArviZ 0.2x or 1, whichever is installed
    np.testing.assert_array_equal(idata.predictions_constant_data["p_mean"].values, proba)
    np.testing.assert_array_equal(exports.predictive_probabilities(idata), proba)
    full = estimator.to_inference_data(X_test, prediction_draws=None).predictions["p"]
    np.testing.assert_allclose(full.mean(("chain", "draw")).values, proba, rtol=0,
                               atol=1e-12)
    if name == "ILRGPClassifier":
        # 1000 independent predictive draws, of which the default export keeps every fifth
        # of each chain: their mean differs from the mean of all by sd * sqrt(1/k - 1/S)
        thinned = idata.predictions["p"]
        draws = thinned.sizes["chain"] * thinned.sizes["draw"]
        total = full.sizes["chain"] * full.sizes["draw"]
        assert (draws, total) == (200, 1000)
        error = full.std(("chain", "draw")).values * np.sqrt(1.0 / draws - 1.0 / total)
        gap = np.abs(thinned.mean(("chain", "draw")).values - proba)
        assert np.all(gap <= 5.0 * error + 1e-12) and gap.max() > 0

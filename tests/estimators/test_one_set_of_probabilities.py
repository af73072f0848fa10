"""One model, one set of probabilities: an estimator's ``predict_proba`` and the mean of its
export's ``predictions["p"]`` over the draws are the same estimator (the same draws), for
every estimator at its defaults; a thinned export differs from it by Monte Carlo error."""

import numpy as np
import pytest

import ppgpc
from fitted_cases import estimator_problem
from ppgpc.evaluation import exports

ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "LogisticSoftmaxGPClassifier",
              "SoftmaxSVGPClassifier")


@pytest.fixture(scope="module")
def defaults():
    """Every estimator at its defaults on the golden file's small problem."""
    X, y, X_test = estimator_problem()
    return {name: getattr(ppgpc, name)(progress=False).fit(X, y) for name in ESTIMATORS}, X_test


@pytest.mark.parametrize("name", ESTIMATORS)
def test_the_exports_mean_probabilities_are_predict_proba(defaults, name):
    estimators, X_test = defaults
    est = estimators[name]
    idata = est.to_inference_data(X_test)
    proba = est.predict_proba(X_test)
    mean = idata.predictions["p"].mean(("chain", "draw")).values
    np.testing.assert_allclose(mean, proba, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exports.predictive_probabilities(idata), proba, rtol=0,
                               atol=1e-12)


def test_a_thinned_export_is_within_its_monte_carlo_error(defaults):
    """ILR-GP's 1000 predictive draws are independent, so the mean of every fourth one is
    an estimate with standard error sd / sqrt(250), and predict_proba's own is sd /
    sqrt(1000): the two differ by less than five of their combined errors."""
    estimators, X_test = defaults
    est = estimators["ILRGPClassifier"]
    full = est.to_inference_data(X_test).predictions["p"]
    thinned = est.to_inference_data(X_test, thin=4).predictions["p"]
    draws = thinned.sizes["chain"] * thinned.sizes["draw"]
    assert draws == full.sizes["chain"] * full.sizes["draw"] // 4
    sd = full.std(("chain", "draw")).values
    error = sd * np.sqrt(1.0 / draws + 1.0 / (4 * draws))
    gap = np.abs(thinned.mean(("chain", "draw")).values - est.predict_proba(X_test))
    assert np.all(gap <= 5.0 * error + 1e-12)
    assert gap.max() > 0  # other draws: an estimate, not a copy

"""What an estimator says beyond its probabilities: the predictive draws behind them and the
fitted hyperparameters, on every estimator at its defaults; and scikit-learn's calibration
wrapper and decision-boundary display on every estimator."""

from __future__ import annotations

import dataclasses

import matplotlib
import numpy as np
import pandas as pd
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.inspection import DecisionBoundaryDisplay

import ppgpc
from conftest import toy_problem
from test_sklearn import ESTIMATORS, quick

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def frame():
    """A 45-row DataFrame of two named features, string labels, on a raw scale (offset and
    scaled, so that a method that skipped the estimator's scaling would be far off)."""
    X, y = toy_problem(45, 3, seed=5)
    X = pd.DataFrame(10.0 * X + 50.0, columns=["height", "weight"])
    return X, np.array(["ash", "birch", "cedar"])[y]


@pytest.fixture(scope="module", params=ESTIMATORS, ids=lambda cls: cls.__name__)
def fitted_default(request, frame):
    """Each estimator fitted at its defaults (short data, default settings)."""
    X, y = frame
    return request.param(progress=False).fit(X, y)


def test_predictive_draws_average_to_predict_proba(fitted_default, frame):
    X, _ = frame
    rows = X.iloc[::4]
    draws = fitted_default.predict_proba_draws(rows)
    probs = fitted_default.predict_proba(rows)
    assert draws.ndim == 3 and draws.shape[1:] == probs.shape == (len(rows), 3)
    assert draws.shape[0] >= 100
    np.testing.assert_allclose(draws.sum(axis=-1), 1.0, atol=1e-9)
    # predict_proba averages p(y | f_s) over the same or more draws from the same posterior:
    # within 5 Monte Carlo standard errors of the draws' mean (independent draws' s.e.;
    # MCMC draws whose mean is predict_proba's own agree to rounding)
    se = draws.std(axis=0) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(axis=0) - probs) <= 5 * se + 1e-9)


def test_predictive_draws_take_raw_inputs(fitted_default, frame):
    """The estimator and its ``result_`` both take raw inputs (``result_`` carries the
    input scaling); the same result without it takes the scaled inputs it was fitted on."""
    X, _ = frame
    raw = fitted_default.predict_proba_draws(X.iloc[:3])
    direct = np.asarray(fitted_default.result_.predict_proba_draws(X.to_numpy()[:3]))
    np.testing.assert_array_equal(raw, direct.reshape(raw.shape))
    scaled = fitted_default.standardizer_.transform(X.to_numpy()[:3])
    bare = dataclasses.replace(fitted_default.result_, input_scaling=None)
    np.testing.assert_array_equal(np.asarray(bare.predict_proba_draws(scaled)), direct)
    np.testing.assert_array_equal(fitted_default.result_.predict_proba(X.to_numpy()[:3]),
                                  fitted_default.predict_proba(X.iloc[:3]))


def test_hyperparameters_are_named_arrays_with_lengthscales_by_column(fitted_default):
    hypers = fitted_default.hyperparameters_
    assert {"kernel_lengthscale[height]", "kernel_lengthscale[weight]"} <= set(hypers)
    assert "kernel_lengthscale" not in hypers
    for name, value in hypers.items():
        assert isinstance(value, np.ndarray) and np.all(np.isfinite(value)), name
    assert np.all(hypers["kernel_lengthscale[height]"] > 0)
    assert np.all(hypers["kernel_variance"] > 0)


def test_hyperparameters_without_column_names_keep_the_lengthscale_array(frame):
    X, y = frame
    est = quick(ppgpc.ILRGPClassifier).fit(X.to_numpy(), y)
    assert est.hyperparameters_["kernel_lengthscale"].shape == (2,)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_calibrated_classifier_cv_wraps_every_estimator(cls, frame):
    X, y = frame
    wrapped = CalibratedClassifierCV(quick(cls, progress=False), cv=3).fit(X, y)
    probs = wrapped.predict_proba(X)
    assert probs.shape == (len(X), 3) and np.allclose(probs.sum(axis=1), 1.0)
    assert list(wrapped.classes_) == ["ash", "birch", "cedar"]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_decision_boundary_display_draws_every_estimator(cls, frame):
    X, y = frame
    est = quick(cls, progress=False).fit(X, y)
    display = DecisionBoundaryDisplay.from_estimator(est, X, response_method="predict_proba",
                                                     class_of_interest="birch", grid_resolution=20)
    assert display.response.shape == (20, 20)
    assert np.all((display.response >= 0) & (display.response <= 1))
    matplotlib.pyplot.close("all")


def test_a_loaded_estimators_result_takes_raw_inputs(fitted_default, frame, tmp_path):
    X, _ = frame
    loaded = ppgpc.load(fitted_default.save(tmp_path / "model"))
    assert loaded.result_.input_scaling is loaded.standardizer_ is not None
    np.testing.assert_array_equal(loaded.result_.predict_proba(X.to_numpy()[:3]),
                                  fitted_default.predict_proba(X.iloc[:3]))

"""Far from the data every classifier predicts between uniform and the class frequencies.

A point unlike anything in training carries no evidence about its label, so a calibrated
classifier predicts there the class frequencies or something flatter, such as uniform:
each class's probability lies between 1/C and its training frequency, on either side. Each
estimator is fitted with its default settings on wine subsampled to 60 points, 30, 20 and
10 of its three classes (frequencies 0.5, 0.33, 0.17: far enough from uniform that a model
overconfident in any class, the rare one included, falls outside), and asked at points 10
standard deviations out in every feature, in the raw input space that it standardises, in
several directions.

Monte Carlo tolerance: ``predict_proba`` averages p(y = c | f*_s) over S predictive draws.
Far from the data each draw f*_s is a fresh draw of the latent's prior (the training latent
no longer informs it), so the draws are independent, and the average's standard error is
sd_s(p) / sqrt(S), estimated from the fit's own draws (``predict_proba_draws``, whose mean
``predict_proba`` is). The test allows four of them per class, at least 0.001. The
Dirichlet GP with free per-class prior means predicted [0.15, 0.64, 0.21] there, 0.24 above
the largest frequency (its means -10.3, -4.9, -9.2 in the far field).
"""

import time
import warnings

import numpy as np
import pytest

from ppgpc import (ConvergenceWarning, DirichletGPClassifier, ILRGPClassifier,
                   LogisticSoftmaxGPClassifier, SoftmaxSVGPClassifier)
from ppgpc.datasets import load

ESTIMATORS = {
    "gpd": DirichletGPClassifier,
    "ilr": ILRGPClassifier,
    "logistic_softmax": LogisticSoftmaxGPClassifier,
    "svgp": SoftmaxSVGPClassifier,
}

DISTANCE = 10.0
"""How far out the test points are, in training standard deviations of every feature."""

NUM_SIGN_PATTERNS = 6
"""Directions: all features +, all -, and random sign patterns."""


CLASS_SIZES = (30, 20, 10)
"""Training rows of wine's three classes in the subsample."""


def wine_subsample(sizes=CLASS_SIZES, seed=0):
    """(X, y): wine subsampled to ``sizes`` rows of its classes, drawn without
    replacement."""
    X, y = load("wine")
    classes = np.unique(y)
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.choice(np.flatnonzero(y == c), size, replace=False)
                           for c, size in zip(classes, sizes)])
    return X[rows], y[rows]


def far_points(X, distance=DISTANCE, num=NUM_SIGN_PATTERNS, seed=1):
    """(num, D) points ``mean + distance * sd * s`` for sign vectors s: all +1, all -1 and
    random patterns, every feature ``distance`` training standard deviations out."""
    D = X.shape[1]
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(num, D))
    signs[0], signs[1] = 1.0, -1.0
    return X.mean(0) + distance * X.std(0) * signs


def monte_carlo_tolerance(draws) -> np.ndarray:
    """(n, C) four standard errors of the mean of the independent draws (chain, draw, n, C)
    of p, at least 0.001 (module docstring)."""
    draws = np.asarray(draws)
    S = draws.shape[0] * draws.shape[1]
    return np.maximum(4.0 * draws.std(axis=(0, 1)) / np.sqrt(S), 1e-3)


SVGP_FAR_FIELD = pytest.mark.xfail(strict=True, reason=(
    "SoftmaxSVGPClassifier's far field is set by its learned mixing W, not by the class "
    "frequencies: E[softmax(W f)] over its prior is (0.356, 0.291, 0.354) here against "
    "frequencies (0.5, 0.333, 0.167), class 1 below both 1/3 and its frequency and the "
    "rare class above uniform (docs/records/defaults.md, 'Far from the data')"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=SVGP_FAR_FIELD) if n == "svgp" else n
                                  for n in sorted(ESTIMATORS)])
def test_far_from_the_data_each_class_lies_between_uniform_and_its_frequency(name):
    """Also what users run: each estimator's defaults, whose fit must pass its own
    convergence check (a ``ConvergenceWarning`` is an error here)."""
    X, y = wine_subsample()
    frequency = np.unique(y, return_counts=True)[1] / len(y)
    uniform = np.full_like(frequency, 1.0 / len(frequency))
    low, high = np.minimum(uniform, frequency), np.maximum(uniform, frequency)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = ESTIMATORS[name](progress=False).fit(X, y)
    assert clf.convergence_.converged
    probs = clf.predict_proba(far_points(X))
    seconds = time.perf_counter() - start
    num_draws = clf.result_.num_chains * clf.result_.num_draws
    tolerance = monte_carlo_tolerance(clf.predict_proba_draws(far_points(X)))
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    outside = (probs < low - tolerance) | (probs > high + tolerance)
    assert not outside.any(), (
        f"{type(clf).__name__}() {DISTANCE:g} sd from the data predicts "
        f"{np.round(probs, 3).tolist()}, outside [min, max] of uniform and the class "
        f"frequencies {np.round(frequency, 3).tolist()} by more than the Monte Carlo "
        f"tolerance (up to {tolerance.max():.3f}; {num_draws} draws) [fit and predict "
        f"{seconds:.1f} s]")

"""Far from the data every classifier is no more confident than the class frequencies.

A point unlike anything in training carries no evidence about its label, so a calibrated
classifier predicts there at most what the class frequencies say (or something flatter,
such as uniform). Each estimator is fitted with its default settings on wine subsampled
stratified to 60 points (20, 24 and 16 of its three classes: largest frequency 0.4) and
asked at points 10 standard deviations out in every feature, in the raw input space that
it standardises, in several directions.

Monte Carlo tolerance: ``predict_proba`` averages p(y = c | f*_s) over S predictive draws.
Far from the data each draw f*_s is a fresh draw of the latent's prior (the training latent
no longer informs it), so the draws are independent, and p lies in [0, 1], whose variance
is at most 1/4: the average's standard error is at most 1 / (2 sqrt(S)). The test allows
four of them, 2 / sqrt(S), with S the number of draws the fit holds (chains times draws;
point-hyperparameter conjugate fits average at least that many). For S = 1000 that is
0.063. The Dirichlet GP with free per-class prior means predicted [0.15, 0.64, 0.21] there,
0.24 above the largest frequency (its means -10.3, -4.9, -9.2 in the far field).
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


def wine_subsample(num_points=60, seed=0):
    """(X, y): wine subsampled stratified, each class in proportion to its size (rounded),
    drawn without replacement."""
    X, y = load("wine")
    classes, counts = np.unique(y, return_counts=True)
    sizes = np.round(num_points * counts / counts.sum()).astype(int)
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


def monte_carlo_tolerance(num_draws: int) -> float:
    """Four times the largest standard error of a mean of ``num_draws`` independent values
    in [0, 1] (module docstring)."""
    return 4 * 0.5 / np.sqrt(num_draws)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_far_from_the_data_no_class_is_more_likely_than_its_training_frequency(name):
    """Also what users run: each estimator's defaults, whose fit must pass its own
    convergence check (a ``ConvergenceWarning`` is an error here)."""
    X, y = wine_subsample()
    largest = np.max(np.unique(y, return_counts=True)[1]) / len(y)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = ESTIMATORS[name](progress=False).fit(X, y)
    assert clf.convergence_.converged
    probs = clf.predict_proba(far_points(X))
    seconds = time.perf_counter() - start
    num_draws = clf.result_.num_chains * clf.result_.num_draws
    tolerance = monte_carlo_tolerance(num_draws)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert probs.max() <= largest + tolerance, (
        f"{type(clf).__name__}() {DISTANCE:g} sd from the data predicts "
        f"{np.round(probs, 3).tolist()}: largest {probs.max():.3f} > largest class frequency "
        f"{largest:.3f} + Monte Carlo tolerance {tolerance:.3f} ({num_draws} draws) "
        f"[fit and predict {seconds:.1f} s]")

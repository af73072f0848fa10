"""The circle-mixture generators (ppgpc.datasets.synthetic) and the synthetic studies built on
them (ppgpc.experiments.epsilon_overlap_sweep, scaling_with_classes)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppgpc.datasets.synthetic import (LSM_TOY_SIGMA, bayes_probabilities, circle_means,
                                      gaussian_mixture, logistic_softmax_toy, mixture_problem)
from ppgpc.evaluation import metrics
from ppgpc.experiments import BAYES, epsilon_overlap_sweep, scaling_with_classes


def test_circle_means_are_evenly_spaced_on_the_circle():
    mu = circle_means(5, radius=2.0)
    assert mu.shape == (5, 2)
    np.testing.assert_allclose(np.linalg.norm(mu, axis=1), 2.0)
    gaps = np.linalg.norm(mu - np.roll(mu, 1, axis=0), axis=1)
    np.testing.assert_allclose(gaps, 2 * 2.0 * np.sin(np.pi / 5))
    np.testing.assert_allclose(mu[0], [2.0, 0.0])


def test_mixture_draws_match_the_generative_model():
    """Class counts are multinomial(1/C) and x - mu_y is N(0, sigma^2 I): chi-square on the
    counts, and per-class means and variances within 5 standard errors."""
    C, sigma, n = 4, 0.7, 4000
    X, y = gaussian_mixture(n, C, sigma, radius=1.5, seed=1)
    assert X.shape == (n, 2) and X.dtype == np.float64 and y.dtype == np.int64
    counts = np.bincount(y, minlength=C)
    assert stats.chisquare(counts).pvalue > 1e-4
    resid = X - circle_means(C, 1.5)[y]
    for c in range(C):
        r = resid[y == c]
        se_mean = sigma / np.sqrt(len(r))
        assert np.all(np.abs(r.mean(axis=0)) < 5 * se_mean)
        # Var of the sample variance of normals: 2 sigma^4 / (n - 1)
        se_var = np.sqrt(2 * sigma**4 / (len(r) - 1))
        assert np.all(np.abs(r.var(axis=0, ddof=1) - sigma**2) < 5 * se_var)
    assert abs(np.corrcoef(resid.T)[0, 1]) < 5 / np.sqrt(n)


def test_bayes_probabilities_equal_bayes_rule_with_scipy_densities():
    C, sigma, radius = 3, 0.6, 1.2
    X, _ = gaussian_mixture(50, C, sigma, radius=radius, seed=2)
    dens = np.stack([stats.multivariate_normal(m, sigma**2 * np.eye(2)).pdf(X)
                     for m in circle_means(C, radius)], axis=1)
    np.testing.assert_allclose(bayes_probabilities(X, C, sigma, radius=radius),
                               dens / dens.sum(axis=1, keepdims=True), rtol=1e-10, atol=1e-14)


def test_bayes_probabilities_are_calibrated_on_draws_from_the_model():
    """Sum over points of 1[y = c] - p_c(x) has mean 0 and variance sum p_c (1 - p_c)."""
    C, sigma = 3, 1.0
    X, y = gaussian_mixture(3000, C, sigma, seed=3)
    p = bayes_probabilities(X, C, sigma)
    for c in range(C):
        z = ((y == c) - p[:, c]).sum() / np.sqrt((p[:, c] * (1 - p[:, c])).sum())
        assert abs(z) < 5


def test_bayes_probabilities_are_stable_far_from_the_means():
    p = bayes_probabilities(np.array([[1e3, 0.0], [0.0, -1e3]]), 4, 0.05)
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert p[0].argmax() == 0 and p[1].argmax() == 3


def test_mixture_problem_is_reproducible_with_independent_train_and_test():
    a = mixture_problem(30, 20, 3, 0.5, seed=7)
    b = mixture_problem(30, 20, 3, 0.5, seed=7)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert not np.allclose(a.X_train[:20], a.X_test)
    assert not np.allclose(a.X_train, mixture_problem(30, 20, 3, 0.5, seed=8).X_train)
    np.testing.assert_allclose(a.bayes_probabilities(a.X_test),
                               bayes_probabilities(a.X_test, 3, 0.5))
    toy = logistic_softmax_toy(seed=0)
    assert toy.X_train.shape == (500, 2) and toy.num_classes == 3
    assert toy.sigma == pytest.approx(np.sqrt(0.5)) == LSM_TOY_SIGMA


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=10, num_classes=1), "num_classes"),
    (dict(n=10, num_classes=2.5), "num_classes"),
    (dict(n=10, sigma=0.0), "sigma"),
    (dict(n=10, sigma=np.nan), "sigma"),
    (dict(n=10, radius=-1.0), "radius"),
    (dict(n=0), "n must be"),
])
def test_bad_settings_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gaussian_mixture(**kwargs)


def test_bayes_probabilities_rejects_wrong_input_shape():
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        bayes_probabilities(np.zeros((4, 3)), 3, 0.5)


# --------------------------------------------------------------- synthetic studies
# One problem size (3 classes, 40 training points) throughout, so every fit below reuses the
# same compiled functions.
_SMALL = dict(n_train=40, n_test=300, seed=0)


@pytest.fixture(scope="module")
def sweep():
    return epsilon_overlap_sweep([0.15, 2.0], [0.9, 0.999], **_SMALL)


def test_sweep_rows_cover_the_grid_and_score_the_truth(sweep):
    assert [(r.sigma, r.epsilon) for r in sweep] == [(0.15, 0.9), (0.15, 0.999),
                                                    (2.0, 0.9), (2.0, 0.999)]
    for r in sweep:
        problem = mixture_problem(40, 300, 3, r.sigma, seed=0)
        truth = problem.bayes_probabilities(problem.X_test)
        assert r.bayes_nll == pytest.approx(metrics.nll(truth, problem.y_test))
        assert r.bayes_ece == pytest.approx(metrics.ece(truth, problem.y_test))


def test_sweep_separated_classes_are_learnt_and_overlap_costs_nll(sweep):
    """At sigma = 0.15 (means sqrt(3) apart, 11 sigma) the Bayes error is ~0 and the test
    accuracy must be too; at sigma = 2 even the truth has a large NLL (near log 3), and no
    classifier beats it by more than the sampling error of a 300-point mean NLL."""
    easy = [r for r in sweep if r.sigma == 0.15]
    hard = [r for r in sweep if r.sigma == 2.0]
    assert all(r.accuracy >= 0.98 for r in easy)
    assert hard[0].bayes_nll > 0.8
    for r in hard:
        assert r.nll > r.bayes_nll - 5 * 0.5 / np.sqrt(300)
        assert r.accuracy < 0.75


def test_scaling_with_classes_rows_and_bayes_reference():
    rows = scaling_with_classes([3], ("Exact-ILR",), sigma=0.15,
                                options={"Exact-ILR": {"epsilon": 0.999}}, **_SMALL)
    assert [(r.num_classes, r.model) for r in rows] == [(3, BAYES), (3, "Exact-ILR")]
    problem = mixture_problem(40, 300, 3, 0.15, seed=0)
    assert rows[0].nll == pytest.approx(
        metrics.nll(problem.bayes_probabilities(problem.X_test), problem.y_test))
    assert rows[1].accuracy >= 0.98 and rows[1].fit_seconds > 0


def test_study_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown model"):
        scaling_with_classes([3], ("NoSuchModel",))
    with pytest.raises(ValueError, match="not in models"):
        scaling_with_classes([3], ("Exact-ILR",), options={"GPD": {}})
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        epsilon_overlap_sweep([0.5], [1.0])
    with pytest.raises(ValueError, match="at least one"):
        epsilon_overlap_sweep([], [0.9])

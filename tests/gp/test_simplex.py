"""Simplex transforms (docs/math.md section 1) and Proposition 1."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from ppgpc.gp import simplex

# a few class counts: each new C is a new array shape, which JAX compiles once
classes = st.sampled_from([2, 3, 4, 7, 26])


def _random_simplex(C, seed, n=5):
    logits = np.random.default_rng(seed).normal(scale=3.0, size=(n, C))
    return np.asarray(jax.nn.softmax(logits, axis=-1))


@settings(max_examples=25, deadline=None)
@given(C=classes, seed=st.integers(0, 10_000))
def test_fast_helmert_equals_dense_matrix(C, seed):
    V = np.asarray(simplex.helmert_basis(C))
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(3, C))
    z = gen.normal(size=(3, C - 1))
    np.testing.assert_allclose(simplex.helmert_transpose_apply(x), x @ V, atol=1e-12)
    np.testing.assert_allclose(simplex.helmert_apply(z), z @ V.T, atol=1e-12)


@pytest.mark.parametrize("C", [2, 3, 7])
def test_helmert_basis_is_orthonormal_and_orthogonal_to_ones(C):
    V = np.asarray(simplex.helmert_basis(C))
    np.testing.assert_allclose(V.T @ V, np.eye(C - 1), atol=1e-14)
    np.testing.assert_allclose(V.T @ np.ones(C), 0.0, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(C=classes, seed=st.integers(0, 10_000))
def test_ilr_round_trip(C, seed):
    p = _random_simplex(C, seed)
    np.testing.assert_allclose(simplex.ilr_inverse(simplex.ilr(p)), p, rtol=1e-9, atol=1e-15)
    z = np.random.default_rng(seed).normal(size=(4, C - 1))
    np.testing.assert_allclose(simplex.ilr(simplex.ilr_inverse(z)), z, atol=1e-9)


def _aitchison_distance(p, q):
    # d_A(p, q)^2 = 1/(2C) sum_{i,j} (log(p_i/p_j) - log(q_i/q_j))^2
    lp, lq = np.log(p), np.log(q)
    dp = lp[:, None] - lp[None, :]
    dq = lq[:, None] - lq[None, :]
    return math.sqrt(np.sum((dp - dq) ** 2) / (2 * len(p)))


@settings(max_examples=25, deadline=None)
@given(C=classes, seed=st.integers(0, 10_000))
def test_ilr_is_an_isometry_for_the_aitchison_distance(C, seed):
    p, q = _random_simplex(C, seed, n=2)
    euclid = float(np.linalg.norm(simplex.ilr(p) - simplex.ilr(q)))
    assert euclid == pytest.approx(_aitchison_distance(p, q), rel=1e-9)


def test_clr_alr():
    p = _random_simplex(5, 1)
    np.testing.assert_allclose(np.sum(simplex.clr(p), axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(simplex.alr_inverse(simplex.alr(p)), p, rtol=1e-10)
    # ilr = V^T clr
    np.testing.assert_allclose(simplex.ilr(p), simplex.clr(p) @ np.asarray(simplex.helmert_basis(5)),
                               atol=1e-12)


@pytest.mark.parametrize("C,eps", [(3, 0.9), (10, 0.999), (4, 1 - 1e-9)])
def test_class_targets_are_ilr_of_smoothed_labels_and_equidistant(C, eps):
    targets = np.asarray(simplex.ilr_class_targets(C, eps))
    if eps < 1 - 1e-6:  # direct route is accurate here
        direct = simplex.ilr(simplex.smooth_labels(jnp.arange(C), C, eps))
        np.testing.assert_allclose(targets, direct, rtol=1e-9, atol=1e-9)
    d = np.linalg.norm(targets[:, None] - targets[None, :], axis=-1)
    off = d[~np.eye(C, dtype=bool)]
    np.testing.assert_allclose(off, simplex.target_separation(C, eps), rtol=1e-10)


@pytest.mark.parametrize("C", [2, 3, 5, 10])
@pytest.mark.parametrize("tau", [0.01, 0.1])
def test_proposition1_bounds_the_misassignment_probability(C, tau):
    """Monte Carlo: with sigma at the bound, a class-k pseudo-observation is nearer a wrong
    target with probability <= tau (equality for C = 2, where the union bound is exact)."""
    eps = 0.99
    sigma = simplex.proposition1_noise_std(C, eps, tau)
    targets = np.asarray(simplex.ilr_class_targets(C, eps))
    n = 200_000
    gen = np.random.default_rng(C * 100 + int(tau * 1000))
    k = gen.integers(0, C, size=n)
    z = targets[k] + sigma * gen.normal(size=(n, C - 1))
    nearest = np.argmin(((z[:, None, :] - targets[None]) ** 2).sum(-1), axis=1)
    rate = np.mean(nearest != k)
    se = math.sqrt(tau * (1 - tau) / n)
    assert rate <= tau + 4 * se
    if C == 2:
        assert abs(rate - tau) <= 4 * se
    # the single-competitor probability is Phi_bar(delta / (2 sigma)) = tau / (C - 1)
    delta = simplex.target_separation(C, eps)
    assert norm.sf(delta / (2 * sigma)) == pytest.approx(tau / (C - 1), rel=1e-9)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_bad_epsilon_raises(bad):
    with pytest.raises(ValueError, match="epsilon"):
        simplex.ilr_class_targets(3, bad)


def test_bad_tau_raises():
    with pytest.raises(ValueError, match="tau"):
        simplex.proposition1_noise_std(3, 0.99, 0.0)
    with pytest.raises(ValueError, match="tau"):
        simplex.proposition1_noise_std(3, 0.99, 1.5)

"""Closed-form leave-one-out (``ppgpc.gp.loo_predictive``, ``ppgpc.infer.loo``) against
brute-force refits with the hyperparameters held fixed, and the ILR temperature identity
that lets one fit score a whole epsilon grid."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppgpc.gp import exact
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer import fit
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.models import get_spec

KERNEL = make_kernel("rbf-ard")


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(24, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    return X, y


def _brute_force(spec, data_of, X, y, hypers, C):
    """Refit without point i (same hyperparameters) and predict the latent at x_i."""
    means, variances = [], []
    for i in range(X.shape[0]):
        keep = np.arange(X.shape[0]) != i
        data = data_of(X[keep], y[keep])
        posterior = spec.conjugate.condition(data, KERNEL, hypers)
        m, v = spec.conjugate.predict(data, KERNEL, hypers, posterior, X[i:i + 1])
        means.append(np.asarray(m[0]))
        variances.append(np.asarray(v[0]))
    return np.stack(means), np.stack(variances)


def test_gp_loo_equals_refits_with_heteroscedastic_noise():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(15, 2))
    Y = rng.normal(size=(15, 2))
    noise = rng.uniform(0.05, 0.5, size=15)
    params = {"variance": jnp.asarray(1.3), "lengthscale": jnp.asarray([0.7, 1.4])}
    mean, var = exact.loo_predictive(exact.condition(KERNEL, params, X, Y, noise), Y, noise)
    for i in range(15):
        keep = np.arange(15) != i
        post = exact.condition(KERNEL, params, X[keep], Y[keep], noise[keep])
        m, v = exact.predict(KERNEL, params, post, X[i:i + 1])
        np.testing.assert_allclose(mean[i], m[0], rtol=0, atol=1e-8)
        np.testing.assert_allclose(var[i], v[0], rtol=0, atol=1e-8)


@pytest.mark.parametrize("model, options", [
    ("ilr_gp", {"epsilon": 0.99}),
    ("dirichlet_gp", {"alpha_eps": 0.01}),
    ("dirichlet_gp", {"alpha_eps": 0.1, "shared_kernel": False, "learn_noise_scale": True}),
])
def test_model_loo_equals_refits(problem, model, options):
    """Each model's ``loo_predictive`` (means added back, class noise per point) equals
    refitting without the point, to 1e-8."""
    X, y = problem
    C = 3
    spec = get_spec(model)
    result = fit(model, X, y, method="map", model_options=options, num_draws=1)
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    mean, var = loo_latent(result)

    def data_of(Xk, yk):
        return spec.prepare(Xk, yk, C, **options)

    want_mean, want_var = _brute_force(spec, data_of, X, y, hypers, C)
    np.testing.assert_allclose(mean, want_mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(var, want_var, rtol=0, atol=1e-8)


def test_loo_refuses_a_sampled_fit(problem):
    X, y = problem
    result = fit("ilr_gp", X, y, method="nuts", form="latent", num_warmup=10, num_samples=10,
                 max_samples=10,
                 num_chains=1, progress_bar=False)
    with pytest.raises(ValueError, match="point hyperparameters"):
        loo_latent(result)


def test_an_ilr_fit_at_one_epsilon_is_the_scaled_fit_at_another(problem):
    """Type-II ML: targets and Proposition 1 noise both scale with a(epsilon), so the fit at
    epsilon' is the fit at epsilon with the kernel variance times r^2, the lengthscales
    unchanged and the leave-one-out latent times r, r = a(epsilon') / a(epsilon)."""
    X, y = problem
    C = 3

    def a(e):
        return math.log1p(C * e / (1 - e))

    fits = {e: fit("ilr_gp", X, y, method="exact", model_options={"epsilon": e}, num_draws=1,
                   tol=1e-9) for e in (0.9, 0.9999)}
    r = a(0.9999) / a(0.9)
    lo, hi = ({k: np.asarray(v[0, 0]) for k, v in fits[e].hypers.items()} for e in (0.9, 0.9999))
    np.testing.assert_allclose(hi["kernel_lengthscale"], lo["kernel_lengthscale"], rtol=1e-4)
    np.testing.assert_allclose(hi["kernel_variance"], lo["kernel_variance"] * r**2, rtol=1e-4)
    m_lo, v_lo = loo_latent(fits[0.9])
    m_hi, v_hi = loo_latent(fits[0.9999])
    np.testing.assert_allclose(m_hi, r * m_lo, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(v_hi, r**2 * v_lo, rtol=1e-4, atol=1e-8)
    # so the rescaled scores of one fit equal the scores of the other
    key = jax.random.PRNGKey(0)
    spec = get_spec("ilr_gp")
    scaled = loo_nll(key, spec.log_link, m_lo, v_lo, y, [r])[0]
    direct = loo_nll(key, spec.log_link, m_hi, v_hi, y, [1.0])[0]
    assert float(scaled) == pytest.approx(float(direct), rel=1e-4)


def test_loo_nll_matches_its_monte_carlo_definition(problem):
    """``loo_nll`` with S shared draws against an independent high-draw estimate of
    -mean_i log E[p(y_i | r f_i)]: within 4.5 Monte Carlo standard errors."""
    X, y = problem
    result = fit("dirichlet_gp", X, y, method="map", num_draws=1)
    mean, var = (np.asarray(a) for a in loo_latent(result))
    spec = get_spec("dirichlet_gp")
    got = float(loo_nll(jax.random.PRNGKey(1), spec.log_link, mean, var, y, [0.7],
                        num_draws=4096)[0])
    S = 200_000
    eps = np.random.default_rng(5).normal(size=(S, 1, mean.shape[1]))
    f = 0.7 * (mean[None] + np.sqrt(var)[None] * eps)
    p = np.exp(np.asarray(spec.log_link(jnp.asarray(f))))[:, np.arange(len(y)), y]  # (S, N)
    ref = -np.mean(np.log(p.mean(axis=0)))
    # delta method: sd of log(mean p_i) ~ sd(p_i) / (mean p_i sqrt(S')), S' = 4096 draws;
    # the draws are shared by the points, so their errors are correlated: bound the sd of
    # the mean by the mean of the sds (the triangle inequality for standard deviations)
    se = np.mean(p.std(axis=0) / p.mean(axis=0)) / np.sqrt(4096)
    assert abs(got - ref) < 4.5 * se + 1e-12


def test_ilr_defaults_search_epsilon_and_tau_by_leave_one_out(problem):
    """The default ILRGPClassifier scores every (epsilon, tau) of the grids (extended past an
    edge where the NLL still falls) from one fit per tau; under type-II ML the score it records for
    its choice is the leave-one-out NLL of a
    direct fit at that (epsilon, tau) (the temperature identity), and it is the least."""
    from ppgpc import ILRGPClassifier
    from ppgpc.models.ilr_gp import EPSILON_GRID, TAU_GRID

    X, y = problem
    clf = ILRGPClassifier(inference="exact", standardize=False).fit(X, y)
    # the default grids, and past an edge where the NLL still fell there
    for scores, grid in ((clf.epsilon_scores_, EPSILON_GRID), (clf.tau_scores_, TAU_GRID)):
        assert set(grid) <= set(scores)
        extra = set(scores) - set(grid)
        assert all(v < min(grid) for v in extra) or all(v > max(grid) for v in extra)
    best = clf.epsilon_scores_[clf.epsilon_]
    assert best == min(clf.epsilon_scores_.values()) == min(clf.tau_scores_.values())
    direct = fit("ilr_gp", X, y, method="exact", num_draws=1,
                 model_options={"epsilon": clf.epsilon_, "tau": clf.tau_})
    mean, var = loo_latent(direct)
    spec = get_spec("ilr_gp")
    again = float(loo_nll(clf._loo_key(), spec.log_link, mean, var, y)[0])
    assert again == pytest.approx(best, rel=1e-4)
    fixed = ILRGPClassifier(inference="exact", tau=0.05, epsilon=0.99).fit(X, y)
    assert fixed.tau_ == 0.05 and fixed.tau_scores_ is None and fixed.epsilon_scores_ is None

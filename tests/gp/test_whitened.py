"""Collapsed sparse posteriors held as whitened inducing draws (``ppgpc.gp.whitened``)
and the Collapsed-ILR fits that store them (predictive kind ``"inducing"``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import toy_problem
from ppgpc.gp import sparse, whitened
from ppgpc.infer import fit
from test_sparse import KERNEL, PARAMS, problem  # noqa: F401  (the fixture)

S = 20_000


def _check_marginals(draws, mean, var):
    """Draws (S, n, L) against the closed-form marginals: mean within 5 Monte Carlo s.e.,
    standard deviation within 5 s.e. of a Gaussian's sample s.d."""
    sd = np.sqrt(np.asarray(var))
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * sd / np.sqrt(S))
    assert np.all(np.abs(draws.std(0) - sd) < 5 * sd / np.sqrt(2 * S))


def test_whitened_draws_give_the_collapsed_predictive(problem):
    """v = L_B^-T (c + e), then f = a^T v + sqrt(k - |a|^2) eps: the draws of f at new inputs
    have the closed-form collapsed predictive marginals (``sparse.predict``), and u = L_m v
    is what f is at the inducing inputs themselves (residual variance ~ the K_mm jitter)."""
    X, Y, _ = problem
    Z, Xs = X[:10] + 0.1, X[:6] - 0.2
    q = sparse.condition(KERNEL, PARAMS, X, Y, Z, 0.05)
    mean, var = sparse.predict(KERNEL, PARAMS, q, Xs)
    v = whitened.sample_whitened(jax.random.PRNGKey(3), q, S)
    assert v.shape == (S, 10, 2)
    eps = jax.random.normal(jax.random.PRNGKey(4), (S, 6, 2))
    draws = np.asarray(whitened.latent_given_whitened(KERNEL, PARAMS, Z, v, Xs, eps))
    _check_marginals(draws, mean, np.broadcast_to(var[:, None], mean.shape))
    u = whitened.inducing_values(KERNEL, PARAMS, Z, v[:5])
    at_Z = whitened.latent_given_whitened(KERNEL, PARAMS, Z, v[:5], Z,
                                                 jnp.zeros((5, 10, 2)))
    np.testing.assert_allclose(u, at_Z, atol=1e-4)
    assert float(jnp.max(jnp.abs(u))) > 0.5


def test_per_output_whitened_draws_give_each_outputs_predictive(problem):
    """Per-output inducing inputs and kernel parameters: column l of the draws follows output
    l's own collapsed predictive (``sparse.predict_per_output``)."""
    X, Y, _ = problem
    Zs = jnp.stack([X[:8], X[5:13] + 0.05])
    params = {"variance": jnp.asarray([2.0, 0.7]),
              "lengthscale": jnp.asarray([[0.8, 1.3], [1.5, 0.6]])}
    noise = jnp.full((40, 2), 0.05)
    q = sparse.condition_per_output(KERNEL, params, X, Y, Zs, noise, params_per_output=True)
    mean, var = sparse.predict_per_output(KERNEL, params, q, X[:6], params_per_output=True)
    v = whitened.sample_whitened(jax.random.PRNGKey(5), q, S)
    eps = jax.random.normal(jax.random.PRNGKey(6), (S, 6, 2))
    draws = np.asarray(whitened.latent_given_whitened(KERNEL, params, Zs, v, X[:6], eps,
                                                             params_per_output=True))
    _check_marginals(draws, mean, var)
    u = np.asarray(whitened.inducing_values(KERNEL, params, Zs, v[:3],
                                                   params_per_output=True))
    for l in range(2):
        at_Z = whitened.latent_given_whitened(
            KERNEL, {k: p[l] for k, p in params.items()}, Zs[l], v[:3, :, l:l + 1], Zs[l],
            jnp.zeros((3, 8, 1)))
        np.testing.assert_allclose(u[..., l], at_Z[..., 0], atol=1e-4)


@pytest.mark.parametrize("shared_inducing", [True, False])
def test_collapsed_ilr_fits_store_inducing_draws_not_training_draws(shared_inducing):
    """A Collapsed-ILR point fit stores S whitened inducing draws (1, S, M, C-1), kind
    ``"inducing"``, no (S, N, C-1) latent; its latent draws at new inputs follow the
    conjugate predictive of the same hyperparameters within Monte Carlo error."""
    X, y = toy_problem(60, 3, seed=6)
    result = fit("ilr_gp_sparse", X, y, method="exact", num_draws=4000, seed=2,
                 model_options={"epsilon": 0.99, "num_inducing": 6, "seed": 2,
                                "shared_inducing": shared_inducing})
    assert result.predictive_kind == "inducing" and result.latent is None
    assert result.inducing.shape == (1, 4000, 6, 2)
    hypers = result.hyper_draw()
    post = result.spec.conjugate.condition(result.data, result.kernel, hypers)
    mean, var = result.spec.conjugate.predict(result.data, result.kernel, hypers, post, X[:8])
    f = np.asarray(result.predict_latent(X[:8]))[0]
    sd = np.sqrt(np.asarray(var))
    assert np.all(np.abs(f.mean(0) - mean) < 5 * sd / np.sqrt(4000))
    assert np.all(np.abs(f.std(0) - sd) < 5 * sd / np.sqrt(2 * 4000))
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert np.mean(probs.argmax(1) == y) > 0.9

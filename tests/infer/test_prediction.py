"""Prediction of a ``FitResult``: shape-stable (a new number of rows compiles nothing once
its padded block size has been compiled) and batch-independent (a row's probabilities are
the same alone, in a batch and in any order, because every row uses the same standard
normals), for each predictive kind: point conjugate (ILR-GP, GPD), latent (NUTS with
sampled hyperparameters; Gibbs with a point estimate) and inducing (SVGP). The shared draws are
checked against a high-draw reference within a Monte Carlo error bound.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fitted_cases
from compile_count import count_compilations
from conftest import toy_problem
from ppgpc.infer import fit
from ppgpc.infer.predictive import (MIN_PREDICTIVE_DRAWS, PREDICT_BLOCK, flat_hypers,
                                    _per_draw_latent_draws, _point_latent_draws)

FITS = ("ilr_exact", "gpd_exact", "ilr_latent", "lsm_gibbs", "svgp_inducing")


@functools.lru_cache(maxsize=None)
def fitted(name: str):
    """One small fit per predictive kind (40 points, 2-D, 3 classes), cached per process."""
    X, y = toy_problem(40, 3, seed=0)
    if name == "ilr_exact":
        return fit("ilr_gp", X, y, method="exact", seed=1)
    if name == "gpd_exact":
        return fit("dirichlet_gp", X, y, method="exact", seed=2)
    if name == "ilr_latent":
        return fit("ilr_gp", X, y, method="nuts", form="latent", num_warmup=50,
                   num_samples=50, max_samples=50, num_chains=1, progress_bar=False, seed=3)
    if name == "lsm_gibbs":  # latent draws, point (given) hyperparameters; shared fit
        return fitted_cases.fitted("logistic_softmax", "gibbs")
    return fit("softmax_svgp", X, y, method="svi", model_options={"num_inducing": 10},
               max_iter=50, num_draws=64, progress_bar=False, seed=4)


def new_inputs(n: int, seed: int = 7) -> np.ndarray:
    """(n, 2) test inputs spread over the toy problem's range."""
    return np.random.default_rng(seed).uniform(-3.0, 3.0, size=(n, 2))


def test_the_compile_counter_sees_a_new_shape():
    f = jax.jit(lambda x: 2.0 * x)
    three, four = jnp.ones(3), jnp.ones(4)
    f(three)
    with count_compilations() as compiled:
        f(three)
    assert compiled == []
    with count_compilations() as compiled:
        f(four)
    assert len(compiled) == 1


@pytest.mark.parametrize("name", FITS)
def test_a_row_is_predicted_the_same_alone_in_a_batch_and_reversed(name):
    result = fitted(name)
    Xs = new_inputs(40)
    batch = result.predict_proba(Xs)
    alone = np.concatenate([result.predict_proba(Xs[i:i + 1]) for i in range(len(Xs))])
    reversed_ = result.predict_proba(Xs[::-1])[::-1]
    assert batch.shape == (40, 3) and np.allclose(batch.sum(1), 1.0)
    np.testing.assert_allclose(alone, batch, rtol=0, atol=1e-12)
    np.testing.assert_allclose(reversed_, batch, rtol=0, atol=1e-12)
    # the per-draw probabilities too, and their mean is predict_proba's (same key and draws
    # where the fit stores at least MIN_PREDICTIVE_DRAWS)
    draws = np.asarray(result.predict_proba_draws(Xs))
    assert draws.shape == (result.num_chains, result.num_draws, 40, 3)
    np.testing.assert_allclose(np.asarray(result.predict_proba_draws(Xs[5:6]))[:, :, 0],
                               draws[:, :, 5], rtol=0, atol=1e-12)
    if result.num_draws >= MIN_PREDICTIVE_DRAWS or not result.point_hypers:
        np.testing.assert_allclose(draws.mean(axis=(0, 1)), batch, rtol=0, atol=1e-12)


def test_rows_beyond_one_block_are_predicted_the_same_alone():
    """More than PREDICT_BLOCK rows: a full block, then a padded one."""
    result = fitted("ilr_exact")
    Xs = new_inputs(PREDICT_BLOCK + 88, seed=8)
    batch = result.predict_proba(Xs)
    rows = [0, PREDICT_BLOCK - 1, PREDICT_BLOCK, len(Xs) - 1]
    alone = np.concatenate([result.predict_proba(Xs[i:i + 1]) for i in rows])
    np.testing.assert_allclose(alone, batch[rows], rtol=0, atol=1e-12)
    assert result.predict_latent(Xs).shape == (1, result.num_draws, len(Xs), 2)


@pytest.mark.parametrize("name", FITS)
def test_a_new_number_of_rows_compiles_nothing(name):
    result = fitted(name)
    Xs = new_inputs(41, seed=9)
    result.predict_proba(Xs[:36])
    result.predict_proba_draws(Xs[:36])
    result.predict_latent(Xs[:36])
    for n in (10, 11, 12, 41):
        with count_compilations() as compiled:
            result.predict_proba(Xs[:n])
            result.predict_proba_draws(Xs[:n])
            result.predict_latent(Xs[:n])
        assert compiled == [], f"{n} rows compiled {compiled}"


@pytest.mark.parametrize("name", ["ilr_exact", "svgp_inducing"])
def test_shared_draws_for_probabilities_independent_draws_for_latents(name):
    """Two copies of one input: predict_proba_draws gives them the same draws (shared
    normals), predict_latent and the training latent independent ones (posterior draws)."""
    result = fitted(name)
    Xs = np.repeat(new_inputs(1, seed=10), 2, axis=0)
    p = np.asarray(result.predict_proba_draws(Xs))
    np.testing.assert_array_equal(p[:, :, 0], p[:, :, 1])
    f = np.asarray(result.predict_latent(Xs))
    assert np.all(f[:, :, 0] != f[:, :, 1])
    # an explicit key gives other draws, still shared by the rows
    q = np.asarray(result.predict_proba_draws(Xs, key=jax.random.PRNGKey(11)))
    np.testing.assert_array_equal(q[:, :, 0], q[:, :, 1])
    assert not np.allclose(p, q)
    # the same defaults give the same numbers on every call
    np.testing.assert_array_equal(np.asarray(result.predict_latent(Xs)), f)
    if name == "svgp_inducing":
        whole = np.asarray(result.training_latent())
        assert whole.shape == (1, result.num_draws, 40, 3)
        y = np.asarray(result.data.y)
        logp = np.asarray(result.spec.log_link(jnp.asarray(whole)))
        expected = np.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
        np.testing.assert_allclose(np.asarray(result.log_likelihood()), expected, rtol=1e-12)


def test_shared_draws_match_an_independent_high_draw_reference():
    """The point-conjugate ILR-GP predictive from shared normals against 200000 independent
    draws of the same Gaussian predictive (``spec.predict``): each (row, class) within
    z < 4.5 of the reference, the standard error from the per-draw standard deviation."""
    result = fitted("ilr_exact")
    assert result.point_hypers and result.predictive_kind == "conjugate"
    Xs = new_inputs(12, seed=12)
    probs = result.predict_proba(Xs)

    hypers = result.hyper_draw(0, 0)
    posterior = result.spec.conjugate.condition(result.data, result.kernel, hypers)
    mean, var = (np.asarray(a) for a in
                 result.spec.conjugate.predict(result.data, result.kernel, hypers, posterior, Xs))
    num_ref = 200_000
    eps = np.random.default_rng(13).standard_normal((num_ref,) + mean.shape)
    per_draw = np.asarray(jnp.exp(result.spec.log_link(
        jnp.asarray(mean + np.sqrt(var) * eps))))                   # (num_ref, n, C)
    reference = per_draw.mean(axis=0)
    sd = per_draw.std(axis=0, ddof=1)
    num_used = max(result.num_draws, MIN_PREDICTIVE_DRAWS)
    se = sd * np.sqrt(1.0 / num_used + 1.0 / num_ref)
    assert np.all(sd > 1e-4)  # a non-degenerate check: the predictive is uncertain here
    z = np.abs(probs - reference) / se
    assert z.max() < 4.5, f"max z {z.max():.2f} at {np.unravel_index(z.argmax(), z.shape)}"


def test_point_hyperparameter_latent_draws_equal_the_per_draw_conditional():
    """With one point of hyperparameters, the latent predictive conditions once for every
    posterior draw; it must equal conditioning draw by draw (same key, same normals)."""
    result = fitted("lsm_gibbs")
    assert result.predictive_kind == "latent" and result.point_hypers
    Xs = jnp.asarray(new_inputs(16, seed=11))
    flat_f = result.latent.reshape((-1,) + result.latent.shape[2:])
    key = jax.random.PRNGKey(12)
    for shared in (True, False):
        fast = _point_latent_draws(key, result.spec, result.kernel, result.data,
                                   result.hyper_draw(0, 0), flat_f, Xs, shared)
        slow = _per_draw_latent_draws(key, result.spec, result.kernel, result.data,
                                      flat_hypers(result), flat_f, Xs, shared)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-10)

"""Exact GP regression for several outputs that share one kernel and one noise vector.

docs/math.md section 1 (Exact model): with Y (N, L) holding L independent outputs that all have
covariance K + diag(noise), ONE Cholesky factor L L^T = K + diag(noise) serves every
output:

    log p(Y) = -1/2 sum_d y_d^T (K + S)^-1 y_d - L/2 log|K + S| - N L / 2 log(2 pi),
    mean(x*) = k*^T (K + S)^-1 Y                      (a row of L numbers),
    var(x*)  = k** - k*^T (K + S)^-1 k*               (the same for every output),

S = diag(noise). The cost is O(N^3 + N^2 L). Heteroscedastic models whose noise differs
per output (GPD, docs/math.md section 2) call these functions once per output under ``vmap``.

Training data padded to a fixed size (``ppgpc.runtime.padding``) come with a row mask m: the
functions that take ``mask`` use the covariance K o (m m^T) + diag(1 - m) and noise S m, so
that the padded rows are a decoupled identity block with zero targets, and cross-covariances
K*n o m^T; the real rows' results are then those of the unpadded data.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, gram_diag
from ppgpc.runtime.padding import mask_columns, mask_gram

__all__ = [
    "ExactPosterior",
    "noise_diagonal",
    "log_marginal_likelihood",
    "condition",
    "predict",
    "sample_posterior_at_inputs",
    "conditional_from_latent",
    "latent_conditional",
    "whitened_latent",
    "loo_predictive",
]


class ExactPosterior(NamedTuple):
    """The conjugate posterior of a multi-output GP, ready for prediction."""

    X: jax.Array
    """(N, D) training inputs."""
    chol: jax.Array
    """(N, N) lower Cholesky factor of K + diag(noise) (+ jitter I)."""
    alpha: jax.Array
    """(N, L) (K + diag(noise))^-1 Y."""
    jitter: jax.Array
    """() jitter that the Cholesky needed (0.0 normally)."""
    mask: jax.Array | None = None
    """(N,) row mask of padded training data (``ppgpc.runtime.padding``), None for unpadded data."""


def noise_diagonal(noise_var, num_points: int, mask=None) -> jax.Array:
    """Broadcast a scalar or (N,) noise variance to shape (N,), zero on padded rows."""
    noise = jnp.broadcast_to(jnp.asarray(noise_var, dtype=jnp.float64), (num_points,))
    return noise if mask is None else noise * mask


def log_marginal_likelihood(K: jax.Array, Y: jax.Array, noise_var) -> jax.Array:
    """sum_d log N(y_d | 0, K + diag(noise)), one Cholesky for all L outputs.

    Args:
        K: (N, N) prior covariance.
        Y: (N, L) targets (centred: subtract any mean function first).
        noise_var: scalar or (N,) noise variance shared by the outputs.

    Returns:
        Scalar log marginal likelihood.
    """
    N, num_outputs = Y.shape
    A = K + jnp.diag(noise_diagonal(noise_var, N))
    L = linalg.cholesky(A).factor
    W = linalg.tri_solve(L, Y)  # L^-1 Y, so y^T A^-1 y = |L^-1 y|^2
    return (
        -0.5 * jnp.sum(W * W)
        - 0.5 * num_outputs * linalg.logdet(L)
        - 0.5 * N * num_outputs * math.log(2.0 * math.pi)
    )


def condition(kernel, params, X: jax.Array, Y: jax.Array, noise_var,
              mask=None) -> ExactPosterior:
    """Condition the GP on (X, Y) with noise: one Cholesky of K + diag(noise).

    Args:
        kernel, params: the kernel and its parameters.
        X: (N, D) inputs; Y: (N, L) centred targets; noise_var: scalar or (N,).
        mask: (N,) row mask of padded data (module docstring), or None.
    """
    K = mask_gram(gram(kernel, params, X), mask)
    if mask is not None:
        Y = Y * mask[:, None]
    chol = linalg.cholesky(K + jnp.diag(noise_diagonal(noise_var, X.shape[0], mask)),
                           rows=mask)
    return ExactPosterior(X, chol.factor, linalg.cho_solve(chol.factor, Y), chol.jitter,
                          mask)


def predict(kernel, params, posterior: ExactPosterior, Xs: jax.Array):
    """Latent predictive marginals at Xs (n, D).

    Returns:
        mean (n, L) = K*n alpha and variance (n,) = k** - diag(K*n (K + S)^-1 Kn*),
        the variance shared by every output and clipped at 0 from below.
    """
    Ksn = mask_columns(gram(kernel, params, Xs, posterior.X), posterior.mask)
    mean = Ksn @ posterior.alpha
    V = linalg.tri_solve(posterior.chol, Ksn.T)  # (N, n)
    var = gram_diag(kernel, params, Xs) - jnp.sum(V * V, axis=0)
    return mean, jnp.maximum(var, 0.0)


def sample_posterior_at_inputs(
    key: jax.Array, kernel, params, posterior: ExactPosterior, Y: jax.Array, noise_var,
    num_samples: int,
) -> jax.Array:
    """Joint posterior draws of the latent f at the training inputs, by Matheron's rule.

    f_post = f_prior + K (K + S)^-1 (Y - f_prior - e),  f_prior ~ N(0, K), e ~ N(0, S),
    which has exactly the posterior law N(K (K+S)^-1 Y, K - K (K+S)^-1 K) and needs only the
    Cholesky of K + S (already in ``posterior``) and one of K (with adaptive jitter).

    The standard normals are drawn point-major, (N, S, L), so that a point's draws do not
    depend on how many rows follow it (padded data draw the same ones for the real rows).

    Returns:
        (num_samples, N, L) draws.
    """
    X, mask = posterior.X, posterior.mask
    N, num_outputs = Y.shape
    K = mask_gram(gram(kernel, params, X), mask)
    if mask is not None:
        Y = Y * mask[:, None]
    LK = linalg.cholesky(K, rows=mask).factor
    k_prior, k_noise = jax.random.split(key)
    shape = (N, num_samples, num_outputs)
    f_prior = jnp.einsum("ij,jsl->sil", LK, jax.random.normal(k_prior, shape))
    noise_sd = jnp.sqrt(noise_diagonal(noise_var, N, mask))[None, :, None]
    e = noise_sd * jnp.moveaxis(jax.random.normal(k_noise, shape), 0, 1)
    resid = Y[None] - f_prior - e  # (S, N, L)
    # K (K + S)^-1 resid for all draws with one solve: stack draws along the columns.
    flat = jnp.moveaxis(resid, 0, 1).reshape(N, num_samples * num_outputs)
    update = (K @ linalg.cho_solve(posterior.chol, flat)).reshape(N, num_samples, num_outputs)
    return f_prior + jnp.moveaxis(update, 1, 0)


def conditional_from_latent(kernel, params, X: jax.Array, f: jax.Array, Xs: jax.Array,
                            mask=None):
    """Noise-free GP conditional f(Xs) | f(X) = f (used for latent-form MCMC draws).

    mean = K*n K^-1 f, var = k** - diag(K*n K^-1 Kn*), with K factorised once (adaptive
    jitter; the Gram matrix of an RBF kernel is numerically singular for close inputs).

    Args:
        X: (N, D); f: (N, L) latent values at X; Xs: (n, D).
        mask: (N,) row mask of padded data (module docstring), or None.

    Returns:
        mean (n, L) and variance (n,).
    """
    LK = linalg.cholesky(mask_gram(gram(kernel, params, X), mask), rows=mask).factor
    Ksn = mask_columns(gram(kernel, params, Xs, X), mask)
    mean = Ksn @ linalg.cho_solve(LK, f)
    V = linalg.tri_solve(LK, Ksn.T)
    var = gram_diag(kernel, params, Xs) - jnp.sum(V * V, axis=0)
    return mean, jnp.maximum(var, 0.0)


def latent_conditional(kernel, params, X: jax.Array, f: jax.Array, Xs: jax.Array,
                       mask=None):
    """The prior GP's conditional of every latent at Xs given its values f at X, with the
    variance given per latent: ``conditional_from_latent``'s

        mean = K*n K^-1 f  (n, L),    var = k** - diag(K*n K^-1 Kn*)  (n,),

    the variance broadcast to (n, L) (the latents share the kernel). Every model's
    ``latent_conditional`` (the predictive of latent-form draws at new inputs) is this.

    Args:
        kernel, params: the kernel and its parameters (``kernels.kernel_params``).
        X: (N, D) training inputs; f: (N, L) latent values at X; Xs: (n, D).
        mask: (N,) row mask of padded data (module docstring), or None.

    Returns:
        mean (n, L) and variance (n, L).
    """
    mean, var = conditional_from_latent(kernel, params, X, f, Xs, mask)
    return mean, jnp.broadcast_to(var[:, None], mean.shape)


def whitened_latent(chol_K: jax.Array, num_latent: int, mean=None) -> jax.Array:
    """The whitened latent of every latent-form model, as NumPyro sites:

        v_l ~ N(0, I_N)  (site ``f_white``, (L, N), inside the plate ``latent``),
        f_l = chol(K_l) v_l + mean_l  (deterministic site ``f``, (N, L)),

    which NUTS samples far better than the centred f ~ N(mean, K).

    Args:
        chol_K: (N, N) Cholesky factor of the Gram matrix shared by the latents, or
            (L, N, N) one per latent.
        num_latent: L.
        mean: optional (L,) constant prior mean per latent (None: zero).

    Returns:
        (N, L) the latent f at the training inputs.
    """
    N = chol_K.shape[-1]
    with numpyro.plate("latent", num_latent, dim=-1):
        v = numpyro.sample("f_white", dist.Normal(jnp.zeros(N), 1.0).to_event(1))
    if chol_K.ndim == 2:
        f = chol_K @ v.T                                            # (N, L)
    else:
        f = jnp.einsum("lij,lj->il", chol_K, v)                     # (N, L)
    if mean is not None:
        f = f + mean[None, :]
    return numpyro.deterministic("f", f)


def loo_predictive(posterior: ExactPosterior, Y: jax.Array, noise_var):
    """Leave-one-out predictive marginals of the latent at every training input, in closed
    form from the one Cholesky factor already in ``posterior`` (Rasmussen and Williams,
    section 5.4.2).

    With A = K + diag(noise) and alpha = A^-1 Y, the predictive of the noisy target y_i given
    every other point, with the hyperparameters held fixed, is

        mean_i = y_i - alpha_i / [A^-1]_ii,      var(y_i) = 1 / [A^-1]_ii,

    and the latent's variance drops point i's own noise: var(f_i) = 1 / [A^-1]_ii - noise_i
    (it does not depend on point i's target or noise at all). The diagonal of A^-1 is the
    column sums of squares of L^-1 (one triangular solve against the identity, O(N^3), the
    cost of the factorisation itself); no inverse is used to solve a system.

    Args:
        posterior: ``condition``'s result for the targets Y.
        Y: (N, L) the targets it was conditioned on (centred: subtract any mean first).
        noise_var: scalar or (N,) noise variance of that fit.

    Returns:
        mean (N, L) of f_i given the other points' targets (the mean the model adds back is
        not included) and variance (N,), clipped at 0 from below.
    """
    N = posterior.chol.shape[0]
    L_inv = linalg.tri_solve(posterior.chol, jnp.eye(N, dtype=posterior.chol.dtype))
    a_inv_diag = jnp.sum(L_inv * L_inv, axis=0)                        # [A^-1]_ii
    mean = Y - posterior.alpha / a_inv_diag[:, None]
    # the jitter the factorisation needed was added to the noise: drop it with the noise
    var = 1.0 / a_inv_diag - noise_diagonal(noise_var, N, posterior.mask) - posterior.jitter
    return mean, jnp.maximum(var, 0.0)

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
from numpyro.distributions import constraints

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, gram_diag
from ppgpc.runtime.padding import mask_columns, mask_gram

__all__ = [
    "ExactPosterior",
    "noise_diagonal",
    "log_marginal_likelihood",
    "gaussian_log_densities",
    "MarginalGaussian",
    "two_level_log_densities",
    "TwoLevelMarginalGaussian",
    "condition",
    "prior_factors",
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


@jax.custom_vjp
def _log_densities(A: jax.Array, R: jax.Array, rows) -> jax.Array:
    return _log_densities_fwd(A, R, rows)[0]


def _log_densities_fwd(A, R, rows):
    N = A.shape[-1]
    factor = linalg.cholesky(A, rows=rows).factor
    alpha = linalg.cho_solve(factor, R.T)                                   # (N, k)
    value = (-0.5 * jnp.sum(R.T * alpha, axis=0) - 0.5 * linalg.logdet(factor)
             - 0.5 * N * math.log(2.0 * math.pi))
    return value, (factor, alpha, rows)


def _log_densities_bwd(residuals, g):
    factor, alpha, rows = residuals
    inverse = linalg.cho_solve(factor, jnp.eye(factor.shape[-1], dtype=factor.dtype))
    weighted = alpha * g                                                     # (N, k)
    dA = 0.5 * (weighted @ alpha.T - jnp.sum(g) * inverse)
    return dA, -weighted.T, (None if rows is None else jnp.zeros_like(rows))


_log_densities.defvjp(_log_densities_fwd, _log_densities_bwd)


def gaussian_log_densities(A: jax.Array, R: jax.Array, rows=None) -> jax.Array:
    """log N(r_j | 0, A) of each row r_j of R, from one Cholesky of A, with the gradient
    from the same factor.

    Args:
        A: (N, N) symmetric positive definite covariance (factorised with adaptive jitter,
            ``linalg.cholesky``; ``rows`` as there).
        R: (k, N) residuals sharing that covariance.

    Returns:
        (k,) log densities -1/2 r^T A^-1 r - 1/2 log|A| - N/2 log(2 pi).

    The reverse-mode derivative is the closed form (Rasmussen and Williams 2006, eq. 5.9)

        d/dA sum_j g_j log N(r_j | 0, A) = 1/2 sum_j g_j (alpha_j alpha_j^T - A^-1),
        d/dr_j = -g_j alpha_j,     alpha_j = A^-1 r_j,

    with A^-1 = L^-T L^-1 I from the factor of the forward pass: one factorisation and one
    pair of triangular solves in all, where differentiating through the factorisation
    costs several N^3 solves more. The jitter is held fixed, as in ``linalg.cholesky``.
    The forward-mode derivative is not defined (reverse mode only).
    """
    return _log_densities(A, R, rows)


class MarginalGaussian(dist.Distribution):
    """N(loc, covariance) over the last axis: the collapsed form of a conjugate GP model,
    whose log density and its gradient come from one Cholesky per covariance
    (``gaussian_log_densities``).

    Args:
        loc: (..., N) means.
        covariance: (N, N), shared by every batch entry, or (B, N, N), one per entry of the
            last batch axis.
        rows: optional (N,) 0/1 weights of padded rows for the jitter (``linalg.cholesky``).
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance": constraints.positive_definite}
    support = constraints.real_vector
    pytree_data_fields = ("loc", "covariance", "rows")

    def __init__(self, loc, covariance, rows=None, *, validate_args=None):
        self.loc, self.covariance, self.rows = loc, covariance, rows
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(loc)[:-1],
                                               jnp.shape(covariance)[:-2])
        super().__init__(batch_shape=batch_shape, event_shape=jnp.shape(covariance)[-1:],
                         validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        factor = linalg.cholesky(self.covariance, rows=self.rows).factor
        eps = jax.random.normal(key, tuple(sample_shape) + self.batch_shape + self.event_shape)
        return self.loc + jnp.einsum("...ij,...j->...i", factor, eps)

    def log_prob(self, value):
        N = self.event_shape[0]
        resid = value - self.loc
        resid = jnp.broadcast_to(resid, jnp.broadcast_shapes(jnp.shape(resid),
                                                             self.batch_shape + (N,)))
        if jnp.ndim(self.covariance) == 2:
            flat = resid.reshape(-1, N)
            return _log_densities(self.covariance, flat, self.rows).reshape(resid.shape[:-1])
        B = self.covariance.shape[0]
        resid = jnp.broadcast_to(resid, resid.shape[:-2] + (B, N))
        per_entry = jnp.moveaxis(resid.reshape(-1, B, N), 1, 0)             # (B, S, N)
        out = jax.vmap(_log_densities, in_axes=(0, 0, None))(self.covariance, per_entry,
                                                             self.rows)      # (B, S)
        return jnp.moveaxis(out, 0, 1).reshape(resid.shape[:-1])


@jax.custom_vjp
def _two_level(B, R, onehot, gap, rows):
    return _two_level_fwd(B, R, onehot, gap, rows)[0]


def _two_level_fwd(B, R, onehot, gap, rows):
    N = B.shape[-1]
    eye = jnp.eye(N, dtype=B.dtype)
    factor = linalg.cholesky(B, rows=rows).factor
    B_inv = linalg.cho_solve(factor, eye)
    same = onehot @ onehot.T                                   # (N, N) 1 where one class
    G_factor = linalg.cholesky(eye / gap - B_inv * same).factor  # class blocks, no fill-in
    U = B_inv @ R.T                                            # (N, C) B^-1 r_c
    u = jnp.sum(U * onehot, axis=1)                            # (N,) U[i, y_i]
    w = linalg.cho_solve(G_factor, u)                          # (N,) class-block solves
    alpha = U + B_inv @ (w[:, None] * onehot)                  # (N, C) A_c^-1 r_c
    quad = jnp.sum(R.T * alpha, axis=0)
    block_logdet = onehot.T @ (jnp.log(gap)
                               + 2.0 * jnp.log(jnp.diagonal(G_factor)))
    value = -0.5 * (quad + linalg.logdet(factor) + block_logdet + N * math.log(2.0 * math.pi))
    return value, (B_inv, G_factor, alpha, onehot, rows)


def _two_level_bwd(residuals, g):
    B_inv, G_factor, alpha, onehot, rows = residuals
    N = B_inv.shape[-1]
    H = linalg.cho_solve(G_factor, jnp.eye(N, dtype=B_inv.dtype))  # class-block G^-1
    class_weight = onehot @ g                                  # (N,) g of each row's class
    weighted = alpha * g                                       # (N, C)
    inverse_sum = jnp.sum(g) * B_inv + B_inv @ ((class_weight[:, None] * H) @ B_inv)
    dB = 0.5 * (weighted @ alpha.T - inverse_sum)
    return (dB, -weighted.T, jnp.zeros_like(onehot), None,
            None if rows is None else jnp.zeros_like(rows))


_two_level.defvjp(_two_level_fwd, _two_level_bwd)


def two_level_log_densities(K: jax.Array, R: jax.Array, onehot: jax.Array, low, high,
                            mask=None) -> jax.Array:
    """log N(r_c | 0, K + S_c) of C outputs that share the prior covariance K and whose
    noise takes two values: S_c = diag(high on the rows of class c, low elsewhere).

    Args:
        K: (N, N) prior covariance (padded rows a decoupled identity block).
        R: (C, N) residuals, one row per output.
        onehot: (N, C) class indicators (0 on padded rows).
        low, high: the two noise variances, high < low; held constant (no derivative
            flows to them: ``jax.lax.stop_gradient``).
        mask: (N,) row mask of padded data, or None.

    Returns:
        (C,) log densities, as ``gaussian_log_densities`` of each output on its own.

    With B = K + low I (on real rows), d = low - high and P_c the rows of class c,
    K + S_c = B - d P_c P_c^T, so by Woodbury's identity and the determinant lemma

        (K + S_c)^-1 = B^-1 + B^-1 P_c M_c^-1 P_c^T B^-1,   M_c = I / d - P_c^T B^-1 P_c,
        log|K + S_c| = log|B| + n_c log d + log|M_c|,

    and every M_c is one class block of G = I / d - B^-1 o E (E_ij = 1 where rows i and j
    share a class), whose Cholesky factor has no fill-in between classes: ONE factorisation
    of B and one of G serve all C outputs, where C factorisations were needed before; M_c
    is positive definite because K + S_c is, with eigenvalues at least high / (d low).
    The reverse-mode derivative is closed-form as in ``gaussian_log_densities``, with
    sum_c g_c (K + S_c)^-1 = (sum_c g_c) B^-1 + B^-1 (diag(g_y) G^-1) B^-1.
    """
    N = K.shape[-1]
    low, high = jax.lax.stop_gradient(low), jax.lax.stop_gradient(high)
    real = jnp.ones(N, dtype=K.dtype) if mask is None else mask
    B = K + jnp.diag(low * real)
    return _two_level(B, R, onehot * real[:, None], low - high, mask)


class TwoLevelMarginalGaussian(dist.Distribution):
    """The C outputs of ``two_level_log_densities`` as one NumPyro distribution: batch shape
    (C,), event shape (N,).

    Args:
        loc: (C, N) means.
        K: (N, N) prior covariance shared by the outputs.
        onehot: (N, C) class indicators; low, high: the two noise variances (constants).
        mask: (N,) row mask of padded data, or None.
    """

    arg_constraints = {"loc": constraints.real_matrix}
    support = constraints.real_vector
    pytree_data_fields = ("loc", "K", "onehot", "low", "high", "mask")

    def __init__(self, loc, K, onehot, low, high, mask=None, *, validate_args=None):
        self.loc, self.K, self.onehot = loc, K, onehot
        self.low, self.high, self.mask = low, high, mask
        super().__init__(batch_shape=jnp.shape(loc)[:-1], event_shape=jnp.shape(K)[-1:],
                         validate_args=validate_args)

    def covariances(self) -> jax.Array:
        """(C, N, N) K + S_c of every output."""
        N = self.event_shape[0]
        real = jnp.ones(N) if self.mask is None else self.mask
        noise = jnp.where(self.onehot > 0, self.high, self.low) * real[:, None]  # (N, C)
        return self.K + jax.vmap(jnp.diag)(noise.T)

    def sample(self, key, sample_shape=()):
        return MarginalGaussian(self.loc, self.covariances(), self.mask).sample(key,
                                                                               sample_shape)

    def log_prob(self, value):
        resid = jnp.broadcast_to(value - self.loc, jnp.shape(value)[:-2] + self.loc.shape)
        flat = resid.reshape((-1,) + self.loc.shape)
        out = jax.vmap(two_level_log_densities, in_axes=(None, 0, None, None, None, None))(
            self.K, flat, self.onehot, self.low, self.high, self.mask)
        return out.reshape(resid.shape[:-1])


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


def prior_factors(kernel, params, X: jax.Array, mask=None) -> tuple[jax.Array, jax.Array]:
    """(K, chol(K)): the masked Gram matrix (N, N) at X and its lower Cholesky factor
    (adaptive jitter), what ``sample_posterior_at_inputs`` draws the prior from."""
    K = mask_gram(gram(kernel, params, X), mask)
    return K, linalg.cholesky(K, rows=mask).factor


def sample_posterior_at_inputs(
    key: jax.Array, kernel, params, posterior: ExactPosterior, Y: jax.Array, noise_var,
    num_samples: int, prior: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Joint posterior draws of the latent f at the training inputs, by Matheron's rule.

    f_post = f_prior + K (K + S)^-1 (Y - f_prior - e),  f_prior ~ N(0, K), e ~ N(0, S),
    which has exactly the posterior law N(K (K+S)^-1 Y, K - K (K+S)^-1 K) and needs only the
    Cholesky of K + S (already in ``posterior``) and one of K (with adaptive jitter).

    The standard normals are drawn point-major, (N, S, L), so that a point's draws do not
    depend on how many rows follow it (padded data draw the same ones for the real rows).

    Args:
        prior: ``prior_factors(kernel, params, X, mask)``, (K, chol(K)), when the caller
            has them (one kernel shared by several posteriors); None computes them.

    Returns:
        (num_samples, N, L) draws.
    """
    X, mask = posterior.X, posterior.mask
    N, num_outputs = Y.shape
    K, LK = prior_factors(kernel, params, X, mask) if prior is None else prior
    if mask is not None:
        Y = Y * mask[:, None]
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

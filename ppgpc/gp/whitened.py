"""The optimal q(u) of the collapsed bound held as whitened draws, and the latent at any
inputs given one (the driver's predictive kind ``"inducing"`` for collapsed sparse fits).

docs/math.md section 1. With L_m L_m^T = K_mm, B = I + A A^T = L_B L_B^T and
c = L_B^-1 A Lambda^-1/2 Y (``ppgpc.gp.sparse``), the optimal q(u) = N(mu, S) has
Sigma = L_m^-T B^-1 L_m^-1, so the whitened inducing values v = L_m^-1 u are

    q(v) = N(L_B^-T c, B^-1),   a draw  v = L_B^-T (c + e),  e ~ N(0, I_M),

and given v the latent at inputs x has the sparse conditional

    f(x) | v ~ N(a(x)^T v, k(x, x) - |a(x)|^2),   a(x) = L_m^-1 k_m(x),

whose average over q(v) is the collapsed predictive (mean a^T L_B^-T c, variance
k - |a|^2 + |L_B^-1 a|^2). A fit stores S draws of v, (S, M, L): O(S M L) floats whatever
N, where draws of f at the N training inputs would take O(S N L). The cost of a prediction
at n inputs is O(M^3 + n M^2 + S n M L), independent of N.

Per-output inducing inputs (``SparsePosterior`` fields with a leading output axis, ``c``
(L, M, 1)): output l is drawn from its own q(v_l) and predicted from its own Z_l and
L_m,l; its draws fill column l of v.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, gram_diag
from ppgpc.gp.sparse import DEFAULT_KMM_JITTER, SparsePosterior, inducing_cholesky, map_outputs

__all__ = ["sample_whitened", "latent_given_whitened", "inducing_values"]


def _per_output(post: SparsePosterior) -> bool:
    return post.c.ndim == 3


def sample_whitened(key: jax.Array, post: SparsePosterior, num_samples: int) -> jax.Array:
    """(S, M, L) draws v = L_B^-T (c + e) of q(v), e ~ N(0, I) (module docstring), for a
    shared posterior (``c`` (M, L)) or a per-output one (``c`` (L, M, 1): column l from
    output l's factor)."""
    if _per_output(post):
        L, M, _ = post.c.shape
        e = jax.random.normal(key, (num_samples, M, L))
        w = post.c[:, :, 0].T[None] + e                                       # (S, M, L)

        def one(chol_B, w_l):                                                 # (M, M), (S, M)
            return jax.scipy.linalg.solve_triangular(chol_B, w_l.T, lower=True, trans="T").T

        return jnp.moveaxis(jax.vmap(one)(post.chol_B, jnp.moveaxis(w, -1, 0)), 0, -1)
    M, L = post.c.shape
    e = jax.random.normal(key, (num_samples, M, L))
    w = jnp.moveaxis(post.c[None] + e, 0, 1).reshape(M, num_samples * L)     # (M, S L)
    v = jax.scipy.linalg.solve_triangular(post.chol_B, w, lower=True, trans="T")
    return jnp.moveaxis(v.reshape(M, num_samples, L), 1, 0)


def _latent_one(kernel, params, Z, v, Xs, eps, kmm_jitter, extra_var):
    """f = a^T v + sqrt(k - |a|^2 + extra_var) eps at Xs (n, D) for v (S, M, L) at one Z
    (M, D); ``extra_var`` (n, L) or 0."""
    a = linalg.tri_solve(inducing_cholesky(kernel, params, Z, kmm_jitter).factor,
                         gram(kernel, params, Z, Xs))                          # (M, n)
    resid = jnp.maximum(gram_diag(kernel, params, Xs) - jnp.sum(a * a, 0), 0.0)
    return (jnp.einsum("mn,sml->snl", a, v)
            + jnp.sqrt(resid[:, None] + extra_var)[None] * eps)


def _per_output_sets(Z: jax.Array, params_per_output: bool, num_outputs: int) -> jax.Array:
    """Z as one set per output, (L, M, D): per-output parameters with a shared Z use it for
    every output."""
    if Z.ndim == 3:
        return Z
    return jnp.broadcast_to(Z, (num_outputs,) + Z.shape)


def latent_given_whitened(kernel, params, Z: jax.Array, v: jax.Array, Xs: jax.Array,
                          eps: jax.Array, kmm_jitter: float = DEFAULT_KMM_JITTER,
                          params_per_output: bool = False, extra_var=0.0) -> jax.Array:
    """Draws of the latent at Xs given whitened inducing draws (module docstring).

    Args:
        kernel, params: the kernel and its parameters (with a leading output axis when
            ``params_per_output``).
        Z: (M, D) shared inducing inputs, or (L, M, D) one set per output.
        v: (S, M, L) whitened draws (``sample_whitened``); Xs: (n, D);
        eps: (S, n, L) standard normals (the residual of p(f | v), independent per input).
        kmm_jitter: the relative K_mm jitter the posterior was conditioned with.
        extra_var: (n, L) variance added to each input's residual (a noise the model's
            predictive includes), or 0.

    Returns:
        (S, n, L) draws f(Xs), one per draw of v.
    """
    if Z.ndim == 2 and not params_per_output:
        return _latent_one(kernel, params, Z, v, Xs, eps, kmm_jitter, extra_var)
    L = v.shape[-1]
    extra = jnp.broadcast_to(jnp.asarray(extra_var, dtype=v.dtype), (Xs.shape[0], L))
    axes = (0 if params_per_output else None, 0, 0, 0, 0)
    draws = map_outputs(
        lambda p, Z_l, v_l, e_l, x_l: _latent_one(kernel, p, Z_l, v_l[..., None], Xs,
                                                  e_l[..., None], kmm_jitter,
                                                  x_l[:, None])[..., 0],
        axes)(params, _per_output_sets(Z, params_per_output, L), jnp.moveaxis(v, -1, 0),
              jnp.moveaxis(eps, -1, 0), extra.T)                              # (L, S, n)
    return jnp.moveaxis(draws, 0, -1)


def inducing_values(kernel, params, Z: jax.Array, v: jax.Array,
                    kmm_jitter: float = DEFAULT_KMM_JITTER,
                    params_per_output: bool = False) -> jax.Array:
    """u = L_m v, the latent at its own inducing inputs for whitened draws v (..., M, L):
    column l at Z (shared) or at Z_l (per output), (..., M, L)."""
    if Z.ndim == 2 and not params_per_output:
        chol = inducing_cholesky(kernel, params, Z, kmm_jitter).factor
        return jnp.einsum("mk,...kl->...ml", chol, v)
    axes = (0 if params_per_output else None, 0, 0)
    u = map_outputs(
        lambda p, Z_l, v_l: jnp.einsum(
            "mk,...k->...m", inducing_cholesky(kernel, p, Z_l, kmm_jitter).factor, v_l),
        axes)(params, _per_output_sets(Z, params_per_output, v.shape[-1]),
              jnp.moveaxis(v, -1, 0))                                         # (L, ..., M)
    return jnp.moveaxis(u, 0, -1)

"""The whitened prior of the inducing values, its KL to q(v), and the SVGP conditional
p(f | v) at inputs: projections a_i = L_mm^-1 k_mi, per latent when the kernels or inducing
inputs are (``ppgpc.models.svgp``)."""

from __future__ import annotations

import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions.kl import kl_divergence

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, gram_diag
from ppgpc.gp.sparse import inducing_cholesky, map_outputs


__all__ = ["WhitenedPrior", "svgp_conditional", "marginal_moments"]

_MIN_VAR = 1e-10
"""Floor on the conditional variance k_ii - |a_i|^2 (exactly 0 at an inducing input)."""


# ---------------------------------------------------------------- the whitened prior
class WhitenedPrior(dist.MultivariateNormal):
    """N(0, I_M) for each of ``num_latent`` whitened inducing vectors: batch (L,), event (M,).

    A distinct type only so that its KL from a ``MultivariateNormal`` q can be registered in
    closed form at O(L M^2) (NumPyro's generic MVN-MVN KL solves with the prior's factor,
    O(L M^3)).
    """

    def __init__(self, num_latent: int, num_inducing: int):
        eye = jnp.broadcast_to(jnp.eye(num_inducing), (num_latent, num_inducing, num_inducing))
        super().__init__(jnp.zeros((num_latent, num_inducing)), scale_tril=eye)


@kl_divergence.register(dist.MultivariateNormal, WhitenedPrior)
def _kl_whitened(p, q):
    """KL(N(m, R R^T) || N(0, I)) = 1/2 (|m|^2 + |R|_F^2 - M - 2 sum log |diag R|), (L,)."""
    M = p.loc.shape[-1]
    R = jnp.broadcast_to(p.scale_tril, p.batch_shape + (M, M))
    m = jnp.broadcast_to(p.loc, p.batch_shape + (M,))
    log_diag = jnp.log(jnp.abs(jnp.diagonal(R, axis1=-2, axis2=-1)))
    return 0.5 * (jnp.sum(m * m, -1) + jnp.sum(R * R, (-2, -1)) - M) - jnp.sum(log_diag, -1)


# ----------------------------------------------------------------- SVGP conditional
def _latent_axes(data) -> tuple[int | None, int | None]:
    """``vmap`` axes over latents of the kernel parameters and the inducing inputs (None:
    shared by the latents)."""
    return (None if data.shared_kernel else 0), (None if data.shared_inducing else 0)


def _per_latent(data, fn, *more_axes):
    """``fn(params, Z, *more)`` as it is when kernel and inducing inputs are shared, else
    mapped over the latents one at a time (outputs gain a leading L axis).

    The map is ``ppgpc.gp.sparse.map_outputs`` (a ``lax.map`` loop), not ``vmap``: one
    latent at a time the Cholesky factors and triangular solves are unbatched LAPACK calls,
    which cannot wait on each other in XLA's CPU thread pool as batched ones can
    (docs/records/speed.md, "One latent at a time").
    """
    kernel_axis, inducing_axis = _latent_axes(data)
    if kernel_axis is None and inducing_axis is None:
        return fn
    return map_outputs(fn, (kernel_axis, inducing_axis) + more_axes)


def _chol_mm(data, kernel, params, Z):
    """Cholesky factor of K_mm + jitter: (M, M), or (L, M, M) per latent (padded inducing
    inputs, ``data.inducing_mask``, an identity block)."""
    return _per_latent(data, lambda p, z: inducing_cholesky(kernel, p, z, data.kmm_jitter,
                                                            data.inducing_mask)
                       .factor)(params, Z)


def _projection_one(kernel, params, Z, chol_mm, Xs, inducing_mask=None):
    K = gram(kernel, params, Z, Xs)
    if inducing_mask is not None:  # padded inducing inputs see nothing
        K = K * inducing_mask[:, None]
    a = linalg.tri_solve(chol_mm, K)
    resid = gram_diag(kernel, params, Xs) - jnp.sum(a * a, axis=0)
    return a, jnp.maximum(resid, _MIN_VAR)


def _projection(data, kernel, params, Z, chol_mm, Xs):
    """a = L_mm^-1 K_m* and the residual variance k** - |a|^2, floored: (M, n) and (n,)
    when kernel and inducing inputs are shared, else (L, M, n) and (L, n)."""
    return _per_latent(data, lambda p, z, c: _projection_one(kernel, p, z, c, Xs,
                                                             data.inducing_mask), 0)(
        params, Z, chol_mm)


def svgp_conditional(data, kernel, params, Z, chol_mm, v, Xs):
    """p(f(Xs) | v) for whitened inducing values (docs/math.md section 4).

    Args:
        data: ``SVGPData`` (whether kernel and inducing inputs are shared by the latents).
        Z: (M, D) or (L, M, D) inducing inputs; chol_mm: (M, M) or (L, M, M) Cholesky
            factors of K_mm; v: (..., L, M) whitened inducing values; Xs: (n, D).

    Returns:
        mean (..., n, L) = a_c^T v_c per latent, and variance k** - |a_c|^2 (floored at
        1e-10), shaped (n, 1) when the latents share kernel and inducing inputs, else (n, L).
    """
    a, resid = _projection(data, kernel, params, Z, chol_mm, Xs)
    if a.ndim == 2:
        return jnp.einsum("mn,...lm->...nl", a, v), resid[:, None]
    return jnp.einsum("lmn,...lm->...nl", a, v), resid.T


def marginal_moments(a, resid, q_mean, q_tril):
    """The marginals of q(f_i) = int p(f_i | v) q(v) dv at a batch of inputs.

    Args:
        a: (M, B) L_mm^-1 K_mb, or (L, M, B) per latent; resid: (B,) k_ii - |a_i|^2, or
            (L, B); q_mean: (L, M) m_c; q_tril: (L, M, M) R_c.

    Returns:
        mean (B, L) = a_ci^T m_c and variance (B, L) = resid_ci + |R_c^T a_ci|^2.
    """
    if a.ndim == 2:
        proj = jnp.einsum("lmk,mb->lkb", q_tril, a)                         # R_c^T a_i
        return a.T @ q_mean.T, resid[:, None] + jnp.sum(proj * proj, axis=1).T
    proj = jnp.einsum("lmk,lmb->lkb", q_tril, a)
    mean = jnp.einsum("lmb,lm->bl", a, q_mean)
    return mean, resid.T + jnp.sum(proj * proj, axis=1).T

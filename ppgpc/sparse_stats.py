"""The data statistics of Titsias's collapsed bound, summed over blocks of points.

docs/math.md section 1 (Collapsed sparse) and section 2 (Sparse GPD). With L_m L_m^T = K_mm
(+ jitter) replicated, a_i = L_m^-1 k_m(x_i) (M,) and noise weights w_i = 1 / noise_i, the
bound and the optimal q(u) (``ppgpc.sparse``) need the data only through

    P = sum_i w_i a_i a_i^T  (M, M)    = L_m^-1 K_mn Lambda^-1 K_nm L_m^-T
    R = sum_i w_i a_i y_i^T  (M, L)    = L_m^-1 K_mn Lambda^-1 Y
    T = sum_i w_i (k_ii - |a_i|^2)     = tr(Lambda^-1 (K_nn - Q_nn))
    Q = sum_i w_i |y_i|^2,   G = sum_i log noise_i,

sums over points that ``ppgpc.blocks.sum_blocks`` accumulates block by block (one block's
(M, rows) projections in memory at a time, forward and backward) and, on a mesh, device by
device with one ``psum``. They are the whitened forms of the sums K_mn Lambda^-1 K_nm and
K_mn Lambda^-1 Y: L_m is replicated, so each block projects its own points. From them

    B = I + P = L_B L_B^T,   c = L_B^-1 R,
    F = -1/2 [L (N log 2 pi + log|B| + G + T) + Q - |c|^2].

Sparse GPD's shared-kernel form (``two_level_stats``) has weights that differ per output
l: 1 / noise_in[l] on the points of group l, 1 / noise_out[l] elsewhere. There the blocks
hold one group each (points sorted by group, ``ppgpc.blocks.grouped_layout``), so the
unweighted P_g = sum_{i in g} a_i a_i^T costs O(M^2 N) for all groups together, and
B_l = I + P / noise_out[l] + (1 / noise_in[l] - 1 / noise_out[l]) P_l with P = sum_g P_g.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppgpc import linalg
from ppgpc.blocks import Placement, grouped_layout, layout, sum_blocks
from ppgpc.kernels import gram, gram_diag

__all__ = ["SharedStats", "TwoLevelStats", "shared_noise_stats", "two_level_stats",
           "shared_factor", "shared_bound", "two_level_factor", "two_level_bound"]


class SharedStats(NamedTuple):
    """Sums over points with one noise per point shared by the L outputs."""

    P: jax.Array
    """(M, M) sum_i w_i a_i a_i^T."""
    R: jax.Array
    """(M, L) sum_i w_i a_i y_i^T."""
    trace: jax.Array
    """() sum_i w_i (k_ii - |a_i|^2)."""
    yy: jax.Array
    """() sum_i w_i |y_i|^2."""
    log_noise: jax.Array
    """() sum_i log noise_i."""


class TwoLevelStats(NamedTuple):
    """Sums over points for per-output weights of two levels (sparse GPD)."""

    P_groups: jax.Array
    """(L, M, M) sum_{i in group l} a_i a_i^T (unweighted)."""
    R: jax.Array
    """(M, L) column l: sum_i w_il a_i y_il."""
    trace: jax.Array
    """() sum_il w_il (k_ii - |a_i|^2)."""
    yy: jax.Array
    """() sum_il w_il y_il^2."""
    log_noise: jax.Array
    """() sum_il log noise_il."""


def _projection(kernel, params, chol_m, Z, Xb):
    """a_i for the block's points, (M, rows), and the residual variances k_ii - |a_i|^2."""
    A = linalg.tri_solve(chol_m, gram(kernel, params, Z, Xb))
    return A, gram_diag(kernel, params, Xb) - jnp.sum(A * A, axis=0)


def shared_noise_stats(kernel, params, chol_m, Z, X, Y, noise,
                       placement: Placement = Placement()) -> SharedStats:
    """``SharedStats`` of inputs X (N, D), targets Y (N, L) and noise variances (N,), with
    inducing inputs Z (M, D) and L_m = ``chol_m`` (M, M), in blocks (``placement``)."""
    lay = layout(X.shape[0], Z.shape[0], placement)

    def block(shared, rows, valid, group):
        params, chol_m, Z = shared
        Xb, Yb, noise_b = rows
        A, resid = _projection(kernel, params, chol_m, Z, Xb)
        w = jnp.where(valid, 1.0 / noise_b, 0.0)
        Aw = A * w[None, :]
        return SharedStats(Aw @ A.T, Aw @ Yb, jnp.sum(w * resid),
                           jnp.sum(w[:, None] * Yb * Yb),
                           jnp.sum(jnp.where(valid, jnp.log(noise_b), 0.0)))

    return sum_blocks(block, lay, (params, chol_m, Z), (X, Y, noise), mesh=placement.mesh)


def two_level_stats(kernel, params, chol_m, Z, X, Y, groups, group_sizes, noise_in, noise_out,
                    placement: Placement = Placement()) -> TwoLevelStats:
    """``TwoLevelStats`` of inputs X (N, D) and targets Y (N, L) whose point i has noise
    ``noise_in[l]`` in output l when ``groups[i] == l`` and ``noise_out[l]`` otherwise.

    Args:
        groups: (N,) group of each point, 0..L-1; ``group_sizes`` their static counts.
        noise_in, noise_out: (L,) the two noise variances of each output.
    """
    L = Y.shape[1]
    lay = grouped_layout(group_sizes, Z.shape[0], placement)
    order = jnp.argsort(groups, stable=True)

    def block(shared, rows, valid, group):
        params, chol_m, Z, noise_in, noise_out = shared
        Xb, Yb = rows
        A, resid = _projection(kernel, params, chol_m, Z, Xb)
        mine = jnp.arange(L) == group                                    # (L,)
        noise = jnp.where(mine, noise_in, noise_out)                     # (L,) this block's
        W = jnp.where(valid[:, None], 1.0 / noise[None, :], 0.0)         # (rows, L)
        Am = A * valid[None, :]
        P_groups = mine[:, None, None] * (Am @ A.T)[None]
        return TwoLevelStats(P_groups, A @ (Yb * W), jnp.sum(resid[:, None] * W),
                             jnp.sum(Yb * Yb * W),
                             jnp.sum(valid) * jnp.sum(jnp.log(noise)))

    return sum_blocks(block, lay, (params, chol_m, Z, noise_in, noise_out), (X, Y),
                      order=order, mesh=placement.mesh)


def shared_factor(stats: SharedStats):
    """(L_B Cholesky of B = I + P, c = L_B^-1 R (M, L))."""
    M = stats.P.shape[0]
    chol_B = linalg.cholesky(jnp.eye(M) + stats.P)
    return chol_B, linalg.tri_solve(chol_B.factor, stats.R)


def shared_bound(stats: SharedStats, num_points: int) -> jax.Array:
    """F = -1/2 [L (N log 2 pi + log|B| + G + T) + Q - |c|^2] (module docstring)."""
    chol_B, c = shared_factor(stats)
    num_outputs = stats.R.shape[1]
    log_det = linalg.logdet(chol_B.factor) + stats.log_noise
    return -0.5 * (num_outputs * (num_points * math.log(2.0 * math.pi) + log_det + stats.trace)
                   + stats.yy - jnp.sum(c * c))


def two_level_factor(stats: TwoLevelStats, noise_in, noise_out):
    """(L_B Cholesky, (L, M, M) factors of B_l, and c (L, M), c_l = L_B_l^-1 R_:l)."""
    M = stats.P_groups.shape[-1]
    P = jnp.sum(stats.P_groups, axis=0)
    B = (jnp.eye(M) + P[None] / noise_out[:, None, None]
         + (1.0 / noise_in - 1.0 / noise_out)[:, None, None] * stats.P_groups)
    chol_B = linalg.cholesky(B)
    c = jax.vmap(linalg.tri_solve)(chol_B.factor, stats.R.T[:, :, None])[..., 0]
    return chol_B, c


def two_level_bound(stats: TwoLevelStats, noise_in, noise_out, num_points: int) -> jax.Array:
    """The sum over outputs l of Titsias's bound with output l's two-level noise."""
    chol_B, c = two_level_factor(stats, noise_in, noise_out)
    L = stats.R.shape[1]
    log_det = jnp.sum(linalg.logdet(chol_B.factor)) + stats.log_noise
    return -0.5 * (L * num_points * math.log(2.0 * math.pi) + log_det + stats.trace
                   + stats.yy - jnp.sum(c * c))

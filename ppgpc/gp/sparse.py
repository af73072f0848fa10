"""Collapsed sparse GP regression (Titsias 2009) for several outputs, and its optimal q(u).

docs/math.md section 1 (Collapsed sparse) and section 2 (Sparse GPD). With M inducing inputs Zm,
Q = K_nm K_mm^-1 K_mn and a diagonal noise Lambda = diag(noise) shared by the L outputs
Y (N, L), the collapsed evidence lower bound is

    F = sum_d log N(y_d | 0, Q + Lambda) - L/2 tr(Lambda^-1 (K_nn - Q))   <=  log p(Y).

One factorisation serves every output, as in the exact case (ILR-GP: L = C-1 coordinates,
homoscedastic noise). Heteroscedastic GPD, whose noise differs per class, calls these
functions once per class under ``vmap`` with L = 1. Computation (no N x N matrix is formed):

    L_m L_m^T = K_mm (+ jitter),   A = L_m^-1 K_mn Lambda^-1/2    (M, N)
    B = I + A A^T = L_B L_B^T,     c = L_B^-1 A Lambda^-1/2 Y     (M, L)
    log|Q + Lambda| = log|B| + sum log noise
    y^T (Q + Lambda)^-1 y = |Lambda^-1/2 y|^2 - |c|^2          (Woodbury, summed over d)
    tr(Lambda^-1 (K - Q)) = sum_i k_ii / noise_i - |A|_F^2

A A^T, A Lambda^-1/2 Y and the two sums over i are sums over points: the statistics below are
accumulated them over blocks of points (``ppgpc.runtime.blocks``), so memory is O(M^2 + block M)
for the bound and its gradient, never O(N M), and over the devices of a mesh when
``placement`` has one (each device its blocks, then one ``psum``).

The optimal q(u) = N(mu, S) has S = K_mm Sigma K_mm and mu = K_mm Sigma K_mn Lambda^-1 Y with
Sigma = (K_mm + K_mn Lambda^-1 K_nm)^-1 = L_m^-T B^-1 L_m^-1, so with a* = L_m^-1 k_m*:

    mean(x*) = a*^T L_B^-T c,     var(x*) = k** - |a*|^2 + |L_B^-1 a*|^2.

Per-output inducing inputs (``*_per_output``; Collapsed-ILR and sparse GPD with
``shared_inducing=False``): output l has its own Z_l (M, D), so the bound is the sum of L
single-output bounds, each with its own factorisation, F = sum_l F_l(y_l, Z_l). Each output
may also have its own noise column (GPD's class noise, times a learned scale) and its own
kernel parameters (a leading output axis, ``params_per_output=True``). The outputs are
still independent given the kernel, so this is the same model with L x M inducing inputs
in all, at L times the cost. The L factorisations run one after another (``lax.map``),
each summing over blocks as above.

The data statistics, summed over blocks of points. With L_m L_m^T = K_mm
(+ jitter) replicated, a_i = L_m^-1 k_m(x_i) (M,) and noise weights w_i = 1 / noise_i, the
bound and the optimal q(u) (``ppgpc.gp.sparse``) need the data only through

    P = sum_i w_i a_i a_i^T  (M, M)    = L_m^-1 K_mn Lambda^-1 K_nm L_m^-T
    R = sum_i w_i a_i y_i^T  (M, L)    = L_m^-1 K_mn Lambda^-1 Y
    T = sum_i w_i (k_ii - |a_i|^2)     = tr(Lambda^-1 (K_nn - Q_nn))
    Q = sum_i w_i |y_i|^2,   G = sum_i log noise_i,

sums over points that ``ppgpc.runtime.blocks.sum_blocks`` accumulates block by block (one block's
(M, rows) projections in memory at a time, forward and backward) and, on a mesh, device by
device with one ``psum``. They are the whitened forms of the sums K_mn Lambda^-1 K_nm and
K_mn Lambda^-1 Y: L_m is replicated, so each block projects its own points. From them

    B = I + P = L_B L_B^T,   c = L_B^-1 R,
    F = -1/2 [L (N log 2 pi + log|B| + G + T) + Q - |c|^2].

Sparse GPD's shared-kernel form (``two_level_stats``) has weights that differ per output
l: 1 / noise_in[l] on the points of group l, 1 / noise_out[l] elsewhere. There the blocks
hold one group each (points sorted by group, ``ppgpc.runtime.blocks.grouped_layout``), so the
unweighted P_g = sum_{i in g} a_i a_i^T costs O(M^2 N) for all groups together, and
B_l = I + P / noise_out[l] + (1 / noise_in[l] - 1 / noise_out[l]) P_l with P = sum_g P_g.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ppgpc.gp import linalg
from ppgpc.gp.inducing import initial_inducing_inputs
from ppgpc.gp.kernels import gram, gram_diag
from ppgpc.runtime.blocks import Placement, grouped_layout, layout, replicate, sum_blocks
from ppgpc.runtime.padding import mask_gram

__all__ = [
    "SparseData",
    "SparsePosterior",
    "make_prepare",
    "on_devices",
    "make_initial_hypers",
    "inducing_cholesky",
    "map_outputs",
    "collapsed_bound",
    "collapsed_bound_two_level",
    "condition",
    "condition_two_level",
    "predict",
    "collapsed_bound_per_output",
    "condition_per_output",
    "predict_per_output",
    "SharedStats",
    "TwoLevelStats",
    "shared_noise_stats",
    "two_level_stats",
    "shared_factor",
    "shared_bound",
    "two_level_factor",
    "two_level_bound",
]

DEFAULT_KMM_JITTER = 1e-6
"""Relative jitter added to K_mm (times the kernel variance): learned inducing inputs can
come close to each other, which makes K_mm numerically singular."""


# ----------------------------------------------------------- data statistics
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


# ----------------------------------------------------------- the bound and q(u)
class SparseData(NamedTuple):
    """A model's prepared data plus the initial inducing inputs (the sparse model specs)."""

    base: Any
    """The dense model's prepared data (``ILRData``, ``GPDData``)."""
    inducing_init: jax.Array
    """(M, D) starting inducing inputs (k-means++ seeds refined by Lloyd steps), or (L, M, D)
    with one set per output (``shared_inducing=False``)."""
    placement: Placement = Placement()
    """Where the bound's sums over the data run (static): one device, or the devices of a
    mesh (the driver's ``devices``), and the block size (``ppgpc.runtime.blocks``)."""

    @property
    def X(self):
        return self.base.X

    @property
    def y(self):
        return self.base.y

    @property
    def num_classes(self):
        return self.base.num_classes

    @property
    def mask(self):
        """The dense data's row mask (None: the sparse variants are fitted unpadded)."""
        return self.base.mask

    @property
    def inducing_mask(self) -> None:
        """The inducing inputs are never padded with the rows."""
        return None


class SparsePosterior(NamedTuple):
    """The optimal q(u) of the collapsed bound, in the factored form used for prediction.

    With per-output inducing inputs (``condition_per_output``) every field but ``jitter``
    gains a leading output axis L, and ``c`` is (L, M, 1).
    """

    Z: jax.Array
    """(M, D) inducing inputs."""
    chol_mm: jax.Array
    """(M, M) lower Cholesky factor of K_mm (+ jitter)."""
    chol_B: jax.Array
    """(M, M) lower Cholesky factor of B = I + A A^T."""
    c: jax.Array
    """(M, L) L_B^-1 A Lambda^-1/2 Y."""
    jitter: jax.Array
    """() adaptive jitter the factorisations needed beyond the fixed K_mm jitter."""


def on_devices(data: SparseData, mesh) -> SparseData:
    """``data`` with the bound's sums over points split over the devices of ``mesh`` (a
    ``jax.sharding.Mesh`` with an axis ``"data"``) and every array replicated on the mesh's
    devices (``ppgpc.runtime.blocks.replicate``: each process of a multi-process run supplies its
    own full copy). The inducing inputs, factors and parameters stay replicated."""
    placed = data._replace(placement=Placement(mesh=mesh,
                                                block_rows=data.placement.block_rows))
    return replicate(placed, mesh)


def make_prepare(dense_prepare, per_output_inducing: bool = False):
    """``prepare`` of a sparse spec: the dense model's ``prepare`` plus k-means++ inducing
    inputs (``initial_inducing_inputs``), returned as ``SparseData``.

    Args:
        dense_prepare: the dense model's ``prepare``.
        per_output_inducing: whether the model accepts ``shared_inducing=False``, one set of
            inducing inputs per output (the outputs are the columns of ``base.targets``);
            set l starts from k-means++ with the key ``fold_in(PRNGKey(seed), l)``, so the
            sets differ.

    ``num_inducing`` None is the default rule (``resolve_num_inducing``).
    """

    def sparse_prepare(X, y, num_classes: int, *, num_inducing: int | None = None,
                       seed: int = 0, shared_inducing: bool = True, **options) -> SparseData:
        if not isinstance(shared_inducing, bool):
            raise TypeError(f"shared_inducing must be True or False, got {shared_inducing!r}")
        if not shared_inducing and not per_output_inducing:
            raise ValueError("this collapsed sparse model shares one set of inducing inputs "
                             "between its outputs; shared_inducing=False is not available")
        base = dense_prepare(X, y, num_classes, **options)
        if shared_inducing:
            return SparseData(base, initial_inducing_inputs(base.X, num_inducing, seed))
        num_outputs = base.targets.shape[1]
        root = jax.random.PRNGKey(seed)
        return SparseData(base, jnp.stack([
            initial_inducing_inputs(base.X, num_inducing, key=jax.random.fold_in(root, l))
            for l in range(num_outputs)]))

    return sparse_prepare


def make_initial_hypers(dense_initial_hypers):
    """``initial_hypers`` of a sparse spec: the dense model's plus the inducing inputs."""

    def sparse_initial_hypers(data: SparseData, kernel) -> dict:
        return {**dense_initial_hypers(data.base, kernel), "inducing_inputs": data.inducing_init}

    return sparse_initial_hypers

def _noise_vector(noise_var, N: int) -> jax.Array:
    return jnp.broadcast_to(jnp.asarray(noise_var, dtype=jnp.float64), (N,))


def inducing_cholesky(kernel, params, Z: jax.Array, kmm_jitter: float,
                      mask=None) -> linalg.Cholesky:
    """The Cholesky factor L_m of K_mm + kmm_jitter * variance * I at inducing inputs Z
    (M, D), with the adaptive jitter it needed beyond that (``linalg.cholesky``). ``mask``:
    optional (M,) 0/1 mask of padded inducing inputs (``ppgpc.runtime.padding``), whose block is
    the identity, uncorrelated with the rest and without jitter."""
    M = Z.shape[0]
    if mask is None:
        return linalg.cholesky(gram(kernel, params, Z)
                               + kmm_jitter * params["variance"] * jnp.eye(M))
    return linalg.cholesky(mask_gram(gram(kernel, params, Z), mask)
                           + kmm_jitter * params["variance"] * jnp.diag(mask), rows=mask)


def collapsed_bound(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array, noise_var,
                    kmm_jitter: float = DEFAULT_KMM_JITTER,
                    placement: Placement = Placement()) -> jax.Array:
    """Titsias's collapsed bound F <= sum_d log N(y_d | 0, K + diag(noise)).

    Computed from sums over blocks of points (the statistics above), on the devices of
    ``placement.mesh`` when it has one.

    Args:
        kernel, params: the kernel and its parameters.
        X: (N, D) inputs; Y: (N, L) centred targets; Z: (M, D) inducing inputs.
        noise_var: scalar or (N,) noise variance shared by the L outputs.
        kmm_jitter: relative jitter on K_mm (0 for the exact identity at Z = X).
        placement: the mesh and block size of the sums (``ppgpc.runtime.blocks.Placement``).

    Returns:
        Scalar bound.
    """
    chol_m = inducing_cholesky(kernel, params, Z, kmm_jitter).factor
    stats = shared_noise_stats(kernel, params, chol_m, Z, X, Y,
                                            _noise_vector(noise_var, X.shape[0]), placement)
    return shared_bound(stats, X.shape[0])


def collapsed_bound_two_level(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array,
                              groups: jax.Array, group_sizes: tuple[int, ...],
                              noise_in: jax.Array, noise_out: jax.Array,
                              kmm_jitter: float = DEFAULT_KMM_JITTER,
                              placement: Placement = Placement()) -> jax.Array:
    """Titsias's bound summed over L outputs whose noise takes two values per output:
    ``noise_in[l]`` on the points of group l and ``noise_out[l]`` elsewhere.

    This is sparse GPD's structure (docs/math.md section 2: output l is class l, its group the
    points labelled l, the noise s2(1 + alpha_eps) there and s2(alpha_eps) elsewhere). It
    equals ``collapsed_bound`` called once per output with noise (N,), but shares the work:
    with A0 = L_m^-1 K_mn and w_il = 1 / noise_il,

        A0 diag(w_l) A0^T = P / noise_out[l] + (1 / noise_in[l] - 1 / noise_out[l]) P_l,
        P = A0 A0^T,   P_l = sum_{i in group l} a0_i a0_i^T,

    so the M x M products cost O(M^2 N) in all instead of O(L M^2 N) (blocks of one group
    each, ``ppgpc.gp.two_level_stats``). The rest follows ``collapsed_bound``:
    log|Q_l + Lambda_l| = log|B_l| + sum_i log noise_il, the quadratic form by Woodbury, and
    tr(Lambda_l^-1 (K - Q)) = sum_i (k_ii - |a0_i|^2) w_il.

    Args:
        X: (N, D) inputs; Y: (N, L) centred targets; Z: (M, D) inducing inputs.
        groups: (N,) the group of each point, integers in 0..L-1.
        group_sizes: the L group sizes (the counts of ``groups``), static Python ints.
        noise_in, noise_out: (L,) the two noise variances of each output.
        placement: the mesh and block size of the sums (``ppgpc.runtime.blocks.Placement``).

    Returns:
        Scalar bound.
    """
    N, L = Y.shape
    if len(group_sizes) != L or sum(group_sizes) != N:
        raise ValueError(f"group_sizes {tuple(group_sizes)} must give one size per output "
                         f"(L = {L}) and sum to N = {N}")
    chol_m = inducing_cholesky(kernel, params, Z, kmm_jitter).factor
    stats = two_level_stats(kernel, params, chol_m, Z, X, Y, groups, group_sizes,
                                         noise_in, noise_out, placement)
    return two_level_bound(stats, noise_in, noise_out, N)


def condition(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array, noise_var,
              kmm_jitter: float = DEFAULT_KMM_JITTER,
              placement: Placement = Placement()) -> SparsePosterior:
    """The optimal q(u) for targets Y (N, L) with noise (scalar or (N,)) at inducing Z,
    from the block sums of the statistics above (``placement`` as ``collapsed_bound``)."""
    chol_m = inducing_cholesky(kernel, params, Z, kmm_jitter)
    stats = shared_noise_stats(kernel, params, chol_m.factor, Z, X, Y,
                                            _noise_vector(noise_var, X.shape[0]), placement)
    chol_B, c = shared_factor(stats)
    return SparsePosterior(Z, chol_m.factor, chol_B.factor, c,
                           jnp.maximum(chol_m.jitter, chol_B.jitter))


def condition_two_level(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array,
                        groups: jax.Array, group_sizes: tuple[int, ...], noise_in: jax.Array,
                        noise_out: jax.Array, kmm_jitter: float = DEFAULT_KMM_JITTER,
                        placement: Placement = Placement()) -> SparsePosterior:
    """The optimal q(u_l) of each output of ``collapsed_bound_two_level`` (arguments as
    there): a ``SparsePosterior`` whose fields have a leading output axis L (``c`` is
    (L, M, 1)), as ``condition`` vmapped over the outputs with noise columns gives it."""
    L, (M, D) = Y.shape[1], Z.shape
    chol_m = inducing_cholesky(kernel, params, Z, kmm_jitter)
    stats = two_level_stats(kernel, params, chol_m.factor, Z, X, Y, groups,
                                         group_sizes, noise_in, noise_out, placement)
    chol_B, c = two_level_factor(stats, noise_in, noise_out)
    return SparsePosterior(jnp.broadcast_to(Z, (L, M, D)),
                           jnp.broadcast_to(chol_m.factor, (L, M, M)), chol_B.factor,
                           c[:, :, None], jnp.maximum(chol_m.jitter, chol_B.jitter))


def _projections(kernel, params, post: SparsePosterior, Xs):
    a = linalg.tri_solve(post.chol_mm, gram(kernel, params, post.Z, Xs))  # (M, n)
    return a, linalg.tri_solve(post.chol_B, a)


def predict(kernel, params, post: SparsePosterior, Xs: jax.Array):
    """Latent predictive marginals under q(u) at Xs (n, D).

    Returns:
        mean (n, L) = a*^T L_B^-T c and variance (n,) = k** - |a*|^2 + |L_B^-1 a*|^2,
        shared by the L outputs and clipped at 0 from below.
    """
    a, b = _projections(kernel, params, post, Xs)
    mean = b.T @ post.c
    var = gram_diag(kernel, params, Xs) - jnp.sum(a * a, 0) + jnp.sum(b * b, 0)
    return mean, jnp.maximum(var, 0.0)


# ------------------------------------------------------------ one set of Z per output
def _check_per_output(Y: jax.Array, Z: jax.Array) -> None:
    if Z.ndim != 3 or Z.shape[0] != Y.shape[1]:
        raise ValueError(f"per-output inducing inputs must be (L, M, D) with L = {Y.shape[1]} "
                         f"outputs, got shape {Z.shape}")


def _output_scales(noise_scale, L: int) -> jax.Array:
    if noise_scale is None:
        return jnp.ones(L)
    noise_scale = jnp.asarray(noise_scale, dtype=jnp.float64)
    if noise_scale.shape not in ((), (L,)):
        raise ValueError(f"noise_scale must be a scalar or ({L},), one factor per output; got "
                         f"shape {noise_scale.shape}")
    return jnp.broadcast_to(noise_scale, (L,))


def _output_noise(noise_var, noise_scale, N: int, L: int) -> jax.Array:
    """(N, L) noise variances, column l output l's: ``noise_var`` (a scalar or (N,) shared by
    the outputs, or (N, L) one column per output) times the factor s_l of ``noise_scale``."""
    noise = jnp.asarray(noise_var, dtype=jnp.float64)
    if noise.ndim == 2:
        if noise.shape != (N, L):
            raise ValueError(f"per-output noise_var must be (N, L) = ({N}, {L}), one column "
                             f"per output; got shape {noise.shape}")
    else:
        noise = jnp.broadcast_to(_noise_vector(noise, N)[:, None], (N, L))
    return noise * _output_scales(noise_scale, L)[None, :]


def map_outputs(fn, in_axes: tuple):
    """``fn`` mapped over a leading output axis one output at a time (``jax.lax.map``, a
    loop), with ``vmap``-style ``in_axes``: 0 for an argument (a pytree) with a leading output
    axis, None for one every output uses as it is. Outputs gain a leading axis.

    A loop rather than ``vmap``: the factorisations share nothing, and one at a time they
    are unbatched LAPACK calls, which cannot wait on each other in XLA's CPU thread pool
    as batched calls can (docs/records/speed.md, "One latent at a time").

    Raises:
        ValueError: an axis other than 0 or None (``lax.map`` maps leading axes only).
    """
    in_axes = tuple(in_axes)
    if any(axis not in (0, None) for axis in in_axes):
        raise ValueError(f"map_outputs maps over leading axes only: in_axes must be 0 or "
                         f"None, got {in_axes}")

    def mapped(*args):
        if len(args) != len(in_axes):
            raise TypeError(f"expected {len(in_axes)} arguments (one per in_axes entry), "
                            f"got {len(args)}")

        def one(sliced):
            sliced = iter(sliced)
            return fn(*(next(sliced) if axis == 0 else arg for arg, axis in zip(args, in_axes)))

        return jax.lax.map(one, [arg for arg, axis in zip(args, in_axes) if axis == 0])

    return mapped


def _map_outputs(fn, params, params_per_output: bool, *per_output):
    """``fn(params_l, *args_l)`` over the outputs (``map_outputs``): one output's
    factorisation at a time, since per-output inducing inputs share none. ``params`` has a
    leading output axis when ``params_per_output``, else every output uses it as it is."""
    axes = (0 if params_per_output else None,) + (0,) * len(per_output)
    return map_outputs(fn, axes)(params, *per_output)


def collapsed_bound_per_output(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array,
                               noise_var, kmm_jitter: float = DEFAULT_KMM_JITTER,
                               noise_scale=None, params_per_output: bool = False,
                               placement: Placement = Placement()) -> jax.Array:
    """Titsias's bound with inducing inputs Z_l of its own for each output l:
    F = sum_l F(y_l; Z_l, s_l noise_l) (``collapsed_bound`` with L = 1, one output after
    another).

    Args:
        X: (N, D) inputs; Y: (N, L) centred targets; Z: (L, M, D) inducing inputs.
        noise_var: scalar or (N,) noise variance shared by the outputs, or (N, L) one column
            per output (sparse GPD's heteroscedastic class noise).
        noise_scale: optional (L,) factors s_l on output l's noise variance (each output has
            its own factorisation, so they cost nothing extra).
        params_per_output: the kernel parameters have a leading output axis (L, ...), one
            kernel per output; else the outputs share them.
        placement: the mesh and block size of each output's sums (``collapsed_bound``).

    Returns:
        Scalar bound; it equals ``collapsed_bound`` when every Z_l is the same Z, the noise
        is shared and every s_l is 1.
    """
    _check_per_output(Y, Z)
    noise = _output_noise(noise_var, noise_scale, *Y.shape)
    bounds = _map_outputs(
        lambda p, y_l, Z_l, n_l: collapsed_bound(kernel, p, X, y_l[:, None], Z_l, n_l,
                                                 kmm_jitter, placement),
        params, params_per_output, Y.T, Z, noise.T)
    return jnp.sum(bounds)


def condition_per_output(kernel, params, X: jax.Array, Y: jax.Array, Z: jax.Array, noise_var,
                         kmm_jitter: float = DEFAULT_KMM_JITTER, noise_scale=None,
                         params_per_output: bool = False,
                         placement: Placement = Placement()) -> SparsePosterior:
    """The optimal q(u_l) of each output at its own Z_l (L, M, D) and noise s_l noise_l
    (``noise_var``, ``noise_scale`` and ``params_per_output`` as in
    ``collapsed_bound_per_output``; ``placement`` as there): a ``SparsePosterior`` whose
    fields have a leading output axis (``c`` is (L, M, 1)); ``jitter`` is the largest the
    L factorisations needed."""
    _check_per_output(Y, Z)
    noise = _output_noise(noise_var, noise_scale, *Y.shape)
    post = _map_outputs(
        lambda p, y_l, Z_l, n_l: condition(kernel, p, X, y_l[:, None], Z_l, n_l, kmm_jitter,
                                           placement),
        params, params_per_output, Y.T, Z, noise.T)
    return post._replace(jitter=jnp.max(post.jitter))


def _output_posteriors(post: SparsePosterior):
    """The per-output fields of ``post`` (Z, chol_mm, chol_B, c), to map over outputs."""
    return post.Z, post.chol_mm, post.chol_B, post.c


def predict_per_output(kernel, params, post: SparsePosterior, Xs: jax.Array,
                       params_per_output: bool = False):
    """Latent predictive marginals at Xs (n, D) under per-output q(u_l)
    (``condition_per_output``): mean (n, L) and variance (n, L), each output's as in
    ``predict``."""
    mean, var = _map_outputs(
        lambda p, *fields: predict(kernel, p, SparsePosterior(*fields, post.jitter), Xs),
        params, params_per_output, *_output_posteriors(post))
    return mean[..., 0].T, var.T

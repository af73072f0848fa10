"""Blocked sums over the data (``ppgpc.runtime.blocks``) and the collapsed bound computed from them
(``ppgpc.gp.sparse``), against the unblocked computation of every term at once."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppgpc.gp import linalg, sparse
from ppgpc.gp.kernels import RBF, gram, gram_diag
from ppgpc.runtime import blocks
from ppgpc.runtime.blocks import Placement

KERNEL = RBF(ard=True)
N, D, M, L = 53, 2, 9, 3
ROWS = 7   # does not divide N = 53: the last block is padded


@pytest.fixture(scope="module")
def problem():
    gen = np.random.default_rng(11)
    X = jnp.asarray(gen.uniform(-2, 2, size=(N, D)))
    Y = jnp.asarray(np.sin(X @ gen.normal(size=(D, L))) + 0.1 * gen.normal(size=(N, L)))
    Z = jnp.asarray(gen.uniform(-2, 2, size=(M, D)))
    noise = jnp.asarray(gen.uniform(0.05, 0.4, size=N))
    groups = jnp.asarray(gen.integers(0, L, size=N))
    params = {"variance": jnp.asarray(1.7), "lengthscale": jnp.asarray([0.7, 1.2])}
    return X, Y, Z, noise, groups, params


# ---------------------------------------------------- reference: every point at once
def reference_bound(params, X, Y, Z, noise):
    """Titsias's bound with the (M, N) projection formed in one piece (docs/math.md)."""
    n, outputs = Y.shape
    Lm = linalg.cholesky(gram(KERNEL, params, Z) + sparse.DEFAULT_KMM_JITTER
                         * params["variance"] * jnp.eye(Z.shape[0])).factor
    A = linalg.tri_solve(Lm, gram(KERNEL, params, Z, X)) / jnp.sqrt(noise)[None, :]
    LB = jnp.linalg.cholesky(jnp.eye(Z.shape[0]) + A @ A.T)
    Yw = Y / jnp.sqrt(noise)[:, None]
    c = linalg.tri_solve(LB, A @ Yw)
    log_det = linalg.logdet(LB) + jnp.sum(jnp.log(noise))
    trace = jnp.sum(gram_diag(KERNEL, params, X) / noise) - jnp.sum(A * A)
    return -0.5 * (outputs * (n * math.log(2 * math.pi) + log_det + trace)
                   + jnp.sum(Yw * Yw) - jnp.sum(c * c))


def reference_two_level(params, X, Y, Z, groups, noise_in, noise_out):
    """The two-level bound as the sum of single-output reference bounds."""
    noise = jnp.where(groups[:, None] == jnp.arange(Y.shape[1]), noise_in, noise_out)
    return sum(reference_bound(params, X, Y[:, l:l + 1], Z, noise[:, l])
               for l in range(Y.shape[1]))


def assert_close(got, want, rtol=1e-10):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol,
                                   atol=rtol * float(np.max(np.abs(np.asarray(w)))))


# ---------------------------------------------------- layouts
def test_layout_covers_every_point_once_in_equal_padded_blocks():
    for n, rows, shards in ((53, 7, 1), (53, 7, 4), (10, 100, 1), (1000, 64, 3)):
        lay = blocks.layout(n, 5, Placement(block_rows=rows)) if shards == 1 else \
            blocks._padded_blocks(*_equal(n, rows), shards)
        covered = np.concatenate([np.arange(o, o + c) for o, c in zip(lay.offsets, lay.counts)])
        np.testing.assert_array_equal(np.sort(covered), np.arange(n))
        assert lay.num_blocks % shards == 0
        assert max(lay.counts) <= lay.rows


def _equal(n, rows):
    count = math.ceil(n / rows)
    offsets = [k * rows for k in range(count)]
    return offsets, [min(rows, n - o) for o in offsets], [0] * count, rows


def test_layout_rules_small_data_is_one_block_and_padding_is_under_one_row_per_block():
    lay = blocks.layout(3000, 200)                        # 2**21 // 200 = 10485 rows
    assert (lay.num_blocks, lay.rows) == (1, 3000)
    lay = blocks.layout(10 ** 6, 500)
    assert lay.rows <= blocks.BLOCK_ELEMENTS // 500
    assert lay.num_blocks * lay.rows - 10 ** 6 < lay.num_blocks


def test_grouped_layout_blocks_hold_one_group_each():
    sizes = (17, 5, 31)
    lay = blocks.grouped_layout(sizes, 4, Placement(block_rows=6))
    starts = np.cumsum((0,) + sizes)
    for o, c, g in zip(lay.offsets, lay.counts, lay.groups):
        if c:
            assert starts[g] <= o and o + c <= starts[g + 1]
    assert sum(lay.counts) == sum(sizes)
    assert lay.rows <= 6


def test_placement_and_mesh_refuse_bad_values():
    with pytest.raises(ValueError, match="block_rows must be a positive integer"):
        Placement(block_rows=0)
    with pytest.raises(ValueError, match="ask for 1..1"):
        blocks.resolve_mesh(len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="axis named 'data'"):
        blocks.resolve_mesh(jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",)))
    with pytest.raises(ValueError, match="positive integer or a jax.sharding.Mesh"):
        blocks.resolve_mesh("all")
    with pytest.raises(ValueError, match="ask for 1"):
        blocks.resolve_mesh(0)


def test_map_rows_is_fn_on_all_rows():
    X = jnp.arange(23.0).reshape(23, 1)
    got = blocks.map_rows(lambda x: (x[:, 0] ** 2, x * 2), X, 5)
    assert_close(got, (X[:, 0] ** 2, X * 2), rtol=0)


def test_sum_and_map_blocks_give_the_sum_and_every_point_in_order(problem):
    X, Y, *_ = problem
    lay = blocks.layout(N, M, Placement(block_rows=ROWS))     # the last block is padded

    def block(shift, rows, valid, group):
        Xb, Yb = rows
        per_point = jnp.sum(Xb * Xb, axis=1) + shift                       # (rows,)
        return jnp.sum(jnp.where(valid[:, None], Yb, 0.0), axis=0), (per_point, Xb)

    total, (per_point, rows) = jax.jit(
        lambda s: blocks.sum_and_map_blocks(block, lay, s, (X, Y)))(jnp.asarray(0.5))
    assert_close(total, jnp.sum(Y, axis=0))
    assert_close((per_point, rows), (jnp.sum(X * X, axis=1) + 0.5, X), rtol=0)
    with pytest.raises(ValueError, match="consecutive blocks of equal size"):
        blocks.sum_and_map_blocks(block, blocks.grouped_layout([20, 33], M), 0.5, (X, Y))


# ---------------------------------------------------- the blocked bound
@pytest.mark.parametrize("rows", [ROWS, None])
def test_blocked_bound_and_gradient_equal_the_unblocked_ones(problem, rows):
    X, Y, Z, noise, _, params = problem
    place = Placement(block_rows=rows)
    for noise_var in (noise, jnp.asarray(0.2)):
        def blocked(p, Z, s):
            return sparse.collapsed_bound(KERNEL, p, X, Y, Z, s * noise_var, placement=place)

        def unblocked(p, Z, s):
            return reference_bound(p, X, Y, Z, jnp.broadcast_to(s * noise_var, (N,)))

        args = (params, Z, jnp.asarray(1.3))
        got = jax.jit(jax.value_and_grad(blocked, argnums=(0, 1, 2)))(*args)
        want = jax.jit(jax.value_and_grad(unblocked, argnums=(0, 1, 2)))(*args)
        assert_close(got, want)


def test_blocked_two_level_bound_and_gradient_equal_the_unblocked_ones(problem):
    X, Y, Z, _, groups, params = problem
    sizes = tuple(int(n) for n in np.bincount(np.asarray(groups), minlength=L))
    noise_in, noise_out = jnp.asarray([0.3, 0.5, 0.2]), jnp.asarray([2.0, 1.5, 3.0])
    place = Placement(block_rows=4)

    def blocked(p, Z, a, b):
        return sparse.collapsed_bound_two_level(KERNEL, p, X, Y, Z, groups, sizes, a, b,
                                                placement=place)

    def unblocked(p, Z, a, b):
        return reference_two_level(p, X, Y, Z, groups, a, b)

    args = (params, Z, noise_in, noise_out)
    got = jax.jit(jax.value_and_grad(blocked, argnums=(0, 1, 2, 3)))(*args)
    want = jax.jit(jax.value_and_grad(unblocked, argnums=(0, 1, 2, 3)))(*args)
    assert_close(got, want)


def test_blocked_posterior_equals_the_unblocked_one(problem):
    X, Y, Z, noise, groups, params = problem
    Xs = X[:11] + 0.05
    one = sparse.condition(KERNEL, params, X, Y, Z, noise, placement=Placement(block_rows=N))
    assert_close(sparse.condition(KERNEL, params, X, Y, Z, noise,
                                  placement=Placement(block_rows=ROWS)), one)
    # two levels: each output's posterior is the single-output one with its noise column
    sizes = tuple(int(n) for n in np.bincount(np.asarray(groups), minlength=L))
    noise_in, noise_out = jnp.asarray([0.3, 0.5, 0.2]), jnp.asarray([2.0, 1.5, 3.0])
    post = sparse.condition_two_level(KERNEL, params, X, Y, Z, groups, sizes, noise_in,
                                      noise_out, placement=Placement(block_rows=4))
    columns = jnp.where(groups[:, None] == jnp.arange(L), noise_in, noise_out)
    for l in range(L):
        single = sparse.condition(KERNEL, params, X, Y[:, l:l + 1], Z, columns[:, l])
        assert_close(sparse.predict(KERNEL, params, jax.tree_util.tree_map(
            lambda f: f[l], post), Xs), sparse.predict(KERNEL, params, single, Xs))


def test_chunked_lloyd_steps_equal_one_chunk(monkeypatch):
    from ppgpc.gp import kmeans

    X = jnp.asarray(np.random.default_rng(4).normal(size=(503, 3)))
    centers = X[:12]
    whole = jax.jit(kmeans.lloyd.__wrapped__, static_argnums=2)(X, centers, 5)
    monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", 12 * 50)      # 50 rows per chunk
    chunked = jax.jit(kmeans.lloyd.__wrapped__, static_argnums=2)(X, centers, 5)
    assert_close(chunked, whole, rtol=1e-12)
    assert not np.allclose(whole, centers)                       # the steps moved them

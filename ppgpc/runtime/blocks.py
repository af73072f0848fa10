"""Sums over the data in fixed-size blocks, on one device or across the devices of a mesh.

Titsias's collapsed bound and its optimal q(u) need the data only through sums over points
(``ppgpc.gp.sparse``). ``sum_blocks`` computes such a sum

    S = sum_k s(rows_k),     rows_k = the points of block k (``Layout``),

with ``lax.scan`` over blocks of ``Layout.rows`` points each, so that the working memory is
that of one block (O(block M) for the sparse statistics), never O(N M). The last block is
padded with repeats of a real row whose ``valid`` flag is False (the block function gives
them zero weight), so every block has the same shape and the scan compiles once. Each
block's statistics are recomputed in the backward pass (``jax.checkpoint``), so the
gradient too keeps one block's intermediates at a time; its value is the exact gradient of
S (autodiff through the scan).

With a mesh (``Placement.mesh``, a ``jax.sharding.Mesh`` with an axis ``"data"``) the blocks
are dealt to the devices along that axis in equal contiguous runs (a layout for n devices
has a multiple of n blocks; whole blocks of padding fill the last runs), each device sums
its own run inside ``jax.shard_map`` and ``lax.psum`` adds the partial sums: every device
ends with S, and everything that is not a data array (parameters, M x M factors) stays
replicated. The data arrays are replicated too (each device gathers its own blocks from
them), so the communication per evaluation is one all-reduce of S, whatever N is.

The minibatch objectives use the same machinery on the points of a batch: the batch's rows
(gathered from the replicated data) are the arrays, so each device takes an equal share of
the batch (the padding rows of the last share weigh nothing) and the M x M variational
parameters stay replicated. ``sum_and_map_blocks`` also returns a value per point (the
local variational parameters of a stochastic CAVI step), left on the device that computed
it.

``Placement`` is static under ``jax.jit`` (the mesh and an optional block size): the models
keep it in their prepared data (``ppgpc.gp.sparse.SparseData``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["DATA_AXIS", "BLOCK_ELEMENTS", "Placement", "Layout", "block_rows", "layout",
           "grouped_layout", "sum_blocks", "sum_and_map_blocks", "map_rows", "resolve_mesh",
           "num_shards", "replicate"]

DATA_AXIS = "data"
"""The mesh axis the data are split along."""

BLOCK_ELEMENTS = 2 ** 21
"""Floats in one block's (M, rows) projection: the automatic block size is
``BLOCK_ELEMENTS // M`` rows (4194 rows at M = 500, 16 MiB per (M, rows) array), so a data
set of up to that many points is one block."""


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a sum over the data runs (static under ``jax.jit``).

    Attributes:
        mesh: None (the default device) or a ``jax.sharding.Mesh`` with an axis ``"data"``
            over which the blocks are dealt (``resolve_mesh``).
        block_rows: points per block; None is the automatic rule (``block_rows``).
    """

    mesh: Mesh | None = None
    block_rows: int | None = None

    def __post_init__(self):
        if self.mesh is not None and DATA_AXIS not in self.mesh.axis_names:
            raise ValueError(f"the mesh must have an axis named {DATA_AXIS!r} to split the "
                             f"data along; it has {list(self.mesh.axis_names)}")
        if self.block_rows is not None and (isinstance(self.block_rows, bool)
                                            or not isinstance(self.block_rows, int)
                                            or self.block_rows < 1):
            raise ValueError(f"block_rows must be a positive integer or None, got "
                             f"{self.block_rows!r}")

    @property
    def num_shards(self) -> int:
        """The devices along the data axis (1 without a mesh)."""
        return num_shards(self.mesh)


def num_shards(mesh: Mesh | None) -> int:
    """The size of the mesh's data axis (1 for no mesh)."""
    return 1 if mesh is None else int(mesh.shape[DATA_AXIS])


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Layout:
    """The blocks of a data set (static): block k holds the points at positions
    ``offsets[k] .. offsets[k] + counts[k] - 1`` (of the data, or of its points sorted by
    group), padded to ``rows`` points; ``groups[k]`` is its group (0 where there is none)."""

    rows: int
    offsets: tuple[int, ...]
    counts: tuple[int, ...]
    groups: tuple[int, ...]

    @property
    def num_blocks(self) -> int:
        return len(self.offsets)


def block_rows(num_points: int, num_inducing: int) -> int:
    """The automatic block size: ``BLOCK_ELEMENTS // M`` points (at least 1), at most N."""
    return max(1, min(int(num_points), BLOCK_ELEMENTS // max(int(num_inducing), 1)))


def _padded_blocks(offsets, counts, groups, rows, shards) -> Layout:
    """The layout with empty blocks appended until the count is a multiple of ``shards``."""
    extra = -len(offsets) % shards
    return Layout(int(rows), tuple(int(o) for o in offsets) + (0,) * extra,
                  tuple(int(c) for c in counts) + (0,) * extra,
                  tuple(int(g) for g in groups) + (0,) * extra)


def layout(num_points: int, num_inducing: int, placement: Placement = Placement()) -> Layout:
    """Equal blocks of consecutive points: B = ceil(N / rows) blocks (rounded up to a
    multiple of the devices) of ceil(N / B) points each, so the padding is under B points.

    Args:
        num_points: N.
        num_inducing: M (for the automatic block size ``block_rows``).
        placement: the block size (None: automatic) and the mesh.
    """
    rows = placement.block_rows or block_rows(num_points, num_inducing)
    shards = placement.num_shards
    count = math.ceil(num_points / min(rows, num_points))
    count = shards * math.ceil(count / shards)
    rows = math.ceil(num_points / count)
    offsets = [k * rows for k in range(count)]
    counts = [max(0, min(rows, num_points - o)) for o in offsets]
    return _padded_blocks(offsets, counts, [0] * count, rows, shards)


def grouped_layout(group_sizes, num_inducing: int,
                   placement: Placement = Placement()) -> Layout:
    """Blocks that each hold points of one group only, for points sorted by group (group g
    at sorted positions sum(n_<g) .. sum(n_<=g) - 1).

    The block size is the one of ``rows`` candidates up to the automatic size (or
    ``placement.block_rows``) that minimises the padded points plus 64 points' worth of
    overhead per block; with the automatic size a data set no larger than it needs a block
    per group.
    """
    sizes = [int(n) for n in group_sizes]
    cap = placement.block_rows or block_rows(sum(sizes), num_inducing)
    cap = max(1, min(cap, max(sizes)))
    candidates = {cap} | {math.ceil(n / k) for n in sizes if n for k in range(1, 65)
                          if math.ceil(n / k) <= cap}

    def cost(r):
        blocks = sum(math.ceil(n / r) for n in sizes)
        return blocks * r + 64 * blocks

    rows = min(sorted(candidates), key=cost)
    offsets, counts, groups, start = [], [], [], 0
    for g, n in enumerate(sizes):
        for j in range(math.ceil(n / rows)):
            offsets.append(start + j * rows)
            counts.append(min(rows, n - j * rows))
            groups.append(g)
        start += n
    return _padded_blocks(offsets, counts, groups, rows, placement.num_shards)


def _block_table(lay: Layout) -> tuple[jax.Array, jax.Array, jax.Array]:
    return (jnp.asarray(lay.offsets, dtype=jnp.int32), jnp.asarray(lay.counts, dtype=jnp.int32),
            jnp.asarray(lay.groups, dtype=jnp.int32))


def _local_run(block_fn, lay: Layout, shared, arrays, order, blocks, varying: bool):
    """(sum of the blocks' first outputs, their second outputs stacked (blocks, rows, ...))
    over the given block indices (one scan, blocks checkpointed when there are several)."""
    offsets, counts, groups = _block_table(lay)
    steps = jnp.arange(lay.rows, dtype=jnp.int32)

    def one_block(shared, arrays, order, k):
        valid = steps < counts[k]
        index = jnp.where(valid, offsets[k] + steps, offsets[k])  # pad: repeat a real row
        if order is not None:
            index = order[index]
        rows = tuple(a[index] for a in arrays)
        return block_fn(shared, rows, valid, groups[k])

    if blocks.shape[0] > 1:  # one block per device keeps its intermediates anyway
        one_block = jax.checkpoint(one_block)
    first = jax.eval_shape(one_block, shared, arrays, order, blocks[0])[0]
    zero = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), first)
    if varying:
        zero = jax.tree_util.tree_map(lambda z: lax.pcast(z, DATA_AXIS, to="varying"), zero)

    def body(total, k):
        part, rows = one_block(shared, arrays, order, k)
        return jax.tree_util.tree_map(jnp.add, total, part), rows

    return lax.scan(body, zero, blocks)


def _run_blocks(block_fn, lay: Layout, shared, arrays, order, mesh):
    """``_local_run`` over every block of ``lay``: on one device, or each device over its
    run of blocks inside ``jax.shard_map``, the sums added by ``lax.psum`` and the stacked
    outputs left split over the devices along their block axis."""
    shards = num_shards(mesh)
    if lay.num_blocks % shards:
        raise ValueError(f"{lay.num_blocks} blocks cannot be dealt evenly to {shards} "
                         "devices; build the layout with the same placement")
    blocks = jnp.arange(lay.num_blocks, dtype=jnp.int32)
    if mesh is None:
        return _local_run(block_fn, lay, shared, arrays, order, blocks, varying=False)

    def local(shared, arrays, order, blocks):
        total, rows = _local_run(block_fn, lay, shared, arrays, order, blocks, varying=True)
        return jax.tree_util.tree_map(lambda s: lax.psum(s, DATA_AXIS), total), rows

    return jax.shard_map(local, mesh=mesh, in_specs=(P(), P(), P(), P(DATA_AXIS)),
                         out_specs=(P(), P(DATA_AXIS)))(shared, arrays, order, blocks)


def sum_blocks(block_fn: Callable, lay: Layout, shared, arrays: tuple, *,
               order: jax.Array | None = None, mesh: Mesh | None = None):
    """sum_k ``block_fn(shared, rows_k, valid_k, group_k)`` over the blocks of ``lay``.

    Args:
        block_fn: ``(shared, rows, valid (rows,) bool, group ()) -> pytree of arrays``, the
            statistics of one block; it must give padded rows (``valid`` False) no weight.
        lay: the blocks (``layout``, ``grouped_layout``).
        shared: a pytree every block uses as it is (parameters, factors): replicated.
        arrays: a tuple of arrays with a leading axis of N points; ``rows`` is the tuple
            of their rows in block k.
        order: optional (N,) permutation: block positions index ``order`` (points sorted by
            group for a ``grouped_layout``).
        mesh: None (one device) or a mesh with a ``"data"`` axis whose size divides the
            number of blocks; each device sums its run of blocks, then ``lax.psum``.

    Returns:
        The sum, a pytree shaped as ``block_fn``'s output (replicated over the mesh).
    """
    def both(shared, rows, valid, group):
        return block_fn(shared, rows, valid, group), ()

    return _run_blocks(both, lay, shared, arrays, order, mesh)[0]


def sum_and_map_blocks(block_fn: Callable, lay: Layout, shared, arrays: tuple, *,
                       mesh: Mesh | None = None):
    """A sum over the points of ``lay`` and a value for each point, in one pass:

        S = sum_k s_k,   r_i = the row of point i in r_k,   (s_k, r_k) = block_fn(block k).

    Args:
        block_fn: ``(shared, rows, valid, group) -> (s, r)``: the block's statistics s
            (padded rows given no weight) and a pytree r of arrays with a leading axis of
            the block's ``lay.rows`` rows (the padded rows' values are dropped).
        lay: consecutive blocks (``layout``: block k holds points k rows .. k rows +
            counts[k] - 1).
        shared, arrays, mesh: as for ``sum_blocks``.

    Returns:
        (S, r): S replicated over the mesh, r with a leading axis of the N points in order
        (split over the devices of the mesh until a computation gathers it).
    """
    num_points = sum(lay.counts)
    if lay.offsets != tuple(k * lay.rows for k in range(lay.num_blocks)):
        raise ValueError("sum_and_map_blocks needs consecutive blocks of equal size "
                         "(ppgpc.runtime.blocks.layout)")
    total, rows = _run_blocks(block_fn, lay, shared, arrays, None, mesh)
    return total, jax.tree_util.tree_map(
        lambda r: r.reshape((lay.num_blocks * lay.rows,) + r.shape[2:])[:num_points], rows)


def resolve_mesh(devices) -> Mesh | None:
    """The mesh a ``devices`` setting asks for.

    Args:
        devices: None (the default device, no mesh); an integer n >= 1, the first n of
            ``jax.devices()`` (all processes' devices under ``jax.distributed``) on a 1-D
            mesh with axis ``"data"``; or a ``jax.sharding.Mesh`` with an axis ``"data"``
            (its other axes, if any, replicate the work).

    Raises:
        ValueError: an integer below 1 or above the number of devices, a mesh without a
            ``"data"`` axis, or anything else.
    """
    if devices is None:
        return None
    if isinstance(devices, Mesh):
        if DATA_AXIS not in devices.axis_names:
            raise ValueError(f"devices: the mesh must have an axis named {DATA_AXIS!r} to "
                             f"split the data along; it has {list(devices.axis_names)}")
        return devices
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        available = jax.devices()
        if not 1 <= devices <= len(available):
            raise ValueError(
                f"devices={int(devices)} but JAX sees {len(available)} device(s) "
                f"({available[0].platform}); ask for 1..{len(available)}, or start more (on "
                "CPU: XLA_FLAGS=--xla_force_host_platform_device_count=n before JAX starts)")
        return Mesh(np.array(available[:int(devices)]), (DATA_AXIS,))
    raise ValueError(f"devices must be None, a positive integer or a jax.sharding.Mesh "
                     f"with a {DATA_AXIS!r} axis; got {devices!r}")


def replicate(tree, mesh: Mesh):
    """Every array leaf of ``tree`` as a global array replicated over ``mesh`` (each
    process supplies its own full copy, so this works under ``jax.distributed`` too)."""
    sharding = NamedSharding(mesh, P())

    def put(leaf):
        if not isinstance(leaf, (np.ndarray, jax.Array)):
            return leaf
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree_util.tree_map(put, tree)


def map_rows(fn: Callable, X: jax.Array, rows: int):
    """``fn`` over consecutive chunks of ``rows`` rows of X (n, ...), one chunk at a time
    (``lax.map``; the last chunk padded with copies of row 0), its outputs (each with a
    leading axis of the chunk's rows) joined and cut back to n rows. With n <= rows it is
    ``fn(X)`` itself.
    """
    n = X.shape[0]
    if n <= rows:
        return fn(X)
    count = math.ceil(n / rows)
    index = jnp.arange(count * rows).reshape(count, rows)
    out = lax.map(lambda i: fn(X[jnp.where(i < n, i, 0)]), index)
    return jax.tree_util.tree_map(lambda a: a.reshape((count * rows,) + a.shape[2:])[:n], out)

"""k-means++ seeding and Lloyd refinement in JAX, for placing inducing inputs.

k-means++ (Arthur and Vassilvitskii, 2007): the first centre is a uniformly random data
point; each next centre is a data point drawn with probability proportional to its squared
distance to the nearest centre chosen so far, D(x)^2 / sum_x' D(x')^2. Chosen points have
D = 0 and can never be drawn again, so the centres are distinct data points whenever the
data has at least ``k`` distinct rows. Randomness comes only from the explicit PRNG key
(``fold_in`` per step), so the seeding is a pure function of (key, X, k).

Each function is jitted with the data as an argument (the sizes static), so new data of the
same shape reuses the compiled loop instead of compiling it again around new constants; with
``weights`` (0 for padded rows, ``ppgpc.runtime.padding``) data padded to a few sizes reuse it
across numbers of rows: a row of weight 0 is never a centre and moves none.

Why ours, not scikit-learn's ``KMeans``: these are JAX programs, so they run on the device
the fit runs on (a GPU when there is one; they also trace inside another ``jax.jit``) and
hand the centres over as a device array; they take the zero-weight padded rows of
``ppgpc.gp.inducing.initial_inducing_inputs`` and compile once per bucket of N; their
draws are a pure function of a JAX key, as the rest of a fit's randomness is; and Lloyd's
distances are formed in row chunks, O(N D + chunk k) memory, so large N fits on the device.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ppgpc.runtime.blocks import block_rows, map_rows
from ppgpc.runtime.programs import jit

__all__ = ["kmeans_plus_plus", "kmeans_plus_plus_indices", "lloyd", "kmeans"]


def _sq_dist_to(X: jax.Array, x: jax.Array) -> jax.Array:
    """|X_i - x|^2 for every row of X (N, D); shape (N,)."""
    d = X - x[None, :]
    return jnp.sum(d * d, axis=1)


@functools.partial(jit, static_argnames=("num_centers",))
def kmeans_plus_plus_indices(key: jax.Array, X: jax.Array, num_centers: int,
                             weights=None) -> jax.Array:
    """Row indices (k,) of the k-means++ seeds of X (N, D).

    Args:
        key: PRNG key; the same key gives the same seeds.
        X: (N, D) data.
        num_centers: k <= N (at most the rows of weight 1).
        weights: optional (N,) 0/1 row weights (module docstring); None: every row.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> X = jnp.arange(20.0).reshape(10, 2)
        >>> kmeans_plus_plus_indices(jax.random.PRNGKey(0), X, 3).shape
        (3,)
    """
    X = jnp.asarray(X)
    N = X.shape[0]
    if not 1 <= num_centers <= N:
        raise ValueError(f"need 1 <= num_centers <= N = {N}, got num_centers={num_centers}")
    if weights is None:
        valid = jnp.ones(N, dtype=bool)
        first = jax.random.randint(jax.random.fold_in(key, 0), (), 0, N)
    else:  # the r-th row of weight 1, r uniform
        valid = weights > 0
        r = jax.random.randint(jax.random.fold_in(key, 0), (), 0, jnp.sum(valid))
        first = jnp.argmax(jnp.cumsum(valid) > r)
    idx = jnp.zeros(num_centers, dtype=first.dtype).at[0].set(first)
    d2 = jnp.where(valid, _sq_dist_to(X, X[first]), 0.0)
    chosen = (~valid).at[first].set(True)

    def body(m, state):
        idx, d2, chosen = state
        # P(i) proportional to D(x_i)^2; if every remaining point duplicates a centre
        # (all D = 0), fall back to a uniform draw among the points not chosen yet.
        positive = jnp.any(d2 > 0)
        logits = jnp.where(positive, jnp.where(d2 > 0, jnp.log(jnp.where(d2 > 0, d2, 1.0)),
                                               -jnp.inf),
                           jnp.where(chosen, -jnp.inf, 0.0))
        i = jax.random.categorical(jax.random.fold_in(key, m), logits)
        d2 = jnp.minimum(d2, jnp.where(valid, _sq_dist_to(X, X[i]), 0.0))
        return idx.at[m].set(i), d2, chosen.at[i].set(True)

    idx, _, _ = lax.fori_loop(1, num_centers, body, (idx, d2, chosen))
    return idx


@functools.partial(jit, static_argnames=("num_centers",))
def kmeans_plus_plus(key: jax.Array, X: jax.Array, num_centers: int, weights=None) -> jax.Array:
    """The k-means++ seeds themselves, (k, D) rows of X."""
    X = jnp.asarray(X)
    return X[kmeans_plus_plus_indices(key, X, num_centers, weights)]


@functools.partial(jit, static_argnames=("num_iters",))
def lloyd(X: jax.Array, centers: jax.Array, num_iters: int = 10, weights=None) -> jax.Array:
    """``num_iters`` Lloyd steps from ``centers`` (k, D): assign each row of X to its nearest
    centre, move each centre to the mean of its rows (an empty cluster keeps its centre).
    The (rows, k) distances are formed a chunk of ``ppgpc.runtime.blocks.block_rows`` rows at a
    time, so memory is O(N D + chunk k), never O(N k). ``weights``: optional (N,) 0/1 row
    weights (module docstring)."""
    X = jnp.asarray(X)
    k = centers.shape[0]
    w = jnp.ones(X.shape[0], X.dtype) if weights is None else weights.astype(X.dtype)
    rows = block_rows(X.shape[0], k)

    def nearest(Xc, c):
        d2 = jnp.sum(Xc * Xc, 1)[:, None] - 2.0 * Xc @ c.T + jnp.sum(c * c, 1)[None, :]
        return jnp.argmin(d2, axis=1)

    def step(_, c):
        assign = map_rows(lambda Xc: nearest(Xc, c), X, rows)                 # (N,)
        counts = jax.ops.segment_sum(w, assign, k)
        means = jax.ops.segment_sum(X * w[:, None], assign, k) / jnp.maximum(counts, 1.0)[:, None]
        return jnp.where(counts[:, None] > 0, means, c)

    return lax.fori_loop(0, num_iters, step, centers)


@functools.partial(jit, static_argnames=("num_centers", "num_iters"))
def kmeans(key: jax.Array, X: jax.Array, num_centers: int, num_iters: int = 10,
           weights=None) -> jax.Array:
    """k-means++ seeds refined by ``num_iters`` Lloyd steps: (k, D) centres; ``weights``:
    optional (N,) 0/1 row weights (module docstring)."""
    return lloyd(X, kmeans_plus_plus(key, X, num_centers, weights), num_iters, weights)

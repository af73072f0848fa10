"""Inducing inputs of the sparse models: how many (one rule for M), where they start
(k-means++), and the flat prior that lets an optimiser fit them.

``ppgpc.gp.sparse`` re-exports every name here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions import constraints

from ppgpc.gp.kmeans import kmeans
from ppgpc.runtime.padding import bucket, pad_rows, row_mask

__all__ = ["DEFAULT_NUM_INDUCING", "resolve_num_inducing", "initial_inducing_inputs",
           "InducingPrior"]

DEFAULT_NUM_INDUCING = 200
"""The ILR paper's number of inducing points on letter, magic, htru2 and eeg (Table 2); the
default M of every sparse model (``resolve_num_inducing``)."""


class InducingPrior(dist.ImproperUniform):
    """The improper flat prior on inducing inputs, R^(M, D) with log density 0.

    Inducing inputs are variational parameters, not random variables; making them a latent
    site with a zero log prior lets the driver's optimiser fit them with the
    hyperparameters. ``sample`` returns zeros only so that NumPyro's tracing utilities can
    run the model without substituted values; those zeros are never used as a draw.
    """

    def __init__(self, shape):
        super().__init__(constraints.real, (), event_shape=tuple(shape))

    def sample(self, key, sample_shape=()):
        return jnp.zeros(tuple(sample_shape) + self.event_shape)


def resolve_num_inducing(requested, num_points: int) -> int:
    """The number of inducing inputs M of every sparse model: the one rule for M.

    ``None`` means ``min(DEFAULT_NUM_INDUCING, N)`` (a data set smaller than the default
    gets one inducing input per point); an integer is used as it is and must be in 1..N:
    more inducing inputs than training points add nothing (M = N already places them at
    the training inputs, where the sparse model is the exact one), so M > N is refused with
    a message naming both instead of being cut silently.

    Args:
        requested: M, or None for the default.
        num_points: N, the number of training points.

    Raises:
        ValueError: ``requested`` is not a positive integer, or exceeds N.

    Example:
        >>> [resolve_num_inducing(M, N) for M, N in ((None, 50), (None, 5000), (30, 50))]
        [50, 200, 30]
    """
    if requested is None:
        return min(DEFAULT_NUM_INDUCING, int(num_points))
    if isinstance(requested, bool) or int(requested) != requested or requested < 1:
        raise ValueError(f"num_inducing must be a positive integer, got {requested!r}")
    if requested > num_points:
        raise ValueError(f"num_inducing M = {requested} exceeds the number of training "
                         f"points N = {num_points}; choose M <= N (None: "
                         f"min({DEFAULT_NUM_INDUCING}, N))")
    return int(requested)


def initial_inducing_inputs(X, num_inducing: int, seed: int = 0, num_iters: int = 10, *,
                            key: jax.Array | None = None):
    """(M, D) k-means++ seeds of X refined by ``num_iters`` Lloyd steps; M by the one rule
    (``resolve_num_inducing``: None is min(200, N), M > N is refused). M = N: the inputs
    themselves, in their order (k-means++ would choose every row). The k-means runs on X
    padded to ``ppgpc.runtime.padding.bucket(N)`` rows of weight 0, so that it compiles once per
    bucket of N, not once per N.

    Args:
        X: (N, D) inputs; num_inducing: M or None.
        seed: root seed of the k-means++ draws, ``PRNGKey(seed)``; key: that key itself
            (one stream of a caller's root, e.g. ``fold_in(PRNGKey(seed), l)``), in place
            of ``seed``.
    """
    X = np.asarray(X, dtype=np.float64)
    N = X.shape[0]
    M = resolve_num_inducing(num_inducing, N)
    if M == N:
        return jax.device_put(X)
    size = bucket(N)
    return kmeans(jax.random.PRNGKey(seed) if key is None else key, pad_rows(X, size), M,
                  num_iters, row_mask(N, size))

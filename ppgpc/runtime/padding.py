"""Training data padded to a few fixed sizes, with rows that change nothing.

XLA compiles a program per shape of its arguments, so a fit at each new number of training
points N would compile every program of the fit again. A model whose spec has a ``pad``
function (``ppgpc.models.spec.ModelSpec.pad``) is fitted on its data padded to ``bucket(N)`` rows:
any N in one bucket runs the same compiled programs.

Padded rows are made to change nothing through a row mask m (1 for a real row, 0 for a
padded one), stored as the prepared data's ``mask``:

* the prior covariance of the latent over the padded rows is the identity, uncorrelated
  with the real rows: K -> K o (m m^T) + diag(1 - m) (``mask_gram``); cross-covariances
  with new inputs are K*n o m^T (``mask_columns``);
* the padded rows' targets are zero and their noise variance zero, so a conjugate model's
  covariance of its targets is block diagonal, diag(A, I): its log-determinant and
  quadratic form are those of the real rows, and its Gaussian log-density differs only by
  the constant -P L log(2 pi) / 2 of P padded rows and L outputs, which the models add back
  (``padding_constant``);
* likelihood terms of padded rows have weight zero.

So the real rows' posterior, predictions and log-densities are those of the unpadded fit:
``tests/infer/test_padding.py`` compares them for every model and method that pads. A Cholesky
factor of padded data jitters the real rows only (``linalg.cholesky(..., rows=mask)``), so
a singular Gram matrix gets the jitter it would get unpadded.

What pads: ILR-GP and GPD, every method (exact, MAP, NUTS in both forms, the leave-one-out
searches); the logistic-softmax GP's NUTS and full CAVI (``ModelSpec.pads``); the sparse
variational GP's SVI (marginal and Price estimators: padded rows weigh nothing in a full
batch and are never drawn into a minibatch, and where the inducing inputs are the training
inputs, M = N, they are padded with them) and its NUTS. What does not: the collapsed sparse
variants, the Gibbs samplers and the logistic-softmax GP's sparse and stochastic CAVI, which
compile once per N; ``ppgpc.runtime.programs`` bounds what they hold. Random numbers that belong to
a row (a draw of q at a training input, a minibatch's choice of rows, the likelihood's
normals of a row) come from ``fold_in(key, row)``, so the real rows draw the same numbers
padded or not.

Bucket sizes: 64 for N <= 64; above, N rounded up to a multiple of 2^(ceil(log2 N) - 3)
(four sizes per doubling, at most 25% padding) up to 1024 rows, and to a multiple of
2^(ceil(log2 N) - 4) above (eight per doubling, at most 12.5%). From 512 on, a power of
two 2^k is preceded by 2^k - 2^(k-6) (504, 1008, 2016, ...): the CPU's Cholesky and
triangular solves are slower at a power of two than its size explains (cache conflicts;
docs/records/speed.md gives the timings). So 1000 -> 1008 and 2000 -> 2016; between 20 and 2000
points there are 27 sizes.
"""

from __future__ import annotations

import contextlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import numpyro

__all__ = ["MIN_BUCKET", "FINE_ABOVE", "bucket", "row_mask", "pad_rows", "first_rows",
           "mask_gram",
           "mask_columns", "real_rows", "real_rows_only", "num_real_rows", "padding_constant"]

MIN_BUCKET = 64
"""The smallest training size a padded fit runs at."""

FINE_ABOVE = 1024
"""Above this many rows the buckets are twice as fine (eight per doubling of N)."""


def bucket(n: int) -> int:
    """The padded size of ``n`` training rows (module docstring)."""
    n = int(n)
    if n <= MIN_BUCKET:
        return MIN_BUCKET
    octave = math.ceil(math.log2(n))
    step = 2 ** (octave - (3 if n <= FINE_ABOVE else 4))
    size = -(-n // step) * step
    if size == 2 ** octave and octave >= 9 and n <= size - size // 64:
        return size - size // 64  # not a power of two (module docstring)
    return size


def row_mask(num_real: int, size: int) -> jnp.ndarray:
    """(size,) float64 mask: 1 on the first ``num_real`` rows, 0 on the rest."""
    return jax.device_put((np.arange(size) < num_real).astype(np.float64))


def pad_rows(x, size: int, fill=0, axis: int = 0):
    """``x`` with rows (along ``axis``) appended up to ``size``, filled with ``fill``, as a
    JAX array. Padded on the host (NumPy): an eager JAX op at the unpadded shape would
    compile a program per number of rows, which is what padding avoids."""
    x = np.asarray(x)
    extra = size - x.shape[axis]
    if extra < 0:
        raise ValueError(f"cannot pad {x.shape[axis]} rows to {size}")
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jax.device_put(np.pad(x, widths, constant_values=fill))


def first_rows(x, num_rows: int, axis: int = 0):
    """The first ``num_rows`` entries of ``x`` along ``axis``, cut on the host (a JAX slice
    would compile a program per number of rows), as a JAX array."""
    return jax.device_put(np.take(np.asarray(x), np.arange(num_rows), axis=axis))


def mask_gram(K, mask):
    """K o (m m^T) + diag(1 - m) for a (..., N, N) covariance K: the padded rows become
    independent unit-variance entries; K itself when ``mask`` is None."""
    if mask is None:
        return K
    return K * mask[:, None] * mask[None, :] + jnp.diag(1.0 - mask)


def mask_columns(K, mask):
    """K o m^T for a (..., n, N) cross-covariance with the training rows: zero against the
    padded rows; K itself when ``mask`` is None."""
    return K if mask is None else K * mask


def real_rows_only(mask):
    """A NumPyro handler giving the likelihood terms of padded rows weight zero (inside the
    plate over points; a no-op for unpadded data, ``mask`` None)."""
    if mask is None:
        return contextlib.nullcontext()
    return numpyro.handlers.mask(mask=mask > 0)


def real_rows(x, mask):
    """Numpy rows of ``x`` where ``mask`` is 1 (all of them when ``mask`` is None)."""
    x = np.asarray(x)
    return x if mask is None else x[np.asarray(mask) > 0]


def num_real_rows(data) -> int:
    """The real rows of prepared data: its rows, or the ones of its ``mask`` when padded."""
    mask = data.mask
    return int(np.shape(data.X)[0]) if mask is None else int(np.sum(np.asarray(mask)))


def padding_constant(mask, num_outputs: int):
    """P L log(2 pi) / 2, P the padded rows: what the unit Gaussians of P padded rows with
    zero targets take from a log-density over L outputs (0.0 when ``mask`` is None)."""
    if mask is None:
        return 0.0
    return 0.5 * num_outputs * jnp.sum(1.0 - mask) * math.log(2.0 * math.pi)

"""GP linear algebra: Cholesky with adaptive, reported jitter; solves; log-determinants.

Every function is pure, jit-able and differentiable. No explicit inverse is ever formed:
(A)^-1 B is always two triangular solves with the Cholesky factor of A.

Adaptive jitter: ``cholesky(A)`` first factorises A itself. If that fails (a non-finite
factor, which is how LAPACK's failure shows up in JAX), it retries with A + j I for
j = 1e-10, 1e-9, ... times the mean of diag(A), up to ``max_tries`` times, inside one
``lax.while_loop``. The jitter used is returned with the factor, so callers can report it
(fitted results carry it in their ``sample_stats``/attrs). The derivative is the standard
Cholesky derivative with the jitter held fixed (a custom JVP), so the retry loop costs
nothing under ``grad`` and a well-conditioned matrix is factorised exactly once.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import solve_triangular

from ppgpc.runtime.programs import jit

__all__ = [
    "Cholesky",
    "cholesky",
    "cho_solve",
    "logdet",
    "tri_solve",
    "DEFAULT_MAX_TRIES",
]

DEFAULT_MAX_TRIES = 8
"""Retries of ``cholesky`` with growing jitter (1e-10 to 1e-3 of the mean diagonal)."""
_FIRST_RELATIVE_JITTER = 1e-10


class Cholesky(NamedTuple):
    """A lower Cholesky factor together with the jitter that made it possible."""

    factor: jax.Array
    """(..., n, n) lower-triangular L with L L^T = A + jitter I."""
    jitter: jax.Array
    """(...) the diagonal jitter added (0.0 when A factorised as it was)."""


@jit
def _factor_with_retries(A: jax.Array, max_tries: int, rows) -> tuple[jax.Array, jax.Array]:
    # jit-compiled on its own so that calls outside any jit (NumPyro tracing a model
    # eagerly, for instance) hit the compilation cache: an eager ``lax.while_loop`` whose
    # body closes over a concrete A is compiled anew on every call (about 0.3 s each).
    n = A.shape[-1]
    if rows is None:
        eye = jnp.eye(n, dtype=A.dtype)
        scale = jnp.abs(jnp.mean(jnp.diagonal(A)))
    else:
        eye = jnp.diag(rows.astype(A.dtype))
        scale = jnp.abs(jnp.sum(jnp.diagonal(A) * rows) / jnp.maximum(jnp.sum(rows), 1.0))
    scale = jnp.where(scale > 0, scale, 1.0)

    def failed(L):
        return ~jnp.all(jnp.isfinite(L))

    def cond(state):
        tries, _, L = state
        return (tries < max_tries) & failed(L)

    def body(state):
        tries, jitter, _ = state
        jitter = jnp.where(jitter > 0, 10.0 * jitter, _FIRST_RELATIVE_JITTER * scale)
        return tries + 1, jitter, jnp.linalg.cholesky(A + jitter * eye)

    L0 = jnp.linalg.cholesky(A)
    zero = jnp.zeros((), A.dtype)
    _, jitter, L = lax.while_loop(cond, body, (jnp.asarray(0), zero, L0))
    return L, jitter


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _jittered_cholesky(A: jax.Array, max_tries: int, rows) -> tuple[jax.Array, jax.Array]:
    return _factor_with_retries(A, max_tries, rows)


@_jittered_cholesky.defjvp
def _jittered_cholesky_jvp(max_tries, primals, tangents):
    # dL = L Phi(L^-1 dA L^-T), Phi takes the lower triangle and halves the diagonal.
    A, rows = primals
    dA, _ = tangents
    L, jitter = _jittered_cholesky(A, max_tries, rows)
    dA = 0.5 * (dA + dA.T)
    tmp = solve_triangular(L, dA, lower=True)
    tmp = solve_triangular(L, tmp.T, lower=True).T
    phi = jnp.tril(tmp) - 0.5 * jnp.diag(jnp.diagonal(tmp))
    return (L, jitter), (L @ phi, jnp.zeros_like(jitter))


def cholesky(A: jax.Array, max_tries: int = DEFAULT_MAX_TRIES, rows=None) -> Cholesky:
    """Lower Cholesky factor of a symmetric positive (semi-)definite matrix.

    Args:
        A: (n, n) symmetric matrix; batch dimensions are handled by ``jax.vmap``.
        max_tries: retries with growing jitter (1e-10 x mean diag, then x10 each time).
        rows: optional (n,) 0/1 weights: the jitter goes on the rows of weight 1 only and
            its scale is their mean diagonal (the padded rows of ``ppgpc.runtime.padding``, an
            exact identity block, stay as they are, so the real rows factorise as they
            would unpadded); None: every row.

    Returns:
        ``Cholesky(factor, jitter)``. If every try failed the factor holds NaN: callers
        check ``jnp.isfinite`` outside jit and raise (see ``ppgpc.infer``).
    """
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"cholesky needs a square matrix, got shape {A.shape}")
    if A.ndim > 2:
        fn = lambda a: _jittered_cholesky(a, max_tries, rows)  # noqa: E731
        for _ in range(A.ndim - 2):
            fn = jax.vmap(fn)
        return Cholesky(*fn(A))
    return Cholesky(*_jittered_cholesky(A, max_tries, rows))


def tri_solve(L: jax.Array, B: jax.Array) -> jax.Array:
    """L^-1 B for lower-triangular L (n, n) and B (n,) or (n, k)."""
    return solve_triangular(L, B, lower=True)


def cho_solve(L: jax.Array, B: jax.Array) -> jax.Array:
    """A^-1 B = L^-T L^-1 B given the Cholesky factor L of A; B of shape (n,) or (n, k)."""
    return solve_triangular(L, solve_triangular(L, B, lower=True), lower=True, trans="T")


def logdet(L: jax.Array) -> jax.Array:
    """log |A| = 2 sum log diag(L) given the Cholesky factor L of A."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)

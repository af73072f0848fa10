"""Simplex transforms (docs/math.md section 1): Helmert ILR and its inverse, CLR, ALR,
label smoothing and the Proposition 1 noise level.

The Helmert basis V (C x (C-1)) has column j (j = 1..C-1) equal to 1/sqrt(j(j+1)) in rows
1..j, -j/sqrt(j(j+1)) in row j+1 and 0 below. It is never built here: both V^T x and V z
are O(C) with cumulative sums,

    (V^T x)_j = (x_1 + ... + x_j - j x_{j+1}) / sqrt(j (j + 1)),
    (V z)_i   = sum_{j >= i} z_j / sqrt(j (j + 1))  -  (i - 1) z_{i-1} / sqrt((i - 1) i),

(1-based indices; the second term is absent for i = 1). ``helmert_basis`` builds V
densely for tests and small-C checks only.

All functions act on the last axis and broadcast over leading axes.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtri  # a host scalar: no XLA program for one number

from ppgpc.runtime.programs import jit

__all__ = [
    "helmert_basis",
    "helmert_transpose_apply",
    "helmert_apply",
    "ilr",
    "ilr_inverse",
    "ilr_log_inverse",
    "clr",
    "alr",
    "alr_inverse",
    "smooth_labels",
    "ilr_class_targets",
    "target_separation",
    "proposition1_noise_std",
]


def _helmert_weights(num_latent: int, dtype=jnp.float64) -> jax.Array:
    j = jnp.arange(1, num_latent + 1, dtype=dtype)
    return 1.0 / jnp.sqrt(j * (j + 1.0))


def _helmert_basis_host(num_classes: int) -> np.ndarray:
    """``helmert_basis`` as a NumPy array (a constant, built on the host)."""
    if num_classes < 2:
        raise ValueError(f"the simplex needs at least 2 classes, got {num_classes}")
    C = num_classes
    V = np.zeros((C, C - 1))
    for j in range(1, C):
        w = 1.0 / math.sqrt(j * (j + 1))
        V[:j, j - 1] = w
        V[j, j - 1] = -j * w
    return V


def helmert_basis(num_classes: int) -> jax.Array:
    """Dense Helmert basis V of shape (C, C-1) (docs/math.md section 1): column j (1-based) holds
    1 / sqrt(j (j + 1)) in rows 1..j and -j / sqrt(j (j + 1)) in row j + 1. Built on the host
    (it is a constant); the O(C) ``helmert_apply`` / ``helmert_transpose_apply`` are what
    traced code uses."""
    return jnp.asarray(_helmert_basis_host(num_classes))


@jit
def helmert_transpose_apply(x: jax.Array) -> jax.Array:
    """V^T x in O(C): (..., C) -> (..., C-1)."""
    C = x.shape[-1]
    j = jnp.arange(1, C, dtype=x.dtype)
    partial_sums = jnp.cumsum(x, axis=-1)[..., :-1]  # x_1 + ... + x_j, j = 1..C-1
    return (partial_sums - j * x[..., 1:]) * _helmert_weights(C - 1, x.dtype)


@jit
def helmert_apply(z: jax.Array) -> jax.Array:
    """V z in O(C): (..., C-1) -> (..., C)."""
    L = z.shape[-1]
    w = z * _helmert_weights(L, z.dtype)  # z_j / sqrt(j(j+1))
    # tail[i] = sum_{j >= i} w_j for i = 1..C (0 for i = C)
    tail = jnp.flip(jnp.cumsum(jnp.flip(w, axis=-1), axis=-1), axis=-1)
    pad = jnp.zeros(z.shape[:-1] + (1,), z.dtype)
    tail = jnp.concatenate([tail, pad], axis=-1)
    j = jnp.arange(1, L + 1, dtype=z.dtype)
    below = jnp.concatenate([pad, j * w], axis=-1)  # (i-1) w_{i-1}, 0 for i = 1
    return tail - below


def ilr(p: jax.Array) -> jax.Array:
    """Isometric log-ratio ilr(p) = V^T log p: (..., C) on the open simplex -> (..., C-1)."""
    return helmert_transpose_apply(jnp.log(p))


def ilr_log_inverse(z: jax.Array) -> jax.Array:
    """log ilr^-1(z) = log_softmax(V z): (..., C-1) -> (..., C). Stable for large |z|."""
    return jax.nn.log_softmax(helmert_apply(z), axis=-1)


def ilr_inverse(z: jax.Array) -> jax.Array:
    """ilr^-1(z) = softmax(V z): (..., C-1) -> (..., C) on the open simplex."""
    return jax.nn.softmax(helmert_apply(z), axis=-1)


def clr(p: jax.Array) -> jax.Array:
    """Centred log-ratio log p - mean(log p): (..., C) -> (..., C), sums to 0."""
    logp = jnp.log(p)
    return logp - jnp.mean(logp, axis=-1, keepdims=True)


def alr(p: jax.Array) -> jax.Array:
    """Additive log-ratio log(p_c / p_C), c < C: (..., C) -> (..., C-1). Not isometric."""
    logp = jnp.log(p)
    return logp[..., :-1] - logp[..., -1:]


def alr_inverse(z: jax.Array) -> jax.Array:
    """Inverse of ``alr``: softmax([z, 0]), (..., C-1) -> (..., C)."""
    zeros = jnp.zeros(z.shape[:-1] + (1,), z.dtype)
    return jax.nn.softmax(jnp.concatenate([z, zeros], axis=-1), axis=-1)


def _check_epsilon(epsilon: float) -> None:
    if not 0.0 < float(epsilon) < 1.0:
        raise ValueError(f"epsilon must lie strictly between 0 and 1, got {epsilon}")


def smooth_labels(y: jax.Array, num_classes: int, epsilon: float) -> jax.Array:
    """p^(k) = epsilon e_k + (1 - epsilon) / C 1 for each label: (N,) ints -> (N, C)."""
    _check_epsilon(epsilon)
    onehot = jax.nn.one_hot(y, num_classes, dtype=jnp.float64)
    return epsilon * onehot + (1.0 - epsilon) / num_classes


def ilr_class_targets(num_classes: int, epsilon: float) -> jax.Array:
    """The C class targets m_k = ilr(p^(k)), shape (C, C-1).

    Computed in log space from a = epsilon + (1 - epsilon)/C and q = (1 - epsilon)/C:
    log p^(k) = log q + (log a - log q) e_k, and V^T 1 = 0, so m_k = log(a / q) V^T e_k.
    This stays exact for epsilon as close to 1 as 1 - 1e-12.
    """
    _check_epsilon(epsilon)
    C = num_classes
    log_ratio = math.log1p(C * epsilon / (1.0 - epsilon))  # log(a / q)
    return jnp.asarray(log_ratio * _helmert_basis_host(C))  # row k: V^T e_k


def target_separation(num_classes: int, epsilon: float) -> float:
    """delta = sqrt(2) log(1 + C epsilon / (1 - epsilon)), the distance between any two targets."""
    _check_epsilon(epsilon)
    return math.sqrt(2.0) * math.log1p(num_classes * epsilon / (1.0 - epsilon))


def proposition1_noise_std(num_classes: int, epsilon: float, tau: float) -> float:
    """The largest sigma allowed by Proposition 1: delta / (2 Phi^-1(1 - tau / (C - 1))).

    With this sigma a pseudo-observation of class k lands closer to some competitor's target
    than to its own with probability at most tau (union bound over the C - 1 competitors).
    """
    if num_classes < 2:
        raise ValueError(f"Proposition 1 needs at least 2 classes, got {num_classes}")
    if not 0.0 < float(tau) < 1.0:
        raise ValueError(f"tau must lie strictly between 0 and 1, got {tau}")
    quantile = float(ndtri(1.0 - tau / (num_classes - 1)))
    if quantile <= 0:
        raise ValueError(
            f"tau={tau} is too large for C={num_classes}: need tau / (C - 1) < 1/2"
        )
    return target_separation(num_classes, epsilon) / (2.0 * quantile)

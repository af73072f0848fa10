"""The inducing-point Gibbs sampler of the logistic-softmax GP (docs/records/gibbs.md, "Inducing
points"), as a pure init/step pair over ``InducingGibbsState``, its v block (``v_block``)
and its level move (``inducing_level_block``).

The model sampled is the deterministic-training-conditional (DTC, subset-of-regressors)
approximation of docs/math.md section 3's model at M inducing inputs Z: whitened inducing
values v^c ~ N(0, I_M) for every class c, and at the training inputs

    f^c = K_nm K_mm^-1 u^c = A v^c,   u^c = chol(K_mm) v^c,   A = K_nm chol(K_mm)^-T (N, M),

a degenerate Gaussian prior of rank M on f (its covariance A A^T = Q_nn, not K_nn), with the
labels' likelihood and the augmentation (lambda, n, omega) exactly as in the full model. At
new inputs the model takes the exact GP conditional f* | u ~ N(a*^T v, k** - |a*|^2),
a* = chol(K_mm)^-1 k(Z, x*), so its posterior predictive is

    p(f* | y) = int N(f* | a*^T v, k** - |a*|^2) p(v | y) dv,

which is what the predictive kind ``"inducing"`` computes from stored draws of v
(``cavi.inducing_latent``, the sparse CAVI's predictive with q(v) replaced
by the posterior draws). Every block below is exact for this model; the sweep touches only
O(N M) numbers per class besides the M x M precision, so its cost is O(N M^2 C).

Kernel hyperparameters and inducing inputs are held fixed at a point; by default
(``logistic_softmax.fit_inducing_hypers``) the point the stochastic sparse CAVI learns
(minibatches of 128 points, 1000 iterations), type-II MAP of the kernel hyperparameters and
the inducing inputs on the sparse ELBO.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, kernel_params
from ppgpc.models.logistic_softmax.cavi import projection
from ppgpc.models.logistic_softmax.elliptical_slice import elliptical_slice
from ppgpc.models.logistic_softmax.gibbs import (LEVEL_STEPS, GibbsInfo, lambda_count_block,
                                                 omega_block)
from ppgpc.models.logistic_softmax.link import log_link

__all__ = [
    "InducingGibbsState",
    "inducing_matrix",
    "inducing_level_block",
    "v_block",
    "inducing_gibbs_kernel",
]

INDUCING_INPUTS = "inducing_inputs"
"""The hyperparameter name of the inducing inputs Z (M, D), as the sparse CAVI stores them."""


class InducingGibbsState(NamedTuple):
    """State of the inducing-point Gibbs sampler."""

    v: jax.Array
    """(M, C) whitened inducing values; f = A v at the training inputs."""
    lam: jax.Array
    """(N,) lambda_i > 0."""
    n: jax.Array
    """(N, C) Poisson counts n_ic (stored as floats)."""
    omega: jax.Array
    """(N, C) Polya-Gamma variables omega_ic >= 0."""


def inducing_matrix(kernel, hypers: dict, X) -> jax.Array:
    """A = K_nm chol(K_mm)^-T (N, M), so that f = A v (the transpose of
    ``cavi.projection``'s A, with the same jittered factor of K_mm, so that
    v means what the predictive kind ``"inducing"`` takes it to mean).

    Args:
        kernel: the kernel; hypers: ``kernel_*`` by site name and ``inducing_inputs``
            (M, D); X: (N, D) inputs.
    """
    return projection(kernel, hypers, X, hypers[INDUCING_INPUTS]).A.T


def inducing_level_block(key, v, A, onehot, num_steps: int = LEVEL_STEPS):
    """Move the class-mean level of the whitened inducing values, m = mean_c v^c (M, 1),
    given the contrasts d^c = v^c - m, with lambda, n and omega integrated out:
    ``num_steps`` elliptical slice steps (``elliptical_slice``) on

        p(m | d, y) propto N(m | 0, I / C) prod_i p(y_i | f_i),   f^c = A (d^c + m).

    Under the prior v^c ~ N(0, I) independently, m ~ N(0, I / C) is independent of the
    contrasts (Cov(m, d^c) = I / C - I / C = 0), so this is the exact conditional of m in
    the non-augmented posterior of the inducing-point model, as ``level_block`` is for the
    full one. Cost O(N M) per proposal (the product A m).

    Args:
        key: PRNG key.
        v: (M, C) whitened inducing values.
        A: (N, M) from ``inducing_matrix``.
        onehot: (N, C) one-hot labels y'.
        num_steps: elliptical slice steps.

    Returns:
        (M, C) ``v`` with the new level and the same contrasts.
    """
    M, C = v.shape
    m0 = jnp.mean(v, axis=1, keepdims=True)                          # (M, 1)
    d = v - m0                                                        # (M, C)
    f_d = A @ d                                                       # (N, C)

    def prior_draw(k):                                                # ~ N(0, I / C)
        return jax.random.normal(k, (M, 1)) / jnp.sqrt(C)

    def log_lik(m):                                                   # (M, 1) -> ()
        return jnp.sum(onehot * log_link(f_d + A @ m))

    return d + elliptical_slice(key, m0, prior_draw, log_lik, num_steps)[0]


def v_block(key, A, omega, kappa):
    """Draw v^c ~ N(P_c^-1 A^T kappa^c, P_c^-1), P_c = I + A^T diag(omega^c) A, for every c.

    From p(v^c | omega, n, y) propto N(v^c | 0, I) exp(kappa^cT A v^c
    - v^cT A^T diag(omega^c) A v^c / 2) with kappa^c = (y'^c - n^c) / 2 (docs/math.md
    section 3, with f^c = A v^c). With L_c = chol(P_c) (eigenvalues of P_c >= 1):

        v^c = L_c^-T (L_c^-1 A^T kappa^c + e^c),   e^c ~ N(0, I_M),

    whose mean is P_c^-1 A^T kappa^c and covariance L_c^-T L_c^-1 = P_c^-1. One M x M
    Cholesky per class, vmapped over classes; forming P_c costs O(N M^2).

    Args:
        key: PRNG key; A: (N, M); omega, kappa: (N, C).

    Returns:
        (M, C) draws.
    """
    M = A.shape[1]
    eps = jax.random.normal(key, (M, omega.shape[1]))                # (M, C)

    def one(w, k, e):                                                 # (N,), (N,), (M,)
        P = jnp.eye(M) + (A * w[:, None]).T @ A                       # I + A^T W A
        L = jnp.linalg.cholesky(P)
        b = solve_triangular(L, A.T @ k, lower=True) + e              # L^-1 A^T kappa + e
        return solve_triangular(L, b, lower=True, trans="T")

    return jax.vmap(one, in_axes=(1, 1, 1), out_axes=1)(omega, kappa, eps)


def inducing_gibbs_kernel(data, kernel, hypers: dict):
    """The inducing-point blocked Gibbs sampler as a pure ``(init, step)`` pair.

    One sweep (module docstring for the model; every block exact for it):

    1. the class-mean level of v given its contrasts, lambda, n and omega integrated out
       (``inducing_level_block``, ``LEVEL_STEPS`` elliptical slice steps);
    2. (lambda, n) | f jointly with f = A v (``lambda_count_block``);
    3. omega_ic | n_ic, f_ic ~ PG(y'_ic + n_ic, |f_ic|) (``omega_block``);
    4. v^c | omega^c, n^c by ``v_block`` with kappa^c = (y'^c - n^c) / 2.

    Step 1 leaves the marginal posterior of v invariant and steps 2 and 3 redraw the
    augmentation from its full conditional given f = A v, so the sweep keeps the joint
    posterior of (v, lambda, n, omega) invariant (as ``gibbs_kernel``'s). A (N, M) is
    computed once here.

    Args:
        data: prepared data (``X`` (N, D), ``onehot`` (N, C)); kernel: the kernel.
        hypers: ``kernel_*`` by site name and ``inducing_inputs`` (M, D), held fixed.

    Returns:
        ``init(key) -> InducingGibbsState`` (v from the prior, n = 0) and
        ``step(key, state) -> (InducingGibbsState, GibbsInfo)``.

    Use::

        init, step = inducing_gibbs_kernel(data, kernel, {**hypers, "inducing_inputs": Z})
        state, info = step(key, init(key))
    """
    Y = data.onehot
    N, C = Y.shape
    A = inducing_matrix(kernel, hypers, data.X)                       # (N, M)
    M = A.shape[1]
    jitter = linalg.cholesky(gram(kernel, kernel_params(hypers), hypers[INDUCING_INPUTS])).jitter

    def init(key) -> InducingGibbsState:
        v = jax.random.normal(key, (M, C))
        return InducingGibbsState(v, jnp.ones(N), jnp.zeros((N, C)), jnp.zeros((N, C)))

    def step(key, state: InducingGibbsState):
        k_level, k_count, k_omega, k_v = jax.random.split(key, 4)
        # 1. the class-mean level of v, augmentation integrated out
        v = inducing_level_block(k_level, state.v, A, Y)
        f = A @ v                                                     # (N, C)
        # 2. lambda and n given f
        lam, n = lambda_count_block(k_count, f)
        # 3. omega
        omega = omega_block(k_omega, Y, n, f)
        # 4. v
        v = v_block(k_v, A, omega, 0.5 * (Y - n))
        return InducingGibbsState(v, lam, n, omega), GibbsInfo(jnp.mean(n), jitter)

    return init, step

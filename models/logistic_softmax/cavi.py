"""Coordinate-ascent VI for the augmented logistic-softmax GP (appendix A.2; docs/math.md
section 3), full (inducing inputs Z = X) or sparse (M < N inducing inputs), as an init/step
pair over ``CAVICarry`` looped on the device in windows of ``CAVI_WINDOW`` steps.

One step is a CAVI sweep (every block of q maximised in turn, ``cavi_sweep``) followed by
optax Adam steps on the log kernel hyperparameters and the inducing inputs of the ELBO with
q held fixed (type-II ML, or MAP with the kernel prior). q(u^c) is whitened,
u^c = chol(K_mm) v^c with q(v^c) = N(m^c, S^c), so every update works with
A = chol(K_mm)^-1 K_mn (``projection``) and never forms K_mm^-1.

Note on (12): the optimal Poisson rate of q(n_ic) is
gamma_ic = exp(psi(alpha_i)) / beta_i * exp(-m_ic / 2) / (2 cosh(fbar_ic / 2)), i.e. the
expected value of lambda_i sigma(-f_ic) with sigma(-f) = e^{-f/2} / (2 cosh(f/2)); the factor
1/2 comes from the 2^-n_ic of the Polya-Gamma identity (the appendix's (12) omits it; without
it the ELBO below is not maximised by the update and decreases). We compute it in log space
with an overflow-free log cosh, so no variance-free approximation is needed.

Padded data (``ppgpc.runtime.padding``, full version only): with the row mask m, K(X, X) becomes
K o (m m^T) + diag(1 - m) for K_mm and K_mn alike (Z = X), so A = chol(K)^T is block
diagonal, and the padded rows' likelihood terms and natural-parameter sums have weight
zero: q(v) of the padded rows stays the prior N(0, I) (KL zero) and the ELBO, its gradient
and q of the real rows are those of the unpadded data.

The stochastic version (appendix A.3) is ``ppgpc.models.logistic_softmax.stochastic_cavi``; the
model and the driver-facing ``cavi`` are ``ppgpc.models.logistic_softmax``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.scipy.special import digamma, gammaln, xlogy

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, gram_diag, kernel_log_prior, kernel_params
from ppgpc.polyagamma import polyagamma_mean
from ppgpc.runtime.padding import mask_gram
from ppgpc.runtime.programs import jit
from ppgpc.runtime.loop import Window, relative_change_below, run_windows

__all__ = [
    "CAVIState",
    "CAVIResult",
    "CAVICarry",
    "Projection",
    "CAVI_WINDOW",
    "projection",
    "inducing_factor",
    "factor_jitter",
    "project",
    "q_f",
    "elbo",
    "lik_terms",
    "lambda_terms",
    "kl_v",
    "weighted_grams",
    "local_updates",
    "natural_targets",
    "moments_from_natural",
    "cavi_sweep",
    "init_q",
    "hyper_optimiser",
    "hyper_steps",
    "cavi_init",
    "cavi_step",
    "run_cavi",
    "sample_q_v",
    "sample_q_f",
    "inducing_latent",
]


class CAVIState(NamedTuple):
    """Variational parameters; q(u^c) is whitened: u^c = chol(K_mm) v^c, q(v^c) = N(m^c, S^c)."""

    m: jax.Array
    """(M, C) means of q(v)."""
    S: jax.Array
    """(C, M, M) covariances of q(v)."""
    alpha: jax.Array
    """(N,) shapes of q(lambda_i) = Gamma(alpha_i, rate C)."""
    gamma: jax.Array
    """(N, C) rates of q(n_ic) = Poisson(gamma_ic)."""
    c: jax.Array
    """(N, C) tilts of q(omega_ic | n_ic) = PG(y'_ic + n_ic, c_ic)."""


class CAVIResult(NamedTuple):
    """Outcome of ``cavi``."""

    hypers: dict
    """Kernel hyperparameters by site name (learnt or given)."""
    inducing: jax.Array
    """(M, D) inducing inputs Z."""
    state: CAVIState
    """Final variational parameters."""
    elbo: np.ndarray
    """ELBO after every outer iteration (non-decreasing with fixed hyperparameters)."""
    converged: bool
    """The relative ELBO change fell below ``tol``."""
    sparse: bool
    """Inducing inputs differ from the training inputs (M < N)."""
    jitter: float = 0.0
    """The Cholesky jitter K_mm needs at the final hyperparameters and inducing inputs."""

    @property
    def relative_change(self) -> float | None:
        """|e_T - e_T-1| / |e_T| of the last two ELBO values, what ``tol`` is compared with
        (None for a trace of one value)."""
        trace = np.asarray(self.elbo, dtype=np.float64)
        if trace.size < 2:
            return None
        return float(abs(trace[-1] - trace[-2]) / max(abs(trace[-1]), 1e-300))


def factor_jitter(kernel, hypers: dict, Z, mask=None) -> float:
    """The Cholesky jitter of K(Z, Z) under the kernel hyperparameters ``hypers`` (by site
    name): what every factorisation of the fitted model adds (``CAVIResult.jitter``);
    ``mask``: the row mask of padded data (full version, Z = X), or None."""
    return float(linalg.cholesky(mask_gram(gram(kernel, kernel_params(hypers), Z), mask),
                                 rows=mask).jitter)


class Projection(NamedTuple):
    """The inputs X seen from the inducing inputs Z (whitened)."""

    A: jax.Array
    """(M, N) chol(K_mm)^-1 K_mn."""
    ktilde: jax.Array
    """(N,) K_ii - A_i^T A_i >= 0, the variance p(f_i | u) leaves."""
    chol_mm: jax.Array
    """(M, M) chol(K_mm)."""


def projection(kernel, hypers, X, Z, mask=None) -> Projection:
    """``Projection`` of X (N, D) on Z (M, D) under the kernel hyperparameters ``hypers``
    (by site name). ``mask``: the (N,) row mask of padded data in the full version (Z = X,
    module docstring), which masks K_mm and K_mn alike; None for unpadded data."""
    params = kernel_params(hypers)
    if mask is None:
        return project(kernel, params, inducing_factor(kernel, params, Z), Z, X)
    K = mask_gram(gram(kernel, params, X), mask)
    chol = linalg.cholesky(K, rows=mask).factor
    A = linalg.tri_solve(chol, K)
    ktilde = jnp.maximum(jnp.diagonal(K) - jnp.sum(A * A, axis=0), 0.0)
    return Projection(A, ktilde, chol)


def inducing_factor(kernel, params, Z):
    """chol(K_mm) (M, M) for kernel parameters ``params`` (``kernel_params``)."""
    return linalg.cholesky(gram(kernel, params, Z)).factor


def project(kernel, params, chol_mm, Z, X) -> Projection:
    """``Projection`` of X (n, D) given the factor chol(K_mm) of Z (M, D): any subset of
    points (a block of a minibatch) sees the same replicated factor."""
    A = linalg.tri_solve(chol_mm, gram(kernel, params, Z, X))
    ktilde = jnp.maximum(gram_diag(kernel, params, X) - jnp.sum(A * A, axis=0), 0.0)
    return Projection(A, ktilde, chol_mm)


def q_f(proj: Projection, m, S):
    """Marginals of q(f_ic): mean (N, C) = A^T m, variance (N, C) = ktilde + diag(A^T S A)."""
    mean = proj.A.T @ m
    var = proj.ktilde[:, None] + jnp.einsum("mi,cmk,ki->ic", proj.A, S, proj.A)
    return mean, var


def _log_2cosh_half(c):
    """log(2 cosh(c / 2)), overflow-free."""
    u = 0.5 * jnp.abs(c)
    return u + jnp.log1p(jnp.exp(-2.0 * u))


def elbo(Y, proj: Projection, state: CAVIState, mask=None) -> jax.Array:
    """The evidence lower bound of the augmented model for q = q(v) q(lambda) q(n, omega).

    With m_ic, s_ic the mean and variance of q(f_ic), E f^2 = s + m^2, beta_i = C and
    theta_ic = E[omega_ic] = (y'_ic + gamma_ic) tanh(c_ic / 2) / (2 c_ic):

        sum_ic [ -(y' + gamma) log 2cosh(c/2) + (y' - gamma) m / 2 - theta (E f^2 - c^2) / 2
                 + gamma (psi(alpha_i) - log C) - gamma log gamma + gamma ]
        + sum_i [ -alpha_i + H(Gamma(alpha_i, C)) ]  -  sum_c KL(N(m^c, S^c) || N(0, I))

    (the prior of lambda is flat; PG(b, 0) base densities and log n! cancel between p and q).
    The per-point sums are weighted by ``mask`` (the row mask of padded data) when given.
    """
    N, C = Y.shape
    m_f, s_f = q_f(proj, state.m, state.S)
    lik = jnp.sum(lik_terms(Y, m_f, s_f, state.alpha, state.gamma, state.c, C), axis=1)
    lam = lambda_terms(state.alpha, C)
    if mask is not None:
        lik, lam = lik * mask, lam * mask
    return jnp.sum(lik) + jnp.sum(lam) - jnp.sum(kl_v(state.m, state.S))


def lambda_terms(alpha, num_classes: int):
    """-alpha_i + H(Gamma(alpha_i, C)) of each point (n,), ``elbo``'s second sum."""
    entropy_lam = alpha - math.log(num_classes) + gammaln(alpha) + (1.0 - alpha) * digamma(alpha)
    return entropy_lam - alpha


def kl_v(m, S):
    """KL(N(m^c, S^c) || N(0, I)) of each class (C,) for m (M, C), S (C, M, M)."""
    M = m.shape[0]
    return 0.5 * (jnp.trace(S, axis1=1, axis2=2) + jnp.sum(m**2, axis=0) - M
                  - linalg.logdet(jnp.linalg.cholesky(S)))


def lik_terms(Y, m_f, s_f, alpha, gamma, c, num_classes: int):
    """The (n, k) per-(point, class) terms of ``elbo``'s first sum, for any subset of points
    (rows) and classes (columns); ``num_classes`` is the full C (beta_i = C)."""
    b = Y + gamma
    theta = polyagamma_mean(b, c)
    return (-b * _log_2cosh_half(c) + 0.5 * (Y - gamma) * m_f
            - 0.5 * theta * (s_f + m_f**2 - c**2)
            + gamma * (digamma(alpha) - math.log(num_classes))[:, None]
            - xlogy(gamma, gamma) + gamma)


def local_updates(Y, m_f, s_f, alpha, num_classes: int, inner_iters: int = 5):
    """The local CAVI updates of the points and classes given (the columns of Y, m_f, s_f;
    (n, k)), from the current alpha (n,):

        c = sqrt(s + m^2)                                                      (14)
        gamma_ic = exp(psi(alpha_i)) / C * exp(-m_ic / 2) / (2 cosh(c_ic / 2))  (12) x 1/2
        alpha_i = 1 + C / k sum_{c in K} gamma_ic                    (13), (17) if k < C

    with (12) and (13)/(17) alternated ``inner_iters`` times (appendix A.2). The factor 1/2
    of (12), missing in the appendix and docs/math.md, is derived in the module docstring; the
    ratio is computed in log space with an overflow-free log cosh.

    Returns:
        c (n, k), alpha (n,), gamma (n, k), theta = E[omega] (n, k), kappa = (y' - gamma)/2.
    """
    C, k = num_classes, Y.shape[1]
    c = jnp.sqrt(s_f + m_f**2)                                        # (14)
    log_sig_part = -0.5 * m_f - _log_2cosh_half(c)                    # log e^{-m/2} / 2cosh(c/2)

    def inner(_, ag):
        alpha, _ = ag
        gamma = jnp.exp(digamma(alpha)[:, None] - math.log(C) + log_sig_part)   # (12)
        return 1.0 + (C / k) * jnp.sum(gamma, axis=1), gamma                    # (13), (17)

    gamma0 = jnp.zeros_like(m_f)
    alpha, gamma = lax.fori_loop(0, inner_iters, inner, (alpha, gamma0))
    return c, alpha, gamma, polyagamma_mean(Y + gamma, c), 0.5 * (Y - gamma)


def natural_targets(A, theta, kappa, scale):
    """(15), (16) in whitened natural form for each class column: the precision
    I + scale A diag(theta^c) A^T (k, M, M) and scale A kappa^c (M, k); ``scale`` = N / |B|
    (1 for the full data)."""
    grams, R = weighted_grams(A, theta, kappa)
    return jnp.eye(A.shape[0]) + scale * grams, scale * R


def weighted_grams(A, theta, kappa):
    """The sums over points of ``natural_targets``: A diag(theta^c) A^T (k, M, M) and
    A kappa^c (M, k), for A (M, n), theta and kappa (n, k)."""
    def one(theta_c, kappa_c):
        return (A * theta_c[None, :]) @ A.T, A @ kappa_c

    return jax.vmap(one, in_axes=(1, 1), out_axes=(0, 1))(theta, kappa)


def moments_from_natural(prec, eta1):
    """S = prec^-1 (two triangular solves with its Cholesky factor), m = S eta1, per class:
    prec (k, M, M), eta1 (M, k) -> m (M, k), S (k, M, M)."""
    M = prec.shape[-1]

    def one(P, e):
        S = linalg.cho_solve(jnp.linalg.cholesky(P), jnp.eye(M))
        return S @ e, 0.5 * (S + S.T)

    return jax.vmap(one, in_axes=(0, 1), out_axes=(1, 0))(prec, eta1)


def cavi_sweep(Y, proj: Projection, state: CAVIState, inner_iters: int = 5,
               mask=None) -> CAVIState:
    """One round of coordinate updates, each maximising the ELBO in its block:
    c = fbar (14), then (gamma, alpha) alternated ``inner_iters`` times ((12), (13)), then
    q(v) ((15), (16) in whitened form: S = (I + A diag(theta) A^T)^-1, m = S A kappa); the
    padded rows of ``mask`` (when given) add nothing to q(v)."""
    N, C = Y.shape
    m_f, s_f = q_f(proj, state.m, state.S)
    c, alpha, gamma, theta, kappa = local_updates(Y, m_f, s_f, state.alpha, C, inner_iters)
    if mask is not None:
        theta, kappa = theta * mask[:, None], kappa * mask[:, None]
    m, S = moments_from_natural(*natural_targets(proj.A, theta, kappa, 1.0))
    return CAVIState(m=m, S=S, alpha=alpha, gamma=gamma, c=c)


def init_q(N, C, M) -> CAVIState:
    """The starting q: q(v) the prior N(0, I), alpha_i = 1 + C/2, gamma = 1/2, c = 1."""
    f64 = jnp.float64  # (strongly typed, as the sweeps return them: ``cavi_init``)
    return CAVIState(m=jnp.zeros((M, C), f64), S=jnp.broadcast_to(jnp.eye(M, dtype=f64),
                                                                  (C, M, M)),
                     alpha=jnp.full((N,), 1.0 + C / 2.0, f64),
                     gamma=jnp.full((N, C), 0.5, f64), c=jnp.ones((N, C), f64))


# ------------------------------------------------------------------ the init/step pair
def hyper_optimiser(learning_rate) -> optax.GradientTransformation:
    """Adam (optax defaults: b1 = 0.9, b2 = 0.999, eps = 1e-8) on (log hypers, Z)."""
    return optax.adam(learning_rate)


def hyper_steps(objective, params, opt_state, learning_rate, num_steps, *, learn_hypers,
                learn_inducing):
    """``num_steps`` steps of ``hyper_optimiser`` minimising ``objective((log hypers, Z))``;
    the gradient of a block that is not learnt is zeroed (Adam then leaves it unchanged).

    Returns:
        (params, opt_state) after the steps.
    """
    opt = hyper_optimiser(learning_rate)
    grad_fn = jax.grad(objective)

    def one(_, carry):
        params, opt_state = carry
        g = grad_fn(params)
        if not learn_inducing:
            g = (g[0], jnp.zeros_like(g[1]))
        if not learn_hypers:
            g = (jax.tree.map(jnp.zeros_like, g[0]), g[1])
        updates, opt_state = opt.update(g, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return lax.fori_loop(0, num_steps, one, (params, opt_state))


class CAVICarry(NamedTuple):
    """State of the CAVI loop (``cavi_init``, ``cavi_step``)."""

    log_hypers: dict
    """Log kernel hyperparameters by site name."""
    inducing: jax.Array
    """(M, D) inducing inputs Z (X itself in the full version)."""
    q: CAVIState
    """Variational parameters."""
    opt_state: Any
    """optax state of ``hyper_optimiser`` on (log hypers, Z)."""
    elbo: jax.Array
    """() ELBO after the last step (NaN before the first)."""


def cavi_init(hypers: dict, Z, num_points: int, num_classes: int) -> CAVICarry:
    """The loop's start: q from ``init_q``, the hyperparameters on the log scale, a fresh
    optimiser state.

    Args:
        hypers: kernel hyperparameters by site name; Z: (M, D) inducing inputs.
        num_points, num_classes: N, C.
    """
    log_hypers = {k: jnp.log(jnp.asarray(v, dtype=jnp.float64)) for k, v in hypers.items()}
    opt_state = hyper_optimiser(0.0).init((log_hypers, Z))  # (the state has no rate)
    # the ELBO strongly typed, as a window returns it: a weakly typed NaN would make the
    # second window's carry another type, and compile the window again
    return CAVICarry(log_hypers, Z, init_q(num_points, num_classes, Z.shape[0]), opt_state,
                     jnp.asarray(jnp.nan, dtype=jnp.float64))


def cavi_step(Y, X, kernel, carry: CAVICarry, learning_rate, *, learn_hypers, learn_inducing,
              include_prior, num_steps, mask=None) -> CAVICarry:
    """One outer iteration of CAVI:

    1. one CAVI sweep (``cavi_sweep``) at the current hyperparameters and Z;
    2. ``num_steps`` optimiser steps (``hyper_steps``) on (log hypers, Z) maximising the
       ELBO (plus the kernel's log prior with ``include_prior``) with q held fixed;
    3. the ELBO at the new values.

    Args:
        Y: (N, C) one-hot labels; X: (N, D) inputs; kernel: the kernel.
        carry: the current ``CAVICarry``; learning_rate: the optimiser's rate.
        learn_hypers, learn_inducing: which blocks step 2 moves.
        mask: (N,) row mask of padded data (full version), or None.
    """
    log_hypers, Z, state, opt_state, _ = carry
    # 1. CAVI sweep
    state = cavi_sweep(Y, projection(kernel, jax.tree.map(jnp.exp, log_hypers), X, Z, mask),
                       state, mask=mask)
    # 2. hyperparameters and inducing inputs
    if learn_hypers or learn_inducing:
        D = X.shape[1]

        def objective(params):
            lh, z = params
            h = jax.tree.map(jnp.exp, lh)
            value = elbo(Y, projection(kernel, h, X, z, mask), state, mask)
            if include_prior:
                value = value + kernel_log_prior(kernel, D, h)
            return -value

        (log_hypers, Z), opt_state = hyper_steps(
            objective, (log_hypers, Z), opt_state, learning_rate, num_steps,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing)
    # 3. ELBO
    value = elbo(Y, projection(kernel, jax.tree.map(jnp.exp, log_hypers), X, Z, mask), state,
                 mask)
    return CAVICarry(log_hypers, Z, state, opt_state, value)


CAVI_WINDOW = 50
"""Full CAVI: outer iterations per device call (``_cavi_window``); the host checks nothing
inside a window, and the ELBO trace comes back once per window."""


@functools.partial(jit, static_argnames=("kernel", "learn_hypers", "learn_inducing",
                                         "include_prior", "num_steps"))
def _cavi_window(Y, X, kernel, carry: CAVICarry, learning_rate, limit, tol, mask, *,
                 learn_hypers, learn_inducing, include_prior, num_steps):
    """Up to ``limit`` (<= ``CAVI_WINDOW``) ``cavi_step`` calls in one ``lax.while_loop``,
    stopping early once the ELBO's relative change falls below ``tol``.

    Returns:
        (carry, ELBO per iteration (CAVI_WINDOW,), iterations done, converged).
    """
    def cond(loop):
        _, _, i, converged = loop
        return (i < limit) & ~converged

    def body(loop):
        carry, values, i, _ = loop
        last = carry.elbo
        carry = cavi_step(Y, X, kernel, carry, learning_rate, learn_hypers=learn_hypers,
                          learn_inducing=learn_inducing, include_prior=include_prior,
                          num_steps=num_steps, mask=mask)
        value = carry.elbo
        converged = relative_change_below(value, last, tol)  # False while last is NaN
        return carry, values.at[i].set(value), i + 1, converged

    values = jnp.full((CAVI_WINDOW,), jnp.nan)
    carry, values, done, converged = lax.while_loop(
        cond, body, (carry, values, jnp.asarray(0), jnp.asarray(False)))
    return carry, values, done, converged


def run_cavi(Y, X, kernel, hypers: dict, Z, *, learn_hypers: bool, learn_inducing: bool,
             include_prior: bool, max_iter: int, tol: float, steps_per_iteration: int,
             learning_rate: float, progress: bool = False, mask=None) -> CAVIResult:
    """CAVI to convergence: ``cavi_init``, then ``cavi_step`` in windows of ``CAVI_WINDOW``
    on the device until ``max_iter`` steps or a relative ELBO change below ``tol``.

    Args:
        Y: (N, C) one-hot labels; X: (N, D); hypers: the starting kernel hyperparameters;
        Z: (M, D) the starting inducing inputs (X itself for the full version).
        steps_per_iteration: optimiser steps per outer iteration (``cavi_step``).
        progress: show the iterations and the ELBO on stderr (``ppgpc.runtime.loop``).
        mask: (N,) row mask of padded data (full version, Z = X; module docstring), or None.
    """
    N, C = Y.shape
    trace = []

    def window(carry, n):
        carry, values, done, converged = _cavi_window(
            Y, X, kernel, carry, learning_rate, jnp.asarray(n), jnp.asarray(tol), mask,
            learn_hypers=bool(learn_hypers), learn_inducing=bool(learn_inducing),
            include_prior=bool(include_prior), num_steps=int(steps_per_iteration))
        trace.extend(np.asarray(values)[:int(done)].tolist())
        return carry, Window(int(done), {"elbo": f"{trace[-1]:.6g}"},
                             "elbo" if bool(converged) else None)

    carry, stopped = run_windows(window, cavi_init(hypers, Z, N, C), cap=max_iter,
                                 size=CAVI_WINDOW, desc="CAVI", unit="it", progress=progress,
                                 cap_reason="max_iter")
    converged = stopped.converged
    hypers = {k: jnp.exp(v) for k, v in carry.log_hypers.items()}
    return CAVIResult(hypers, carry.inducing, carry.q, np.asarray(trace), converged,
                      carry.inducing.shape[0] < N,
                      factor_jitter(kernel, hypers, carry.inducing, mask))


# ------------------------------------------------------------- draws from the fitted q
def sample_q_v(key, result: CAVIResult, num_samples: int):
    """(S, M, C) draws of the whitened inducing values from q(v) = prod_c N(m^c, S^c)."""
    M, C = result.state.m.shape
    chol_S = jnp.linalg.cholesky(result.state.S)                      # (C, M, M)
    eps = jax.random.normal(key, (num_samples, C, M))
    v = result.state.m.T[None] + jnp.einsum("cmk,sck->scm", chol_S, eps)   # (S, C, M)
    return jnp.swapaxes(v, 1, 2)


def sample_q_f(key, data, kernel, result: CAVIResult, num_samples: int):
    """(S, N, C) joint draws of f(X) from q for the full version (Z = X): v ~ q(v),
    f = chol(K) v (the driver's predictive kind ``"latent"``). The standard normals of row
    i come from ``fold_in(key, i)``, so a point's draws do not depend on how many rows
    follow it (padded data, ``ppgpc.runtime.padding``, draws the same f at the real rows).

    A sparse result is held as draws of v instead (``sample_q_v``, predictive kind
    ``"inducing"``): drawing f jointly at all N inputs would need the N x N covariance of
    p(f | u)."""
    if result.sparse:
        raise ValueError("sample_q_f draws f of the full version (Z = X); a sparse CAVI "
                         "result is sampled at its inducing inputs by sample_q_v")
    proj = projection(kernel, result.hypers, data.X, result.inducing,
                      data.mask)
    M, C = result.state.m.shape
    root = jax.random.split(key)[0]
    eps = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(root, i),
                                               (num_samples, C)))(jnp.arange(M))  # (M, S, C)
    chol_S = jnp.linalg.cholesky(result.state.S)                      # (C, M, M)
    v = result.state.m.T[None] + jnp.einsum("cmk,ksc->scm", chol_S, eps)   # (S, C, M)
    return jnp.einsum("mn,scm->snc", proj.A, v)


def inducing_latent(data, kernel, hypers: dict, v, Xs, eps):
    """Draws of f(Xs) from a sparse CAVI posterior, one per whitened inducing draw (the
    driver's predictive kind ``"inducing"``): f = a^T v + sqrt(k** - |a|^2) eps with
    a = chol(K_mm)^-1 k(Z, x*), the marginal of q(f*) = int p(f* | u) q(u) du.

    Args:
        hypers: point hyperparameters by site (``kernel_*`` and ``inducing_inputs`` (M, D)).
        v: (S, M, C) whitened inducing draws; Xs: (n, D); eps: (S, n, C) standard normals.

    Returns:
        (S, n, C) draws of f(Xs).
    """
    proj = projection(kernel, hypers, Xs, hypers["inducing_inputs"])
    return jnp.einsum("mn,smc->snc", proj.A, v) + jnp.sqrt(proj.ktilde)[None, :, None] * eps

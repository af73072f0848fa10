"""Stochastic CAVI for the augmented logistic-softmax GP: data minibatches and class
subsampling (appendix A.3, Algorithm 2; docs/math.md section 3), as an init/step pair over
``StochasticCAVIState`` looped on the device in windows between full-data ELBO evaluations.

One step draws a minibatch B of points and K of classes, updates their local parameters,
takes a natural-gradient step on q(v^c), c in K, with the Robbins-Monro step size
rho_t = (t + delay)^-power, then optax Adam steps on (log hypers, Z) of the minibatch
estimate of the ELBO's likelihood terms. The CAVI pieces it shares (q(f) marginals, local
updates, natural targets, the optimiser) are ``ppgpc.models.logistic_softmax.cavi``.

On the devices of a mesh (``placement``, from the driver's ``devices``) each step splits its
minibatch over them (``stochastic_step_on_devices``, and the Adam steps' likelihood sum),
and so does every full-data ELBO evaluation (``full_data_elbo``), with
``ppgpc.runtime.blocks.sum_and_map_blocks``: the sums over points meet in one ``psum``, the local
parameters of each point come back from the device that updated them, and q(v), the
hyperparameters and the optimiser state stay replicated.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.gp.kernels import kernel_log_prior, kernel_params
from ppgpc.models.logistic_softmax.cavi import (CAVIResult, CAVIState, Projection, cavi_init, elbo,
                                                factor_jitter, hyper_steps, inducing_factor, init_q,
                                                kl_v, lambda_terms, lik_terms, local_updates,
                                                moments_from_natural, natural_targets, project,
                                                projection, q_f, weighted_grams)
from ppgpc.runtime.blocks import Placement, layout, sum_and_map_blocks, sum_blocks
from ppgpc.runtime.programs import jit
from ppgpc.runtime.loop import Window, relative_change_below, run_windows

__all__ = [
    "StochasticCAVIState",
    "minibatch",
    "stochastic_step",
    "stochastic_step_on_devices",
    "stochastic_cavi_init",
    "stochastic_cavi_step",
    "full_data_elbo",
    "run_stochastic_cavi",
]


class StochasticCAVIState(NamedTuple):
    """Stochastic CAVI state: q(v^c) in natural form (the Robbins-Monro averages live there),
    plus the local parameters of every point (updated when the point is visited)."""

    prec: jax.Array
    """(C, M, M) precisions S_c^-1 of q(v^c)."""
    eta1: jax.Array
    """(M, C) natural means S_c^-1 m^c."""
    alpha: jax.Array
    """(N,) shapes of q(lambda_i)."""
    gamma: jax.Array
    """(N, C) Poisson rates of q(n_ic)."""
    c: jax.Array
    """(N, C) Polya-Gamma tilts."""


def minibatch(key, num_points: int, num_classes: int, batch_size: int,
              class_batch_size: int):
    """Indices (B (|B|,), K (|K|,)) drawn uniformly without replacement; the full range, in
    order, when the size is the whole set."""
    k_b, k_k = jax.random.split(key)
    B = (jnp.arange(num_points) if batch_size >= num_points
         else jax.random.choice(k_b, num_points, (batch_size,), replace=False))
    K = (jnp.arange(num_classes) if class_batch_size >= num_classes
         else jax.random.choice(k_k, num_classes, (class_batch_size,), replace=False))
    return B, K


def stochastic_step(Y, proj_B: Projection, state: StochasticCAVIState, B, K,
                    rho) -> StochasticCAVIState:
    """One iteration of Algorithm 2 (appendix A.3) on the points B and classes K.

    1. q(f_ic) for i in B, c in K from the current q(v^c);
    2. local updates of those points and classes (``local_updates``: (14), (12), and (17),
       alpha_i = 1 + C/|K| sum_{c in K} gamma_ic);
    3. natural-gradient step on q(v^c), c in K: with scale N/|B|, the whitened (15), (16)
       from the minibatch (for an exponential family, the natural gradient of the ELBO in
       the natural parameters is target - current)::

           prec_c <- (1 - rho) prec_c + rho (I + N/|B| A_B diag(theta^c) A_B^T),
           eta1_c <- (1 - rho) eta1_c + rho N/|B| A_B kappa^c.

    With B and K the full sets and rho = 1 this is exactly one full CAVI sweep. On several
    devices: ``stochastic_step_on_devices``.

    Args:
        Y: (N, C) one-hot labels; proj_B: the projection at the inputs X[B];
        B: (|B|,) point indices; K: (|K|,) class indices; rho: step size in (0, 1].
    """
    N, C = Y.shape
    m_K, S_K = moments_from_natural(state.prec[K], state.eta1[:, K])
    m_f, s_f = q_f(proj_B, m_K, S_K)                                   # (|B|, |K|)
    Y_BK = Y[B][:, K]
    c, alpha, gamma, theta, kappa = local_updates(Y_BK, m_f, s_f, state.alpha[B], C)
    prec_hat, eta_hat = natural_targets(proj_B.A, theta, kappa, N / B.shape[0])
    return _moved(state, B, K, rho, prec_hat, eta_hat, (c, alpha, gamma))


def stochastic_step_on_devices(Y, X_B, kernel, params, Z, state: StochasticCAVIState, B, K, rho,
                               placement: Placement) -> StochasticCAVIState:
    """``stochastic_step`` with the minibatch split over the devices of
    ``placement.mesh`` (``ppgpc.runtime.blocks.sum_and_map_blocks``): each device projects its
    share of the points B on the replicated chol(K_mm), updates their local parameters
    (steps 1-2) and sums their A diag(theta^c) A^T and A kappa^c (``weighted_grams``); one
    ``psum`` adds the sums for step 3, and the local parameters come back per point.

    Args:
        X_B: (|B|, D) the minibatch's inputs; params: kernel parameters
            (``kernel_params``); Z: (M, D); the rest as ``stochastic_step``.
    """
    N, C = Y.shape
    m_K, S_K = moments_from_natural(state.prec[K], state.eta1[:, K])

    def block(shared, rows, valid, group):
        params, chol_mm, Z, m_K, S_K = shared
        Xb, Yb, alpha_b = rows
        proj = project(kernel, params, chol_mm, Z, Xb)
        m_f, s_f = q_f(proj, m_K, S_K)
        c, alpha, gamma, theta, kappa = local_updates(Yb, m_f, s_f, alpha_b, C)
        keep = valid[:, None]
        grams = weighted_grams(proj.A, jnp.where(keep, theta, 0.0), jnp.where(keep, kappa, 0.0))
        return grams, (c, alpha, gamma)

    shared = (params, inducing_factor(kernel, params, Z), Z, m_K, S_K)
    (grams, R), local = sum_and_map_blocks(
        block, layout(B.shape[0], Z.shape[0], placement), shared,
        (X_B, Y[B][:, K], state.alpha[B]), mesh=placement.mesh)
    scale = N / B.shape[0]
    return _moved(state, B, K, rho, jnp.eye(Z.shape[0]) + scale * grams, scale * R, local)


def _moved(state: StochasticCAVIState, B, K, rho, prec_hat, eta_hat, local) -> StochasticCAVIState:
    """Step 3 of ``stochastic_step`` and the local parameters (c, alpha, gamma) of B x K
    written back."""
    c, alpha, gamma = local
    prec = state.prec.at[K].set((1.0 - rho) * state.prec[K] + rho * prec_hat)
    eta1 = state.eta1.at[:, K].set((1.0 - rho) * state.eta1[:, K] + rho * eta_hat)
    rows, cols = B[:, None], K[None, :]
    return StochasticCAVIState(prec=prec, eta1=eta1, alpha=state.alpha.at[B].set(alpha),
                    gamma=state.gamma.at[rows, cols].set(gamma),
                    c=state.c.at[rows, cols].set(c))


def stochastic_cavi_init(N, C, M) -> StochasticCAVIState:
    """The starting state: q(v) the prior (precision I, natural mean 0), local parameters
    as ``init_q``'s."""
    start = init_q(N, C, M)  # q(v) = prior: precision I, natural mean 0
    return StochasticCAVIState(prec=start.S, eta1=start.m, alpha=start.alpha, gamma=start.gamma,
                    c=start.c)


@functools.partial(jit, static_argnames=("kernel", "batch_size", "class_batch_size",
                                         "learn_hypers", "learn_inducing",
                                         "include_prior", "num_steps", "placement"))
def stochastic_cavi_step(key, Y, X, kernel, log_hypers, Z, state, opt_state, rho, learning_rate, *,
             batch_size, class_batch_size, learn_hypers, learn_inducing, include_prior,
             num_steps, placement: Placement = Placement()):
    """One step of the stochastic CAVI:

    1. a minibatch (B, K) (``minibatch``) from ``key``;
    2. ``stochastic_step`` on it with step size ``rho`` (``stochastic_step_on_devices``
       when ``placement`` has a mesh);
    3. ``num_steps`` optimiser steps (``hyper_steps``) on (log hypers, Z) of the unbiased
       minibatch estimate of the ELBO's likelihood terms, N/|B| C/|K| sum_{B x K} (the rest
       of the ELBO does not depend on them), summed device by device on a mesh."""
    N, C = Y.shape
    B, K = minibatch(key, N, C, batch_size, class_batch_size)
    X_B = X[B]
    hypers = jax.tree.map(jnp.exp, log_hypers)
    if placement.mesh is None:
        state = stochastic_step(Y, projection(kernel, hypers, X_B, Z), state, B, K, rho)
    else:
        state = stochastic_step_on_devices(Y, X_B, kernel, kernel_params(hypers), Z, state,
                                           B, K, rho, placement)
    if learn_hypers or learn_inducing:
        m_K, S_K = moments_from_natural(state.prec[K], state.eta1[:, K])
        rows = (X_B, Y[B][:, K], state.alpha[B], state.gamma[B][:, K], state.c[B][:, K])
        scale = (N / B.shape[0]) * (C / K.shape[0])

        def objective(params):
            lh, z = params
            h = jax.tree.map(jnp.exp, lh)
            value = scale * _lik_sum(kernel, kernel_params(h), z, m_K, S_K, rows, C,
                                     placement)
            if include_prior:
                value = value + kernel_log_prior(kernel, X.shape[1], h)
            return -value

        (log_hypers, Z), opt_state = hyper_steps(
            objective, (log_hypers, Z), opt_state, learning_rate, num_steps,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing)
    return log_hypers, Z, state, opt_state


def _lik_sum(kernel, params, Z, m_K, S_K, rows, num_classes: int, placement: Placement):
    """sum over the minibatch's points and classes of ``lik_terms``; rows = (X_B, Y_BK,
    alpha_B, gamma_BK, c_BK), in blocks over the devices of ``placement`` when it has a
    mesh."""
    chol_mm = inducing_factor(kernel, params, Z)
    if placement.mesh is None:
        X_B, Y_BK, alpha_B, gamma_BK, c_BK = rows
        m_f, s_f = q_f(project(kernel, params, chol_mm, Z, X_B), m_K, S_K)
        return jnp.sum(lik_terms(Y_BK, m_f, s_f, alpha_B, gamma_BK, c_BK, num_classes))

    def block(shared, rows, valid, group):
        params, chol_mm, Z, m_K, S_K = shared
        Xb, Yb, alpha_b, gamma_b, c_b = rows
        m_f, s_f = q_f(project(kernel, params, chol_mm, Z, Xb), m_K, S_K)
        terms = lik_terms(Yb, m_f, s_f, alpha_b, gamma_b, c_b, num_classes)
        return jnp.sum(jnp.where(valid[:, None], terms, 0.0))

    return sum_blocks(block, layout(rows[0].shape[0], Z.shape[0], placement),
                      (params, chol_mm, Z, m_K, S_K), rows, mesh=placement.mesh)


@functools.partial(jit, static_argnames=("kernel", "num_iters", "batch_size",
                                         "class_batch_size", "learn_hypers",
                                         "learn_inducing", "include_prior", "num_steps",
                                         "placement"))
def _stochastic_window(key, start, Y, X, kernel, log_hypers, Z, state, opt_state,
                       learning_rate, step_size_delay, step_size_power, *, num_iters,
                       batch_size, class_batch_size, learn_hypers, learn_inducing,
                       include_prior, num_steps, placement):
    """Iterations t = start, ..., start + num_iters - 1 of ``stochastic_cavi_step`` in one
    ``lax.scan``: minibatch key fold_in(key, t), step size rho_t = (t + delay)^-power."""
    def body(carry, t):
        log_hypers, Z, state, opt_state = carry
        rho = (t + step_size_delay) ** -step_size_power
        out = stochastic_cavi_step.__wrapped__(
            jax.random.fold_in(key, t), Y, X, kernel, log_hypers, Z, state, opt_state, rho,
            learning_rate, batch_size=batch_size, class_batch_size=class_batch_size,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing,
            include_prior=include_prior, num_steps=num_steps, placement=placement)
        return out, None

    carry, _ = lax.scan(body, (log_hypers, Z, state, opt_state),
                        start + jnp.arange(num_iters))
    return carry


@functools.partial(jit, static_argnames=("kernel", "placement"))
def full_data_elbo(Y, X, kernel, log_hypers, Z, state: StochasticCAVIState,
                  placement: Placement = Placement()):
    """The full-data ELBO at the current q(v) and hyperparameters, with every point's local
    parameters updated first (one local sweep from the stored alpha); returns the ELBO and
    the equivalent ``CAVIState``. With a mesh in ``placement`` the points are taken in
    blocks over its devices: each sums ``lik_terms`` and ``lambda_terms`` of its points and
    keeps their local parameters (``ppgpc.runtime.blocks.sum_and_map_blocks``)."""
    N, C = Y.shape
    m, S = moments_from_natural(state.prec, state.eta1)
    if placement.mesh is None:
        proj = projection(kernel, jax.tree.map(jnp.exp, log_hypers), X, Z)
        m_f, s_f = q_f(proj, m, S)
        c, alpha, gamma, _, _ = local_updates(Y, m_f, s_f, state.alpha, C)
        full = CAVIState(m=m, S=S, alpha=alpha, gamma=gamma, c=c)
        return elbo(Y, proj, full), full
    params = kernel_params(jax.tree.map(jnp.exp, log_hypers))

    def block(shared, rows, valid, group):
        params, chol_mm, Z, m, S = shared
        Xb, Yb, alpha_b = rows
        m_f, s_f = q_f(project(kernel, params, chol_mm, Z, Xb), m, S)
        c, alpha, gamma, _, _ = local_updates(Yb, m_f, s_f, alpha_b, C)
        terms = (jnp.sum(lik_terms(Yb, m_f, s_f, alpha, gamma, c, C), axis=1)
                 + lambda_terms(alpha, C))
        return jnp.sum(jnp.where(valid, terms, 0.0)), (c, alpha, gamma)

    total, (c, alpha, gamma) = sum_and_map_blocks(
        block, layout(N, Z.shape[0], placement),
        (params, inducing_factor(kernel, params, Z), Z, m, S), (X, Y, state.alpha),
        mesh=placement.mesh)
    return total - jnp.sum(kl_v(m, S)), CAVIState(m=m, S=S, alpha=alpha, gamma=gamma, c=c)


def run_stochastic_cavi(key, Y, X, kernel, hypers: dict, Z, *, learn_hypers: bool,
                        learn_inducing: bool, include_prior: bool, max_iter: int, tol: float,
                        steps_per_iteration: int, learning_rate: float, batch_size: int,
                        class_batch_size: int, step_size_delay: float,
                        step_size_power: float, elbo_every: int,
                        progress: bool = False,
                        placement: Placement = Placement()) -> CAVIResult:
    """The stochastic CAVI loop: ``stochastic_cavi_init``, then ``elbo_every`` steps at a
    time on the device (step t's minibatch key is fold_in(key, t)), each window followed by the
    full-data ELBO (``full_data_elbo``), until ``max_iter`` steps or a relative change of
    consecutive evaluations below ``tol``.

    Args:
        key: PRNG key of the minibatches; Y: (N, C) one-hot labels; X: (N, D);
        hypers: starting kernel hyperparameters; Z: (M, D) starting inducing inputs.
        batch_size, class_batch_size: |B| <= N and |K| <= C (checked by the caller).
        step_size_delay, step_size_power: rho_t = (t + delay)^-power.
        progress: show the iterations and the ELBO on stderr (``ppgpc.runtime.loop``).
        placement: one device, or a mesh whose devices split each minibatch and the
            full-data ELBO (``stochastic_cavi_step``, ``full_data_elbo``); the result is the same.

    Returns:
        ``CAVIResult`` whose ELBO trace holds one value per evaluation.
    """
    N, C = Y.shape
    start = cavi_init(hypers, Z, N, C)
    log_hypers, opt_state, state = start.log_hypers, start.opt_state, start.q
    trace = []

    def window(carry, steps):
        log_hypers, Z, sstate, opt_state, done, _ = carry
        log_hypers, Z, sstate, opt_state = _stochastic_window(
            key, jnp.asarray(done), Y, X, kernel, log_hypers, Z, sstate, opt_state,
            learning_rate, step_size_delay, step_size_power, num_iters=steps,
            batch_size=batch_size, class_batch_size=class_batch_size,
            learn_hypers=bool(learn_hypers), learn_inducing=bool(learn_inducing),
            include_prior=bool(include_prior), num_steps=int(steps_per_iteration),
            placement=placement)
        value, state = full_data_elbo(Y, X, kernel, log_hypers, Z, sstate, placement)
        trace.append(float(value))
        return (log_hypers, Z, sstate, opt_state, done + steps, state), Window(
            steps, {"elbo": f"{trace[-1]:.6g}"},
            "elbo" if len(trace) > 1 and relative_change_below(trace[-1], trace[-2], tol)
            else None)

    # the last window may be shorter than elbo_every
    start = (log_hypers, Z, stochastic_cavi_init(N, C, Z.shape[0]), opt_state, 0, state)
    (log_hypers, Z, _, _, _, state), stopped = run_windows(
        window, start, cap=max_iter, size=int(elbo_every), desc="CAVI (stochastic)",
        unit="it", progress=progress, cap_reason="max_iter")
    converged = stopped.converged
    hypers = {k: jnp.exp(v) for k, v in log_hypers.items()}
    return CAVIResult(hypers, Z, state, np.asarray(trace), converged, Z.shape[0] < N,
                      factor_jitter(kernel, hypers, Z))

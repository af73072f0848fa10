"""Warm-up of NUTS: a diagonal (or dense) mass matrix and a step size, on nutpie's schedule.

The mass matrix. M^-1 is estimated per coordinate from the warm-up draws' variance,
regularised towards 1e-3 as Stan does:

    M^-1_ii = n / (n + 5) var(x_i) + 1e-3 5 / (n + 5),

n the draws in the estimator. Before the first draws it starts at M^-1_ii = 1 / |g_i(x_0)|,
g the potential's gradient at the initial point (1 where that gradient is 0 or not finite),
the scale at which a Gaussian's gradient would be one. nutpie's own estimator,
sqrt(var(x_i) / var(g_i)) from the draws' and the gradients' variances, gave fewer
effective samples per gradient on the logistic-softmax GP's latent posterior (for a
correlated target it estimates a conditional rather than a marginal scale) and is not used
(docs/records/speed.md).

The schedule (nutpie's), over ``num_warmup`` = W transitions, W a traced value:

* two running estimators (Welford's moments of the draws), the *front* one that sets M^-1
  after every warm-up draw and a *back* one that collects the newest draws; when the back
  one holds a window of draws, it becomes the front one and a new back one starts. The
  window is ``EARLY_SWITCH`` = 10 draws during the first ``EARLY_WINDOW`` = 30 % of the
  warm-up, then ``FIRST_WINDOW`` = 80 draws growing by ``WINDOW_GROWTH`` = 1.5 at each
  switch; no switch leaves less than a window before the last phase. Draws where the
  trajectory stayed at its start (a rejected move) are not counted;
* the step size by dual averaging of the trajectory's mean acceptance statistic towards
  ``target_accept`` (Hoffman & Gelman 2014, section 3.2; kappa 0.75, t0 10, gamma 0.05),
  restarted from a searched step size (``find_step_size``) at the start and when M^-1 first
  leaves its initial value, each step jittered by up to ``JITTER`` = 10 % while adapting;
* the last ``STEP_SIZE_WINDOW`` = 15 % of the warm-up adapts the step size alone, and the
  run then keeps the averaged step size exp(log-step-bar).

The settled end (``warmup_settled``, run by ``ppgpc.infer.mcmc`` between its windows of
transitions): W is the most warm-up. After each window the host compares the chains' M^-1
with the one at the window before; when in every chain the median over coordinates of
|log(M^-1_ii / M^-1_ii before)| is at most ``SETTLED_MASS`` = 0.2 and both windows' mean
acceptance statistic is within ``SETTLED_ACCEPT`` = 0.1 of ``target_accept`` (dual
averaging has reached its target), W is lowered so that the warm-up ends after one more
window, whose last 15 % are the schedule's step-size-only phase. The step size itself is
not required to be stable: it follows M^-1 (it fell by 20-30 % between consecutive windows
while M^-1 settled), and the last phase tunes it with M^-1 fixed. On the posteriors of
``benchmarks/nuts_ess_rate.py`` the warm-up ends at 400 of 500 (docs/records/speed.md).

A dense mass matrix (``dense=True``) keeps the schedule with the draws' covariance,
regularised the same way towards 1e-3 I.

References: A. Seyboldt, nutpie and nuts-rs (https://github.com/pymc-devs/nutpie, the
"diag_grad" mass matrix adaptation); M. D. Hoffman and A. Gelman (2014), The No-U-Turn
Sampler, JMLR 15; Stan Reference Manual, "HMC algorithm parameters" (windowed adaptation).

Every function is pure over arrays and NamedTuples; ``D`` is the flattened dimension of the
unconstrained parameters.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["Moments", "DualAveraging", "Adaptation", "adaptation_init", "adaptation_update",
           "restart_step_size", "find_step_size", "momentum", "schedule", "EARLY_WINDOW",
           "STEP_SIZE_WINDOW", "EARLY_SWITCH", "FIRST_WINDOW", "WINDOW_GROWTH", "JITTER",
           "INITIAL_STEP_SIZE", "WarmupWindow", "warmup_window", "warmup_settled",
           "SETTLED_MASS", "SETTLED_ACCEPT"]

EARLY_WINDOW = 0.3
"""Share of the warm-up during which the estimators switch every ``EARLY_SWITCH`` draws."""

STEP_SIZE_WINDOW = 0.15
"""Share of the warm-up, at its end, that adapts the step size alone."""

EARLY_SWITCH = 10
"""Draws of a window early in the warm-up."""

FIRST_WINDOW = 80
"""Draws of the first window after the early phase (or the draws already in the back
estimator then, when more)."""

WINDOW_GROWTH = 1.5
"""Factor by which each later window grows."""

JITTER = 0.1
"""Relative jitter of the step size while it adapts: uniform on (1 - JITTER, 1 + JITTER)."""

INITIAL_STEP_SIZE = 0.1
"""Where the step-size search starts."""

_LIMITS = (1e-20, 1e20)
"""Bounds of an inverse mass matrix entry."""

_DUAL_AVERAGING = {"t0": 10.0, "kappa": 0.75, "gamma": 0.05}
_MAX_STEP_SIZE = math.pi
_SEARCH_STEPS = 100


class Moments(NamedTuple):
    """Welford's running moments of the draws."""

    count: jax.Array
    """() draws counted."""
    draw_mean: jax.Array
    """(D,) mean of the draws."""
    draw_m2: jax.Array
    """(D,) sum of squared deviations of the draws; (D, D) their cross products (dense)."""


class DualAveraging(NamedTuple):
    """Nesterov's dual averaging of log step size (Hoffman & Gelman 2014, eq. 6)."""

    log_step: jax.Array
    """() log of the step size of the iterate."""
    log_step_bar: jax.Array
    """() log of the averaged step size (the one kept after warm-up)."""
    hbar: jax.Array
    """() running mean of target_accept - accept statistic."""
    mu: jax.Array
    """() shrinkage point, log(10 eps_0)."""
    count: jax.Array
    """() iterations since the last restart, from 1."""


class Adaptation(NamedTuple):
    """What one chain's warm-up has learnt, and what it is learning from."""

    step_size: jax.Array
    """() step size of the next transition."""
    inverse_mass: jax.Array
    """(D,) diagonal of M^-1, or (D, D) M^-1 (dense)."""
    mass_factor: jax.Array
    """(D,) 1 / sqrt(M^-1_ii), or (D, D) the lower Cholesky factor of M^-1 (dense)."""
    dual: DualAveraging
    front: Moments
    """The estimator that sets ``inverse_mass``."""
    back: Moments
    """The estimator of the newest draws, the next ``front``."""
    window: jax.Array
    """() draws of the next main-phase window."""
    initial: jax.Array
    """() True while ``inverse_mass`` is still the initial point's."""


def schedule(num_warmup) -> tuple[jax.Array, jax.Array]:
    """(early_end, step_size_start): the warm-up draw at which the early phase ends and the
    one from which only the step size adapts, for a (traced) warm-up length."""
    num_warmup = jnp.asarray(num_warmup)
    early_end = jnp.floor(EARLY_WINDOW * num_warmup).astype(num_warmup.dtype)
    step_start = num_warmup - jnp.floor(STEP_SIZE_WINDOW * num_warmup).astype(num_warmup.dtype)
    return early_end, step_start


def _empty_moments(dim: int, dense: bool, dtype) -> Moments:
    return Moments(jnp.zeros((), jnp.int32), jnp.zeros(dim, dtype),
                   jnp.zeros((dim, dim) if dense else dim, dtype))


def _add(moments: Moments, x: jax.Array, keep: jax.Array) -> Moments:
    """``moments`` with the draw x added (Welford), when ``keep``."""
    count = moments.count + 1
    dx = x - moments.draw_mean
    draw_mean = moments.draw_mean + dx / count
    dense = moments.draw_m2.ndim == 2
    draw_m2 = moments.draw_m2 + (jnp.outer(dx, x - draw_mean) if dense else dx * (x - draw_mean))
    added = Moments(count, draw_mean, draw_m2)
    return jax.tree.map(lambda new, old: jnp.where(keep, new, old), added, moments)


def _factor(inverse_mass: jax.Array) -> jax.Array:
    return jnp.linalg.cholesky(inverse_mass) if inverse_mass.ndim == 2 else lax.rsqrt(inverse_mass)


def _estimate(front: Moments, inverse_mass: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(M^-1, whether it is usable) from the front moments: the draws' variance (or
    covariance, dense) regularised as Stan does, n / (n + 5) var(x) + 1e-3 5 / (n + 5)."""
    n = front.count.astype(inverse_mass.dtype)
    var = front.draw_m2 / jnp.maximum(n - 1.0, 1.0)
    shrink = 1e-3 * (5.0 / (n + 5.0))
    if inverse_mass.ndim == 2:
        new = (n / (n + 5.0)) * var + shrink * jnp.eye(var.shape[0], dtype=var.dtype)
        return new, jnp.all(jnp.isfinite(jnp.linalg.cholesky(new)))
    new = (n / (n + 5.0)) * var + shrink
    valid = jnp.isfinite(new) & (new > 0)
    return jnp.where(valid, jnp.clip(new, *_LIMITS), inverse_mass), jnp.any(valid)


def _dual_start(step_size: jax.Array) -> DualAveraging:
    log_step = jnp.log(step_size)
    return DualAveraging(log_step, log_step, jnp.zeros_like(log_step), jnp.log(10.0) + log_step,
                         jnp.ones((), jnp.int32))


def _dual_advance(dual: DualAveraging, accept: jax.Array, target: float) -> DualAveraging:
    """One dual-averaging iteration (Hoffman & Gelman 2014, eq. 6, with x-bar's weights
    count^-kappa)."""
    t = dual.count.astype(dual.hbar.dtype)
    w = 1.0 / (t + _DUAL_AVERAGING["t0"])
    accept = jnp.where(jnp.isfinite(accept), accept, 0.0)
    hbar = (1.0 - w) * dual.hbar + w * (target - accept)
    log_step = jnp.minimum(dual.mu - hbar * jnp.sqrt(t) / _DUAL_AVERAGING["gamma"],
                           math.log(_MAX_STEP_SIZE))
    weight = t ** -_DUAL_AVERAGING["kappa"]
    log_step_bar = weight * log_step + (1.0 - weight) * dual.log_step_bar
    return DualAveraging(log_step, log_step_bar, hbar, dual.mu, dual.count + 1)


def adaptation_init(position: jax.Array, gradient: jax.Array, dense: bool = False
                    ) -> Adaptation:
    """The adaptation at the initial point: M^-1_ii = 1 / |g_i(x_0)| (1 where g_i is 0 or
    not finite), both estimators holding that point, the step size ``INITIAL_STEP_SIZE``
    (restart it from ``find_step_size``: ``restart_step_size``).

    Args:
        position, gradient: (D,) the initial point and the potential's gradient there.
        dense: a dense M^-1 (the draws' covariance) rather than a diagonal one.
    """
    dim, dtype = position.shape[0], position.dtype
    scale = jnp.abs(gradient)
    diag = jnp.where(jnp.isfinite(scale) & (scale > 0),
                     jnp.clip(1.0 / jnp.where(scale > 0, scale, 1.0), *_LIMITS), 1.0)
    inverse_mass = jnp.diag(diag) if dense else diag
    moments = _add(_empty_moments(dim, dense, dtype), position, jnp.array(True))
    step = jnp.asarray(INITIAL_STEP_SIZE, dtype)
    return Adaptation(step, inverse_mass, _factor(inverse_mass), _dual_start(step), moments,
                      moments, jnp.asarray(FIRST_WINDOW, jnp.int32), jnp.array(True))


def restart_step_size(adapt: Adaptation, step_size: jax.Array) -> Adaptation:
    """``adapt`` with its step size set to ``step_size`` and dual averaging restarted there
    (mu = log(10 step_size))."""
    step_size = jnp.asarray(step_size, adapt.step_size.dtype)
    return adapt._replace(step_size=step_size, dual=_dual_start(step_size))


def find_step_size(accept_of: Callable[[jax.Array], jax.Array], step_size: jax.Array,
                   target_accept: float) -> tuple[jax.Array, jax.Array]:
    """A step size near where one leapfrog step's acceptance statistic crosses
    ``target_accept``: from ``step_size``, doubled while the statistic stays above the
    target (halved while below), at most 100 times; the first step size past the crossing.

    Args:
        accept_of: ``step_size -> min(1, exp(-(H(after) - H(before))))`` of one leapfrog step
            from a fixed point and momentum (0 where not finite).
        step_size: () where the search starts.

    Returns:
        (step_size, leapfrog steps taken).
    """
    step_size = jnp.asarray(step_size)
    first = accept_of(step_size)
    up = first > target_accept

    def body(carry):
        step, count, _ = carry
        step = jnp.where(up, 2.0 * step, 0.5 * step)
        accept = accept_of(step)
        done = jnp.where(up, (accept <= target_accept) | (step > 1e5),
                         (accept >= target_accept) | (step < 1e-10))
        return step, count + 1, done

    step, count, _ = lax.while_loop(lambda c: (~c[2]) & (c[1] < _SEARCH_STEPS), body,
                                    (step_size, jnp.ones((), jnp.int32), jnp.array(False)))
    return step, count


def momentum(adapt: Adaptation, key: jax.Array) -> jax.Array:
    """(D,) a momentum r ~ N(0, M): r_i = eps_i / sqrt(M^-1_ii), or r = L^-T eps with
    M^-1 = L L^T (dense)."""
    factor = adapt.mass_factor
    eps = jax.random.normal(key, factor.shape[:1], factor.dtype)
    if factor.ndim == 2:
        return jax.scipy.linalg.solve_triangular(factor, eps, lower=True, trans="T")
    return factor * eps


def _switch_estimators(adapt: Adaptation, draw, position, moved, early_end, step_start):
    """(front, back, window) after adding ``position`` (D,) to both estimators (when
    ``moved``): the back one becomes the front one, and a new back one starts, once it
    holds a window of draws and another window fits before ``step_start``."""
    early = draw < early_end
    window = jnp.where(draw == early_end, jnp.maximum(adapt.window, adapt.back.count),
                       adapt.window)
    front = _add(adapt.front, position, moved)
    back = _add(adapt.back, position, moved)
    switch_at = jnp.where(early, EARLY_SWITCH, window)
    grown = jnp.maximum(window + 1, jnp.round(window * WINDOW_GROWTH).astype(window.dtype))
    following = jnp.where(early, EARLY_SWITCH, grown)
    switch = (back.count >= switch_at) & (following + draw <= step_start)
    empty = _empty_moments(position.shape[0], adapt.inverse_mass.ndim == 2, position.dtype)
    front = jax.tree.map(lambda b, f: jnp.where(switch, b, f), back, front)
    back = jax.tree.map(lambda e, b: jnp.where(switch, e, b), empty, back)
    return front, back, jnp.where(switch & ~early, following, window)


def _step_update(adapt: Adaptation, accept, key, target_accept: float) -> Adaptation:
    """One dual-averaging iteration; the next step size exp(log_step) jittered uniformly
    on (1 - ``JITTER``, 1 + ``JITTER``)."""
    dual = _dual_advance(adapt.dual, accept, target_accept)
    jitter = jax.random.uniform(key, (), dual.log_step.dtype, 1.0 - JITTER, 1.0 + JITTER)
    return adapt._replace(dual=dual, step_size=jnp.exp(dual.log_step) * jitter)


def adaptation_update(adapt: Adaptation, draw: jax.Array, num_warmup: jax.Array,
                      position: jax.Array, moved: jax.Array,
                      accept: jax.Array, key: jax.Array, target_accept: float,
                      search: Callable[[Adaptation], tuple[jax.Array, jax.Array]]
                      ) -> tuple[Adaptation, jax.Array]:
    """The adaptation after warm-up draw ``draw`` (0-based, below ``num_warmup``): the
    moments, the estimators' switch, M^-1 and the step size of the next transition (module
    docstring).

    Args:
        adapt: the adaptation the draw was made with.
        draw, num_warmup: () the draw's index and the warm-up length (traced).
        position: (D,) the draw.
        moved: () whether the draw differs from the transition's start.
        accept: () the trajectory's mean acceptance statistic.
        key: PRNG key of the step size's jitter.
        target_accept: the acceptance the step size aims at.
        search: ``adaptation -> (step_size, leapfrog steps)``, ``find_step_size`` at the
            draw with that adaptation's M^-1 (run when M^-1 first changes).

    Returns:
        (adaptation, leapfrog steps the search took: 0 without one).
    """
    early_end, step_start = schedule(num_warmup)
    zero = jnp.zeros((), jnp.int32)

    def stepped(adapt: Adaptation) -> tuple[Adaptation, jax.Array]:
        return _step_update(adapt, accept, key, target_accept), zero

    def searched(adapt: Adaptation) -> tuple[Adaptation, jax.Array]:
        step, count = search(adapt)
        return restart_step_size(adapt, step), count

    def mass(adapt: Adaptation) -> tuple[Adaptation, jax.Array]:
        front, back, window = _switch_estimators(adapt, draw, position, moved, early_end,
                                                 step_start)
        estimate, usable = _estimate(front, adapt.inverse_mass)
        changed = (front.count >= 3) & usable
        inverse_mass = jnp.where(changed, estimate, adapt.inverse_mass)
        updated = adapt._replace(inverse_mass=inverse_mass, mass_factor=_factor(inverse_mass),
                                 front=front, back=back, window=window,
                                 initial=adapt.initial & ~changed)
        return lax.cond(changed & adapt.initial, searched, stepped, updated)

    adapt, count = lax.cond(draw < step_start, mass, stepped, adapt)
    last = draw == num_warmup - 1
    step = jnp.where(last, jnp.exp(adapt.dual.log_step_bar), adapt.step_size)
    return adapt._replace(step_size=step), count


# ------------------------------------------------------------------ the settled end
SETTLED_MASS = 0.2
"""Largest median over coordinates of |log(M^-1_ii / M^-1_ii before)| between two
consecutive windows' ends, in every chain, for a settled mass matrix."""

SETTLED_ACCEPT = 0.1
"""Largest |mean acceptance statistic of a window - target_accept|, in every chain and both
windows compared, for a settled step size."""


class WarmupWindow(NamedTuple):
    """What the host reads of the chains' adaptation after a warm-up window."""

    inverse_mass: np.ndarray
    """(chain, D) the diagonal of M^-1 at the window's end."""
    count: np.ndarray
    """(chain,) draws in the front estimator then."""
    log_step: np.ndarray
    """(chain,) mean log step size of the window's transitions."""
    accept: np.ndarray
    """(chain,) mean acceptance statistic of the window's transitions."""


def warmup_window(inverse_mass, count, step_size, accept) -> WarmupWindow:
    """A ``WarmupWindow`` from the chains' M^-1 ((chain, D) or dense (chain, D, D)), front
    counts (chain,) and the window's step sizes and acceptance statistics (chain, draw)."""
    inverse_mass = np.asarray(inverse_mass)
    if inverse_mass.ndim == 3:
        inverse_mass = np.diagonal(inverse_mass, axis1=1, axis2=2)
    return WarmupWindow(inverse_mass, np.asarray(count),
                        np.mean(np.log(np.asarray(step_size)), axis=1),
                        np.mean(np.nan_to_num(np.asarray(accept)), axis=1))


def warmup_settled(before: WarmupWindow, after: WarmupWindow, target_accept: float) -> bool:
    """Whether the adaptation has settled between two consecutive warm-up windows: in
    every chain the mass matrix moved by a median of at most ``SETTLED_MASS`` in log
    (over coordinates), and both windows' mean acceptance statistic is within
    ``SETTLED_ACCEPT`` of the target."""
    moved = np.median(np.abs(np.log(after.inverse_mass / before.inverse_mass)), axis=1)
    accept = np.abs(np.stack([before.accept, after.accept]) - target_accept)
    return bool(np.all(moved <= SETTLED_MASS) and np.all(accept <= SETTLED_ACCEPT))

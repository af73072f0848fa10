"""The two rejection samplers behind ``ppgpc.polyagamma.sample_polyagamma``.

* `_sum_pg1_devroye`: exact, a sum of b PG(1, z) draws, each by Devroye's alternating-series
  rejection sampler for J*(1, |z|/2) = 4 PG(1, z) with truncation point t = 0.64.
* `_sample_approx`: for large or non-integer b, the two leading terms of the series
  definition drawn exactly (Gamma(b, 1) draws) plus a shifted inverse Gaussian with the
  remainder's first three cumulants, or for |z| >= 12 a shifted inverse Gaussian with the
  three cumulants of PG(b, z).

Both run as one vectorised ``lax.while_loop`` over every element (`_rejection_loop`), which
compacts the last few unfinished elements into a smaller loop. ``ppgpc.polyagamma``'s
docstring gives the definitions; docs/records/polyagamma.md the accuracy of the approximation.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtri

from ppgpc.polyagamma.moments import _kappa3_unit, _mean_unit, _var_unit

__all__: list[str] = []  # private helpers of ppgpc.polyagamma

_T = 0.64
"""Devroye's truncation point t for J*(1, z) = 4 PG(1, z); the series coefficients a_n(x)
decrease in n for every x with the piecewise choice below (Devroye 2009)."""

_Z_HEAD = 12.0
"""|z| below which the approximation draws the two leading series terms exactly."""

_NUM_HEAD = 2
"""Number of leading series terms drawn exactly by the approximation."""

_TINY = float(np.finfo(np.float64).tiny)
_EPS = float(np.finfo(np.float64).eps)

_LEVY_TAIL = math.erfc(1 / math.sqrt(2 * _T)) / 2
"""P(N < -1/sqrt(t)) for N ~ N(0, 1); N is drawn below -1/sqrt(t) so that 1/N^2 < t."""

_SHRINK = 8
"""`_rejection_loop` compacts once at most 1/_SHRINK of the elements are still active ..."""

_MIN_COMPACT = 1024
"""... and only if the compacted state would hold at least this many elements."""
S = TypeVar("S")


def _rejection_loop(
    key: jax.Array,
    step: Callable[[jax.Array, S], S],
    is_active: Callable[[S], jax.Array],
    state: S,
    *,
    compact: bool,
) -> S:
    """Iterate ``state = step(key_i, state)`` until no element is active.

    ``state`` is a NamedTuple of (n,) arrays, one entry per element; ``step`` must leave
    inactive elements unchanged and tolerate any values in them. A masked ``while_loop`` over
    all n elements wastes most of its work once few elements remain (the slowest of n
    geometric waiting times takes about log n / log(1 / rejection rate) iterations). With
    ``compact=True`` (and n >= `_SHRINK` * `_MIN_COMPACT`) the loop therefore stops when at
    most m = n / `_SHRINK` elements are active, gathers those into a state of static size m
    (padded with zeros, which every caller's ``is_active`` treats as inactive), finishes them
    in a second loop and scatters them back. One level only: each level compiles another
    copy of ``step``. Iteration i uses ``fold_in(key, i)``; the second loop continues the
    count, so no key is used twice.
    """
    n = jax.tree_util.tree_leaves(state)[0].shape[0]
    m = n // _SHRINK
    compact = compact and m >= _MIN_COMPACT

    def run(i, state, stop_at):
        def cond(carry):
            return jnp.sum(is_active(carry[1])) > stop_at

        def body(carry):
            i, s = carry
            return i + 1, step(jax.random.fold_in(key, i), s)

        return lax.while_loop(cond, body, (i, state))

    i, state = run(jnp.asarray(0, jnp.int32), state, m if compact else 0)
    if not compact:
        return state

    def finish_compacted(state):
        (idx,) = jnp.nonzero(is_active(state), size=m, fill_value=n)
        sub = jax.tree_util.tree_map(lambda a: a.at[idx].get(mode="fill", fill_value=0), state)
        sub = run(i, sub, 0)[1]
        return jax.tree_util.tree_map(lambda a, s: a.at[idx].set(s, mode="drop"), state, sub)

    return lax.cond(jnp.any(is_active(state)), finish_compacted, lambda s: s, state)


# ----------------------------------------------------------------------------------------
# Exact sampler: Devroye's method for PG(1, z), summed
# ----------------------------------------------------------------------------------------


def _inverse_gaussian(
    chi2: jax.Array, u: jax.Array, mu: jax.Array, lam: jax.Array | float
) -> jax.Array:
    """IG(mu, lam) draw from y = N^2 (N standard normal) and u ~ U(0, 1) (Michael et al. 1976).

    The smaller root x = mu [1 + w/2 - sqrt(w + w^2/4)], w = mu y / lam, is computed as
    mu / (1 + w/2 + sqrt(w + w^2/4)) (the two are equal; the second does not cancel when w is
    large), and mu^2 / x is returned instead with probability x / (mu + x).
    """
    w = mu * chi2 / lam
    x = mu / (1.0 + 0.5 * w + jnp.sqrt(w + 0.25 * w * w))
    return jnp.where(u * (mu + x) <= mu, x, mu * mu / x)


def _series_ratio(n: jax.Array, x: jax.Array) -> jax.Array:
    """a_n(x) / a_0(x) for Devroye's coefficients of the J*(1) density, x > 0.

    a_n(x) = pi (n + 1/2) (2 / (pi x))^{3/2} exp(-2 (n + 1/2)^2 / x)   for x <= t,
    a_n(x) = pi (n + 1/2) exp(-(n + 1/2)^2 pi^2 x / 2)                   for x > t,
    so a_n / a_0 = (2n + 1) exp(-2 n (n + 1) / x) or (2n + 1) exp(-n (n + 1) pi^2 x / 2).
    """
    nn1 = n * (n + 1.0)
    log_decay = jnp.where(x <= _T, -2.0 * nn1 / x, -0.5 * nn1 * math.pi**2 * x)
    return (2.0 * n + 1.0) * jnp.exp(log_decay)


def _alternating_series_accept(x: jax.Array, v: jax.Array, pending: jax.Array) -> jax.Array:
    """Devroye's acceptance test for a proposal x drawn from the envelope a_0(x) e^{-c^2 x/2}.

    Accept iff v a_0(x) <= sum_n (-1)^n a_n(x). The partial sums S_n bracket the sum and
    a_n decreases in n, so the test is decided exactly at the first odd n with v <= S_n
    (accept) or even n with v > S_n (reject); in ratio form S_0 = 1. Almost every proposal is
    decided at n = 1 or 2; the loop runs until every pending element is decided.

    Args:
        x: (n,) proposals on the J* scale.
        v: (n,) U(0, 1) variates.
        pending: (n,) elements that hold a proposal to test.

    Returns:
        (n,) boolean, True where the proposal is accepted.
    """

    def cond(state):
        return jnp.any(state[2])

    def body(state):
        n, s, undecided, accepted = state
        n = n + 1
        odd = (n % 2) == 1
        s = s + jnp.where(odd, -1.0, 1.0) * _series_ratio(n.astype(x.dtype), x)
        accept_now = undecided & odd & (v <= s)
        reject_now = undecided & ~odd & (v > s)
        return n, s, undecided & ~accept_now & ~reject_now, accepted | accept_now

    init = (jnp.asarray(0, jnp.int32), jnp.ones_like(x), pending, jnp.zeros_like(pending))
    return lax.while_loop(cond, body, init)[3]


class _DevroyeState(NamedTuple):
    """Per-element state of the summed Devroye sampler, all (n,)."""

    c: jax.Array
    """|z| / 2, the tilt of J*(1, c) = 4 PG(1, z)."""
    rate: jax.Array
    """K = pi^2 / 8 + c^2 / 2, rate of the right (x > t) envelope component."""
    prob_left: jax.Array
    """q / (p + q), probability of the left (x < t) envelope component."""
    owed: jax.Array
    """int32, PG(1, z) terms still to draw; 0 means done."""
    total: jax.Array
    """Sum of the PG(1, z) terms drawn so far."""
    in_left: jax.Array
    """bool, the last left-component attempt failed and is being retried."""


def _devroye_step(key: jax.Array, s: _DevroyeState) -> _DevroyeState:
    """One attempt at a J*(1, c) draw for every element still owed one (see `_sum_pg1_devroye`)."""
    active = s.owed > 0
    # (optimization_barrier: stops XLA from recomputing the random bits in every fusion.)
    u_mix, u1, u2 = lax.optimization_barrier(
        jax.random.uniform(key, (3,) + s.c.shape, s.c.dtype, minval=_TINY)
    )
    # 1. Envelope component. A retry stays in the left one. The mixture uniform, given the
    #    component it chose, is again uniform and becomes the series uniform v.
    choose = ~s.in_left
    left = s.in_left | (u_mix < s.prob_left)
    v_left = u_mix / s.prob_left
    v_right = (u_mix - s.prob_left) / (1.0 - s.prob_left)
    v = jnp.where(choose, jnp.where(left, v_left, v_right), u_mix)
    # 2. Right component: t + Exp(1) / K.
    x_right = _T - jnp.log(u1) / s.rate
    # 3. Left component, one attempt at IG(1/c, 1) truncated to (0, t).
    levy = s.c < 1 / _T
    normal = lax.optimization_barrier(ndtri(jnp.where(levy, u1 * _LEVY_TAIL, u1)))
    chi2 = normal * normal
    ok_levy = u2 <= jnp.exp(-0.5 * s.c * s.c / chi2)  # x = 1 / N^2, accept e^{-c^2 x / 2}
    mu = 1.0 / jnp.where(levy, 1.0, s.c)
    x_ig = _inverse_gaussian(chi2, u2, mu, 1.0)
    x_left = jnp.where(levy, 1.0 / chi2, x_ig)
    ok_left = jnp.where(levy, ok_levy, x_ig < _T)
    # 4. Outer rejection step by the alternating series, then bookkeeping.
    x = jnp.where(left, x_left, x_right)
    accepted = _alternating_series_accept(x, v, active & (~left | ok_left))
    return s._replace(
        owed=s.owed - accepted.astype(s.owed.dtype),
        total=s.total + jnp.where(accepted, 0.25 * x, 0.0),
        in_left=active & left & ~ok_left,
    )


def _sum_pg1_devroye(key: jax.Array, owed: jax.Array, z: jax.Array) -> jax.Array:
    """Exact draws of PG(owed, z) = sum of ``owed`` independent PG(1, z), by Devroye's method.

    Per element, J*(1, c) = 4 PG(1, z) with c = z / 2 is drawn by rejection from the envelope
    g(x) proportional to a_0(x) e^{-c^2 x / 2}, a mixture of
      * right (x > t): t + Exp(1) / K,  K = pi^2 / 8 + c^2 / 2,  mass p = pi / (2K) e^{-K t};
      * left (x < t): inverse Gaussian IG(1/c, 1) truncated to (0, t),
        mass q = 2 e^{-c} P(IG(1/c, 1) < t)
               = 2 e^{-c} Phi((c t - 1) / sqrt(t)) + 2 e^{c} Phi(-(c t + 1) / sqrt(t)).
    The truncated IG is drawn by its own rejection step (a failed left proposal retries the
    left component, never the mixture choice, so no proposal can exceed t):
      * c < 1/t: x = 1 / N^2 with N conditioned on |N| > 1/sqrt(t) (drawn by inversion),
        accepted with probability e^{-c^2 x / 2};
      * c >= 1/t: x ~ IG(1/c, 1), accepted iff x < t.
    (1/t is, to 0.5%, where the two acceptance rates cross.) Each iteration of the
    `_rejection_loop` makes one attempt for every element still owed a term; accepted draws
    are added (divided by 4) and the element's count drops by one.

    Args:
        key: PRNG key.
        owed: (n,) int32 number of PG(1, z) terms per element (0 gives exactly 0).
        z: (n,) finite |z| >= 0, on the PG scale.

    Returns:
        (n,) float64 draws.
    """
    c = 0.5 * z
    rate = math.pi**2 / 8 + 0.5 * c * c
    log_p = jnp.log(math.pi / (2 * rate)) - rate * _T
    # e^{2c} Phi(-(c t + 1)/sqrt(t)) < e^{-470} relative to the first term once c > 40.
    c_cap = jnp.minimum(c, 40.0)
    scale = math.sqrt(2 * _T)
    first = 0.5 * lax.erfc((1 - c * _T) / scale)
    second = 0.5 * jnp.exp(2 * c_cap) * lax.erfc((c_cap * _T + 1) / scale)
    log_q = math.log(2.0) - c + jnp.log(first + jnp.where(c < 40.0, second, 0.0))
    state = _DevroyeState(
        c=c,
        rate=rate,
        prob_left=jax.nn.sigmoid(log_q - log_p),
        owed=owed,
        total=jnp.zeros_like(z),
        in_left=jnp.zeros(owed.shape, bool),
    )
    return _rejection_loop(key, _devroye_step, lambda s: s.owed > 0, state, compact=True).total


# ----------------------------------------------------------------------------------------
# Approximate sampler for large b
# ----------------------------------------------------------------------------------------


class _GammaState(NamedTuple):
    """Per-element state of the Marsaglia-Tsang loop, all (n,)."""

    d: jax.Array
    """a - 1/3 for the shape a >= 1 being drawn."""
    draw: jax.Array
    """Accepted draw d v (0 until accepted)."""
    pending: jax.Array
    """bool, not yet accepted."""


def _gamma_step(key: jax.Array, s: _GammaState) -> _GammaState:
    """One Marsaglia-Tsang attempt for every pending element."""
    u1, u2 = jax.random.uniform(key, (2,) + s.d.shape, s.d.dtype, minval=_TINY)
    x = ndtri(u1)
    v = (1.0 + x / jnp.sqrt(9.0 * s.d)) ** 3
    v_safe = jnp.where(v > 0, v, 1.0)
    log_ratio = 0.5 * x * x + s.d * (1.0 - v_safe + jnp.log(v_safe))
    ok = s.pending & (v > 0) & (jnp.log(u2) < log_ratio)
    return s._replace(draw=jnp.where(ok, s.d * v, s.draw), pending=s.pending & ~ok)


def _sample_gamma(key: jax.Array, a: jax.Array, u_boost: jax.Array) -> jax.Array:
    """Gamma(a, 1) draws for a > 0, shape (n,) (Marsaglia & Tsang 2000); 0 where a = 0.

    For a >= 1, with d = a - 1/3: x ~ N(0, 1), v = (1 + x / sqrt(9d))^3, accept d v iff
    v > 0 and log u < x^2 / 2 + d - d v + d log v (acceptance above 95%). For a < 1,
    Gamma(a + 1) u_boost^{1/a}, with ``u_boost`` (n,) U(0, 1) variates from the caller.
    """
    small = a < 1
    state = _GammaState(
        d=jnp.where(small, a + 1, a) - 1 / 3, draw=jnp.zeros_like(a), pending=a > 0
    )
    draw = _rejection_loop(key, _gamma_step, lambda s: s.pending, state, compact=False).draw
    boost = jnp.exp(jnp.log(u_boost) / jnp.where(small, a, 1.0))
    return jnp.where(small, draw * boost, draw)


def _sample_approx(
    key_gamma: jax.Array, key_uniform: jax.Array, b: jax.Array, z: jax.Array
) -> jax.Array:
    """Three-cumulant approximation of PG(b, z) for b > 0, z >= 0 (see the module docstring).

    With c_k = 1 / (2 pi^2 (k - 1/2)^2 + z^2 / 2), PG(b, z) = sum_k c_k g_k, g_k ~ Gamma(b, 1).
    For z < 12 the terms k = 1, 2 are drawn exactly (head H); the rest R, with cumulants
    kappa_r(R) = kappa_r(PG(b, z)) - b (r - 1)! sum_{k <= 2} c_k^r, r = 1, 2, 3, is replaced by
    s + IG(mu, lam) with mu = 3 kappa_2^2 / kappa_3, lam = mu^3 / kappa_2 (variance kappa_2,
    skewness 3 sqrt(mu / lam) = kappa_3 / kappa_2^{3/2}) and s = kappa_1 - mu. For z >= 12,
    H = 0 and R is the whole variable. The shift s is 0.11 kappa_1 for z < 12 and within
    5e-4 kappa_1 of 0 above, so the clip of the result at 0 is a formality.

    Args:
        key_gamma: PRNG key of the Gamma(b, 1) loop.
        key_uniform: PRNG key of the other variates.
        b: (n,) shape parameters > 0.
        z: (n,) finite |z|.

    Returns:
        (n,) float64 draws.
    """
    u_normal, u_root, *u_boost = jax.random.uniform(
        key_uniform, (2 + _NUM_HEAD,) + z.shape, z.dtype, minval=_TINY
    )
    ks = jnp.arange(1, _NUM_HEAD + 1, dtype=z.dtype)[:, None]
    use_head = z < _Z_HEAD
    coef = jnp.where(use_head, 1.0 / (2 * math.pi**2 * (ks - 0.5) ** 2 + 0.5 * z * z), 0.0)
    shape_head = jnp.where(use_head, b, 0.0)  # Gamma(0) is skipped by `_sample_gamma`
    g = _sample_gamma(
        key_gamma, jnp.broadcast_to(shape_head, coef.shape).ravel(), jnp.concatenate(u_boost)
    )
    head = jnp.sum(coef * g.reshape(coef.shape), axis=0)
    kappa1 = b * (_mean_unit(z) - jnp.sum(coef, axis=0))
    kappa2 = b * (_var_unit(z) - jnp.sum(coef**2, axis=0))
    kappa3 = b * (_kappa3_unit(z) - 2 * jnp.sum(coef**3, axis=0))
    mu = 3 * kappa2**2 / kappa3
    lam = mu**3 / kappa2
    normal = ndtri(u_normal)
    tail = kappa1 - mu + _inverse_gaussian(normal * normal, u_root, mu, lam)
    return jnp.maximum(head + tail, 0.0)



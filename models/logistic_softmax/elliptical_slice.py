"""Elliptical slice sampling (Murray, Adams & MacKay 2010, "Elliptical slice sampling",
AISTATS; Algorithm 1) for a target with a Gaussian prior factor:

    p(x) propto N(x | 0, Sigma) L(x).

Tuning-free: a step draws nu from the prior, a log-threshold log L(x) + log u, and
proposes x cos t + nu sin t on a bracket of angles that shrinks towards t = 0 (the current
point) until the likelihood clears the threshold; every step leaves p(x) invariant.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["elliptical_slice"]


def elliptical_slice(key, x, prior_draw, log_lik, num_steps: int):
    """``num_steps`` elliptical slice sampling steps (Murray, Adams & MacKay 2010) on

        p(x) propto N(x | 0, Sigma) L(x),

    given ``prior_draw(key) ~ N(0, Sigma)`` (of x's shape) and ``log_lik(x) = log L(x)``.
    Each step: nu from the prior; threshold log L(x) + log u; propose x cos t + nu sin t on a
    bracket [t - 2 pi, t] that shrinks towards 0 until the likelihood exceeds the threshold.
    No tuning; every step leaves p(x) invariant.

    Args:
        key: PRNG key; x: the current point; prior_draw, log_lik: as above.
        num_steps: slice-sampling steps.

    Returns:
        (the new point, x's shape; the likelihood evaluations the steps made, an int32:
        two a step and one a shrink of the bracket).
    """
    def one_step(carry, k):
        x, count = carry
        k_nu, k_u, k_t, k_shrink = jax.random.split(k, 4)
        nu = prior_draw(k_nu)
        threshold = log_lik(x) + jnp.log1p(-jax.random.uniform(k_u))   # log L(x) + log u
        t = jax.random.uniform(k_t, maxval=2.0 * jnp.pi)

        def proposal(t):
            return x * jnp.cos(t) + nu * jnp.sin(t)

        def rejected(c):
            return c[4] <= threshold

        def shrink(c):
            t, lo, hi, i, _ = c
            lo, hi = jnp.where(t < 0.0, t, lo), jnp.where(t < 0.0, hi, t)
            t = jax.random.uniform(jax.random.fold_in(k_shrink, i), minval=lo, maxval=hi)
            return t, lo, hi, i + 1, log_lik(proposal(t))

        t, _, _, shrinks, _ = lax.while_loop(
            rejected, shrink, (t, t - 2.0 * jnp.pi, t, 0, log_lik(proposal(t))))
        return (proposal(t), count + 2 + shrinks), None

    (x, count), _ = lax.scan(one_step, (x, jnp.zeros((), jnp.int32)),
                             jax.random.split(key, num_steps))
    return x, count

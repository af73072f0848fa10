"""The logistic-softmax link (docs/math.md section 3):

    p(y = k | f) = sigma(f_k) / sum_c sigma(f_c),   f in R^C,

with sigma the logistic function. Its log is what the Gibbs sampler's level move, the
latent-form NUTS model and the predictive use.
"""

from __future__ import annotations

import jax

__all__ = ["log_link"]


def log_link(f: jax.Array) -> jax.Array:
    """log p(y = k | f) = log sigma(f_k) - log sum_c sigma(f_c), (..., C) -> (..., C).

    log sigma(f) = -softplus(-f) and a log-sum-exp over classes: finite for any finite f.
    """
    log_sig = -jax.nn.softplus(-f)
    return log_sig - jax.nn.logsumexp(log_sig, axis=-1, keepdims=True)

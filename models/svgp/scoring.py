"""Held-out scoring of SVGP parameters during SVI (the validation monitor of
``ppgpc.infer.svi``), in chunks of rows (``ppgpc.models.svgp``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppgpc.gp.kernels import kernel_params
from ppgpc.models.svgp.conditional import _chol_mm, _projection, marginal_moments
from ppgpc.models.svgp.likelihood import mixing_matrix, LOG_LINKS
from ppgpc.runtime.programs import jit


__all__ = ["VALIDATION_CHUNK", "validation_log_predictive"]

# ------------------------------------------------------------------ held-out scoring
VALIDATION_CHUNK = 1024
"""Held-out points scored at once by ``validation_log_predictive`` (bounds its memory to
O(L M chunk) for the projections and O(S chunk C) for the draws)."""


def _chunk_log_predictive(key, params: dict, data, kernel, Xs, ys, num_draws: int):
    """log p(y_i | x_i) for one chunk (n,) (``validation_log_predictive``)."""
    kp = kernel_params(params)
    Z = params["inducing_inputs"]
    a, resid = _projection(data, kernel, kp, Z, _chol_mm(data, kernel, kp, Z), Xs)
    mean, var = marginal_moments(a, resid, params["q_mean"], params["q_scale_tril"])
    f = mean + jnp.sqrt(var) * jax.random.normal(key, (num_draws,) + mean.shape)
    log_p = LOG_LINKS[data.link](f @ mixing_matrix(data, params).T)  # (S, n, C)
    log_p_y = jnp.take_along_axis(log_p, ys[None, :, None], axis=-1)[..., 0]  # (S, n)
    return jax.scipy.special.logsumexp(log_p_y, axis=0) - jnp.log(num_draws)


_chunk_log_predictive_jit = jit(_chunk_log_predictive, static_argnums=(3, 6))


def validation_log_predictive(key, params: dict, data, kernel, X, y,
                              num_draws: int = 64):
    """Log predictive probabilities of held-out labels under the current SVI parameters,
    log p(y_i | x_i) = log E_q[link(W f_i)]_{y_i} (docs/math.md section 4), for the SVI driver's
    validation monitor (``ppgpc.infer.svi``, option ``validation_data``).

    The expectation is over q's marginal at x_i, N(a_i^T m_c, k_ii - |a_i|^2 + |R_c^T a_i|^2)
    per latent, estimated with ``num_draws`` draws per point. Each point's predictive
    depends on its own marginal only, so this has the same expectation as the fitted
    classifier's predictive (draws of v, then the SVGP conditional). The mean of the draws'
    probabilities is biased low in log by about Var / (2 S p^2) (Jensen), the same for every
    iterate scored with the same ``key``, which is what a comparison of iterates needs.

    Args:
        key: PRNG key (keep it fixed across calls to compare iterates on common draws).
        params: constrained SVI parameters by site (``kernel_*``, ``inducing_inputs``,
            ``mixing``, ``q_mean``, ``q_scale_tril``).
        X: (n, D) held-out inputs, scaled as the training inputs; y: (n,) integer labels.
        num_draws: S.

    Returns:
        (n,) log predictive probabilities.
    """
    if data.link == "gaussian":
        raise ValueError("validation_log_predictive scores class labels; the Gaussian link "
                         "has no categorical predictive")
    X = jnp.asarray(X, dtype=jnp.float64)
    y = jnp.asarray(y, dtype=jnp.int32)
    n = X.shape[0]
    chunk = min(VALIDATION_CHUNK, n)
    out = []
    for i, start in enumerate(range(0, n, chunk)):
        Xs, ys = X[start:start + chunk], y[start:start + chunk]
        pad = chunk - Xs.shape[0]
        if pad:  # keep one compiled shape: pad the last chunk by repeating its first row
            Xs = jnp.concatenate([Xs, jnp.broadcast_to(Xs[:1], (pad,) + Xs.shape[1:])])
            ys = jnp.concatenate([ys, jnp.broadcast_to(ys[:1], (pad,))])
        scores = _chunk_log_predictive_jit(jax.random.fold_in(key, i), params, data, kernel,
                                           Xs, ys, int(num_draws))
        out.append(scores[:chunk - pad])
    return jnp.concatenate(out)

"""The expected log-likelihood of the SVGP's ELBO: the links, the marginal, Price and joint
estimators' sums over a batch, and the sum over the devices of a mesh
(``ppgpc.models.svgp``)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from ppgpc.gp import simplex
from ppgpc.models.svgp.conditional import _projection, marginal_moments
from ppgpc.runtime.blocks import Placement, layout, replicate, sum_blocks


__all__ = ["LOG_LINKS", "log_likelihood_curvature", "log_likelihood", "batch_log_likelihood_sum",
           "on_devices", "mixing_matrix"]

# ---------------------------------------------------------------- the ELBO's pieces


def _log_link_softmax(f: jax.Array) -> jax.Array:
    """log softmax(f): (..., C) -> (..., C)."""
    return jax.nn.log_softmax(f, axis=-1)


def _log_link_ilr(f: jax.Array) -> jax.Array:
    """log softmax(V f) (inverse ILR): (..., C-1) -> (..., C)."""
    return simplex.ilr_log_inverse(f)


LOG_LINKS = {"softmax": _log_link_softmax, "ilr": _log_link_ilr}
"""The links by name: ``f (..., L) -> log p(y = c | f) (..., C)``, softmax (L = C) or the
inverse ILR (L = C - 1, ``ppgpc.gp.simplex.ilr_log_inverse``)."""


def log_likelihood_curvature(data, f, W):
    """d^2 log p(y_i | W f_i) / d f_ic^2, the diagonal of the Hessian in f (..., B, L).

    Softmax and inverse-ILR links: with G^T = (L, C) the rows lin(W[:, c]) (the logits of the
    unit latent vector e_c: W e_c, or V W e_c) and p the class probabilities at f,
    -sum_k G_kc^2 p_k + (sum_k G_kc p_k)^2 (the Hessian of log softmax is
    -(diag p - p p^T), whatever the observed class). Gaussian link: -sum_k W_kc^2 / sigma^2.
    """
    if data.link == "gaussian":
        return jnp.broadcast_to(-jnp.sum(W * W, axis=0) / data.noise_var, f.shape)
    to_logits = simplex.helmert_apply if data.link == "ilr" else (lambda g: g)
    G_t = to_logits(W.T)                                                    # (L, C)
    p = jnp.exp(LOG_LINKS[data.link](f @ W.T))                             # (..., B, C)
    return -(p @ (G_t * G_t).T) + (p @ G_t.T) ** 2


def _price_variance_term(data, f, W, var):
    """A term of value 0 whose gradient is Price's estimate of d ELL / d var (module
    docstring, ``"price"``): 1/2 sum_c h_ic (var_ic - stop_gradient(var_ic)), with the
    curvature h held fixed. (S, B)."""
    h = jax.lax.stop_gradient(log_likelihood_curvature(data, f, W))
    return 0.5 * jnp.sum(h * (var - jax.lax.stop_gradient(var)), axis=-1)


def log_likelihood(data, mixed, obs):
    """log p(obs_i | W f_i) for W f (..., n, L) and observations obs (n,) labels or (n, L)
    targets (Gaussian link): (..., n)."""
    if data.link == "gaussian":
        return dist.Normal(mixed, jnp.sqrt(data.noise_var)).to_event(1).log_prob(obs)
    return dist.Categorical(logits=LOG_LINKS[data.link](mixed)).log_prob(obs)


def batch_log_likelihood_sum(data, kernel, params, Z, chol_mm, q_mean, q_tril, W, idx, eps):
    """The marginal (or Price) estimator's sum over a minibatch, on the devices of
    ``data.placement`` (``ppgpc.runtime.blocks.sum_blocks`` over blocks of the batch):

        sum_{s, i in batch} log p(y_i | W f_si),   f_si = mu_i + sigma_i eps_si,

    with (mu_i, sigma_i^2) q's marginal at x_i (``marginal_moments``), plus, under
    ``"price"``, the zero-valued term whose gradient is Price's (``_price_variance_term``).
    The ELBO's likelihood part is (N / B) (1 / S) times it.

    Args:
        params, Z, chol_mm: kernel parameters, inducing inputs and their K_mm factor;
        q_mean: (L, M); q_tril: (L, M, M); W: (L, L) mixing matrix.
        idx: (B,) the batch's point indices; eps: (S, B, L) standard normals.
    """
    obs = data.targets[idx] if data.link == "gaussian" else data.y[idx]
    price = data.ell_estimator == "price"

    def block(shared, rows, valid, group):
        params, Z, chol_mm, q_mean, q_tril, W = shared
        Xb, obs_b, eps_b = rows                                             # eps_b (n, S, L)
        a, resid = _projection(data, kernel, params, Z, chol_mm, Xb)
        mean, var = marginal_moments(a, resid, q_mean, q_tril)              # (n, L)
        sd = jax.lax.stop_gradient(jnp.sqrt(var)) if price else jnp.sqrt(var)
        f = mean + sd * jnp.swapaxes(eps_b, 0, 1)                           # (S, n, L)
        terms = log_likelihood(data, f @ W.T, obs_b)                        # (S, n)
        if price:
            terms = terms + _price_variance_term(data, f, W, var)
        return jnp.sum(jnp.where(valid, terms, 0.0))

    lay = layout(idx.shape[0], data.num_inducing, data.placement)
    return sum_blocks(block, lay, (params, Z, chol_mm, q_mean, q_tril, W),
                      (data.X[idx], obs, jnp.swapaxes(eps, 0, 1)), mesh=data.placement.mesh)


def on_devices(data, mesh):
    """``data`` with each minibatch's expected log-likelihood split over the devices of
    ``mesh`` (a ``jax.sharding.Mesh`` with an axis ``"data"``): each device sums its share
    of the batch (``batch_log_likelihood_sum``; a batch size that the devices do not
    divide is padded with rows of weight 0), one ``psum`` adds them, and the variational
    parameters, hyperparameters and optimiser state stay replicated. The arrays are
    replicated on the mesh (``ppgpc.runtime.blocks.replicate``).

    Raises:
        ValueError: ``ell_estimator="joint"``, whose draws of f are sites of the model and
            the guide (``"marginal"`` and ``"price"`` can be split).
    """
    if data.ell_estimator == "joint":
        raise ValueError("ell_estimator='joint' draws f at the batch as a site of the model "
                         "and the guide, which cannot be split over devices; the 'marginal' "
                         "(default) and 'price' estimators can")
    placed = dataclasses.replace(data, placement=Placement(
        mesh=mesh, block_rows=data.placement.block_rows))
    return replicate(placed, mesh)


def mixing_matrix(data, params: dict):
    """The fitted mixing matrix W (L, L): the ``mixing`` parameter, or the identity when the
    model holds it there (``prepare(learn_mixing=False)``)."""
    return params["mixing"] if data.learn_mixing else jnp.eye(data.num_latent)

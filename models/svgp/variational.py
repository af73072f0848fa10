"""The SVGP's NumPyro model and guide (variational sites, the ELBO's sample and factor
sites), the priors on its hyperparameters, and the fitted result as draws of the whitened
inducing values (``ppgpc.models.svgp``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from ppgpc.gp.kernels import kernel_log_prior, kernel_params
from ppgpc.models.svgp.conditional import (_chol_mm, _projection, marginal_moments,
                                           svgp_conditional, WhitenedPrior)
from ppgpc.models.svgp.data import minibatch_rows, row_normals, SVGPData
from ppgpc.models.svgp.likelihood import (_price_variance_term, batch_log_likelihood_sum,
                                          mixing_matrix, LOG_LINKS)
from ppgpc.runtime.padding import real_rows_only


__all__ = ["mixed_amplitudes", "prior_params", "inducing_values", "inducing_latent", "svi_result",
           "svi_defaults", "FULL_BATCH_POINTS", "FULL_BATCH_STEPS", "MINIBATCH_STEPS",
           "MINIBATCH_SIZE",
           "includes_hyper_prior", "own_inducing_values", "model", "guide"]

# ------------------------------------------------------------------ the SVI schedule
FULL_BATCH_POINTS = 640
"""Up to this many training points every SVI step sees all of them by default; above,
minibatches of ``MINIBATCH_SIZE``. A full-batch step costs O(N M^2 L) against
O(256 M^2 L), and the full-batch schedule takes 2000 steps against 5000, so the two
schedules cost the same at N = 256 x 5000 / 2000 = 640; below it the full batch is faster,
above it the minibatches, at the same test NLL (measured on 300 to 5000 points:
docs/records/defaults.md)."""

MINIBATCH_SIZE = 256
"""Minibatch size B above ``FULL_BATCH_POINTS`` training points."""

FULL_BATCH_STEPS = (2000, 0.1)
"""Default (max_iter, learning_rate) when every step sees all training points (the
measurements behind them: docs/records/defaults.md)."""

MINIBATCH_STEPS = (5000, 0.01)
"""Default (max_iter, learning_rate) with minibatches (B < N)."""


def svi_defaults(num_points: int, batch_size: int | None) -> dict:
    """The SVI options this model runs with where none are given (``SVI.default_options``).

    Args:
        num_points: N, the real training rows.
        batch_size: the given minibatch size B, or None.

    Returns:
        ``{"batch_size", "max_iter", "learning_rate"}``: B = N up to ``FULL_BATCH_POINTS``
        points and ``MINIBATCH_SIZE`` above (unless given); ``FULL_BATCH_STEPS`` when B >= N,
        ``MINIBATCH_STEPS`` otherwise.
    """
    if batch_size is None:
        batch_size = num_points if num_points <= FULL_BATCH_POINTS else MINIBATCH_SIZE
    steps, rate = FULL_BATCH_STEPS if batch_size >= num_points else MINIBATCH_STEPS
    return {"batch_size": int(batch_size), "max_iter": steps, "learning_rate": rate}


# ------------------------------------------------------- variational sites and results
def _params_sites(data, kernel):
    """The ``numpyro.param`` sites of kernel and inducing inputs (shared by model/guide);
    kernel parameters gain a leading latent axis (L, ...) with ``shared_kernel=False``."""
    D = data.X.shape[1]
    start = kernel.initial_params(D, variance=data.initial_variance,
                                  lengthscale=data.initial_lengthscale)
    if not data.shared_kernel:
        start = {name: jnp.broadcast_to(jnp.asarray(value), (data.num_latent,)
                                        + jnp.shape(value))
                 for name, value in start.items()}
    params = {name: numpyro.param("kernel_" + name, value, constraint=constraints.positive)
              for name, value in start.items()}
    Z = numpyro.param("inducing_inputs", data.inducing_init)
    return params, Z


def _resolve_batch(batch_size, N: int):
    if batch_size is None:
        return None
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size > N:
        raise ValueError(f"batch_size B = {batch_size} exceeds the number of training points "
                         f"N = {N}; choose B <= N (or None for full batches)")
    return None if batch_size == N else int(batch_size)


def _observe(data, mixed, idx) -> None:
    """The observed site ``y`` given W f (..., B, L) on the minibatch ``idx``."""
    if data.link == "gaussian":
        numpyro.sample("y", dist.Normal(mixed, jnp.sqrt(data.noise_var)).to_event(1),
                       obs=data.targets[idx])
    else:
        numpyro.sample("y", dist.Categorical(logits=LOG_LINKS[data.link](mixed)),
                       obs=data.y[idx])


def mixed_amplitudes(variance, W):
    """Each latent's variance in the mixed latent W f: var_l |W[:, l]|^2, shape (L,).

    The likelihood sees f only through W f, and W f has the same law under (W diag(s),
    var / s^2) as under (W, var) for any s > 0: the two share one amplitude, which this is.

    Args:
        variance: () kernel variance shared by the latents, or (L,) one per latent.
        W: (L, L) mixing matrix.
    """
    return variance * jnp.sum(W * W, axis=0)


def prior_params(data, params: dict, W) -> dict:
    """The kernel parameters the kernel prior scores: ``params`` as they are
    (``variance_prior_on="kernel"``), or with the variance replaced by the mixed amplitudes
    (L,) (``"mixed"``; ``mixed_amplitudes``)."""
    if data.variance_prior_on == "kernel":
        return params
    return {**params, "variance": mixed_amplitudes(params["variance"], W)}


def _variational_sites(L: int, M: int, init_scale: float = 1.0):
    """The ``numpyro.param`` sites of q(v): ``q_mean`` (L, M), ``q_scale_tril`` (L, M, M)."""
    q_mean = numpyro.param("q_mean", jnp.zeros((L, M)))
    q_tril = numpyro.param("q_scale_tril",
                           init_scale * jnp.broadcast_to(jnp.eye(M), (L, M, M)),
                           constraint=constraints.lower_cholesky)
    return q_mean, q_tril


def inducing_values(data, kernel, hypers: dict, v):
    """u = L_mm v, the inducing values f(Zm), for whitened draws v (..., M, L) (per latent
    factor L_mm,c with per-latent kernels or inducing inputs)."""
    params = kernel_params(hypers)
    chol_mm = _chol_mm(data, kernel, params, hypers["inducing_inputs"])
    if chol_mm.ndim == 2:
        return jnp.einsum("ij,...jl->...il", chol_mm, v)
    return jnp.einsum("lij,...jl->...il", chol_mm, v)


def inducing_latent(data, kernel, hypers: dict, v, Xs, eps):
    """Draws of the mixed latent W f(Xs) given whitened inducing draws (predictive kind
    ``"inducing"``): f = a^T v + sqrt(k** - |a|^2) eps, then W f.

    Args:
        hypers: point hyperparameters by site (``kernel_*``, ``inducing_inputs``, ``mixing``).
        v: (S, M, L) whitened inducing draws; Xs: (n, D); eps: (S, n, L) standard normals.

    Returns:
        (S, n, L) draws of W f(Xs).
    """
    params = kernel_params(hypers)
    Z = hypers["inducing_inputs"]
    chol_mm = _chol_mm(data, kernel, params, Z)
    mean, var = svgp_conditional(data, kernel, params, Z, chol_mm, jnp.swapaxes(v, -1, -2), Xs)
    f = mean + jnp.sqrt(var) * eps
    return f @ hypers["mixing"].T


def svi_result(key, params: dict, data, kernel, num_draws: int) -> dict:
    """Optimised SVI parameters -> ``FitResult`` fields: point hyperparameters and
    ``num_draws`` draws of v from q(v), shaped (S, M, L) (predictive kind ``"inducing"``).
    The normals of inducing input j come from ``fold_in(key, j)``, so its draws do not
    depend on how many inducing inputs follow it (padded ones, ``ppgpc.runtime.padding``)."""
    hypers = {k: params[k] for k in ("kernel_variance", "kernel_lengthscale",
                                     "inducing_inputs")}
    hypers["mixing"] = mixing_matrix(data, params)
    m, R = params["q_mean"], params["q_scale_tril"]                         # (L, M), (L, M, M)
    L, M = m.shape
    e = jax.vmap(lambda j: jax.random.normal(jax.random.fold_in(key, j), (num_draws, L)),
                 out_axes=-1)(jnp.arange(M))                               # (S, L, M)
    v = m[None] + jnp.einsum("lij,slj->sli", R, e)
    return dict(hypers=hypers, inducing=jnp.swapaxes(v, -1, -2), predictive_kind="inducing")


# ----------------------------------------------------------- priors on the hyperparameters


def includes_hyper_prior(data) -> bool:
    """Whether the objective adds the kernel's log prior (``prepare(kernel_prior=True)``):
    SVI then fits type-II MAP kernel hyperparameters rather than type-II ML."""
    return bool(data.kernel_prior)


def own_inducing_values(data, kernel, hypers: dict, v):
    """Each latent's own values u_c = f_c(Z_c) = L_mm,c v_c at its own inducing inputs
    (``inducing_values``) when every latent has its own set (``shared_inducing=False``,
    inducing inputs (L, M, D)), where the mixed latent W f(Z) is not defined; None with one
    shared set (M, D), whose latent at Z is the fit's ordinary predictive there."""
    if jnp.ndim(hypers["inducing_inputs"]) != 3:
        return None
    return inducing_values(data, kernel, hypers, v)


def model(data: SVGPData, kernel, batch_size: int | None = None) -> None:
    """The SVGP classifier's generative model (module docstring); minibatch of size B.

    Under ``data.ell_estimator == "marginal"`` the likelihood term draws f from q's
    marginals (local reparameterisation), so the model reads the variational parameters
    ``q_mean`` and ``q_scale_tril``; the prior site ``v`` then only carries the KL.

    Args:
        data: ``SVGPData``.
        kernel: the kernel object.
        batch_size: B <= N, or None for the full batch.
    """
    N = data.X.shape[0]
    L, M = data.num_latent, data.num_inducing
    B = _resolve_batch(batch_size, N)
    if B is None and batch_size is not None and data.mask is not None:
        raise ValueError("padded data take batch_size None for a full batch")
    params, Z = _params_sites(data, kernel)
    W = numpyro.param("mixing", jnp.eye(L)) if data.learn_mixing else jnp.eye(L)
    if data.kernel_prior:  # outside the data plate: not scaled by N / B
        numpyro.factor("kernel_log_prior", kernel_log_prior(kernel, data.X.shape[1],
                                                            prior_params(data, params, W)))
    chol_mm = _chol_mm(data, kernel, params, Z)
    with numpyro.plate("latent", L, dim=-1):
        v = numpyro.sample("v", WhitenedPrior(L, M))                         # (L, M)
    if data.ell_estimator == "joint":
        with numpyro.plate("data", N, subsample_size=B, dim=-1) as idx:
            mean, var = svgp_conditional(data, kernel, params, Z, chol_mm, v, data.X[idx])
            f = numpyro.sample("f", dist.Normal(mean, jnp.sqrt(var)).to_event(1))
            _observe(data, f @ W.T, idx)                                     # (B, L)
        return
    key = numpyro.prng_key()
    if key is None:
        raise RuntimeError("the marginal ELBO estimator draws f inside the model; run "
                           "the model under numpyro.handlers.seed (SVI does)")
    k_batch, k_eps = jax.random.split(key)
    idx, scale = minibatch_rows(k_batch, data, B)
    q_mean, q_tril = _variational_sites(L, M)
    S = data.likelihood_samples
    eps = row_normals(k_eps, idx, (S, L))                                    # (S, B, L)
    if data.placement.mesh is not None:  # the batch's sum on the devices (on_devices)
        total = batch_log_likelihood_sum(data, kernel, params, Z, chol_mm, q_mean, q_tril,
                                         W, idx, eps)
        numpyro.factor("y_batch", scale / S * total)
        return
    a, resid = _projection(data, kernel, params, Z, chol_mm, data.X[idx])
    mean, var = marginal_moments(a, resid, q_mean, q_tril)
    price = data.ell_estimator == "price"
    sd = jax.lax.stop_gradient(jnp.sqrt(var)) if price else jnp.sqrt(var)
    f = mean + sd * eps                                                      # (S, B, L)
    weights = data.mask if B is None else None
    with numpyro.plate("data", idx.shape[0], dim=-1), real_rows_only(weights), \
            numpyro.plate("likelihood_samples", S, dim=-2), \
            numpyro.handlers.scale(scale=scale / S):
        _observe(data, f @ W.T, idx)
        if price:
            numpyro.factor("price_variance_gradient", _price_variance_term(data, f, W, var))


def guide(data: SVGPData, kernel, batch_size: int | None = None,
          init_scale: float = 1.0) -> None:
    """q(v) = prod_c N(m_c, R_c R_c^T), and (joint estimator) q(f | v) = p(f | v) on the
    same minibatch.

    ``init_scale`` sets R_c = init_scale I at the start (1: the prior).
    """
    N = data.X.shape[0]
    L, M = data.num_latent, data.num_inducing
    q_mean, q_tril = _variational_sites(L, M, init_scale)
    with numpyro.plate("latent", L, dim=-1):
        v = numpyro.sample("v", dist.MultivariateNormal(q_mean, scale_tril=q_tril))
    if data.ell_estimator == "joint":
        B = _resolve_batch(batch_size, N)
        params, Z = _params_sites(data, kernel)
        chol_mm = _chol_mm(data, kernel, params, Z)
        with numpyro.plate("data", N, subsample_size=B, dim=-1) as idx:
            mean, var = svgp_conditional(data, kernel, params, Z, chol_mm, v, data.X[idx])
            numpyro.sample("f", dist.Normal(mean, jnp.sqrt(var)).to_event(1))

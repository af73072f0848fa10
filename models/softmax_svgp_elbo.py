"""The pieces of the sparse variational GP classifier's ELBO estimator and its held-out
scoring (docs/math.md section 4), apart from the model (``ppgpc.models.softmax_svgp``, which
re-exports the public ones).

* ``WhitenedPrior``: N(0, I_M) per latent, with its KL from q(v) = N(m, R R^T) registered
  in closed form, KL = 1/2 (|m|^2 + |R|_F^2 - M - 2 sum log|diag R|);
* the SVGP conditional p(f(Xs) | v) = N(a^T v, k** - |a|^2), a = L_mm^-1 k_m*
  (``svgp_conditional``), and q's marginals at a batch, N(a^T m, k** - |a|^2 + |R^T a|^2)
  (``marginal_moments``), with per-latent kernels or inducing inputs mapped one latent at a
  time (``_per_latent``);
* the curvature of the log-likelihood in f for Price's-theorem gradients
  (``log_likelihood_curvature``);
* ``batch_log_likelihood_sum``: the marginal estimator's sum over a minibatch, in blocks of
  the batch on the devices of ``SVGPData.placement`` (each device its share, one ``psum``);
* ``validation_log_predictive``: log p(y_i | x_i) of held-out labels under q, for the SVI
  driver's validation monitor;
* the ``numpyro.param`` sites of q(v), the prior's view of the mixed amplitudes
  (``mixed_amplitudes``, ``prior_params``), the fitted q's draws (``svi_result``,
  ``inducing_values``) and its predictive draws at new inputs (``inducing_latent``).

The expected log-likelihood E_q[log p(y_i | W f_i)] of the ELBO is a Monte Carlo estimate
with reparameterisation, in one of three forms (``SVGPData.ell_estimator``):

* ``"marginal"`` (default; local reparameterisation, as GPyTorch and Pyro's SVGP do): S draws
  per point of f_ic from its marginal under q,
  q(f_ic) = N(a_i^T m_c, k_ii - |a_i|^2 + |R_c^T a_i|^2), independent across points, latents
  and draws (``likelihood_samples`` = S, default 10), averaged. The expectation is the same
  as the joint form's, since each point's term only depends on its own marginal; the
  variance is much lower, because the points of a minibatch no longer share one draw of v.
  This costs an extra O(L M^2 B) per step for |R_c^T a_i|^2.
* ``"price"``: the marginal draws, with the gradient with respect to each marginal variance
  taken from Price's theorem instead of the reparameterisation,
  d/d s2_ic E[log p(y_i | f_i)] = 1/2 E[d^2 log p(y_i | f_i) / d f_ic^2],
  estimated on the same draws (the gradient with respect to the marginal means is the
  reparameterisation one, which is Bonnet's theorem). The ELBO value is the marginal
  estimator's. For the softmax and inverse-ILR links the second derivative is
  -(G^T (diag p - p p^T) G)_cc <= 0, with G the linear map from f to the logits (W, or V W)
  and p the class probabilities, so the estimated gradient of every variance has the right
  sign on every draw. That is what natural-gradient steps on q(v) need: the new precision
  (1 - gamma) P + gamma (I - 2 d ELL / d S) stays positive definite
  (``ppgpc.infer.natgrad``). With the reparameterisation gradient instead, natural steps
  of 0.1 on letter (per-latent Uncollapsed-ILR, N / B = 60) diverged within 300 steps (the
  ELBO estimate fell from -3e4 to -1e10); with this one the same run was stable.
* ``"joint"``: one draw of v = m + R e shared by the minibatch, then
  f_i = a_i^T v + sqrt(k_ii - |a_i|^2) e_i.

The functions read a prepared ``SVGPData`` only through its attributes (``link``,
``shared_kernel``, ``shared_inducing``, ``kmm_jitter``, ``noise_var``), so this module does
not import the model.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.kl import kl_divergence

from ppgpc import linalg, simplex
from ppgpc.blocks import Placement, layout, replicate, sum_blocks
from ppgpc.kernels import gram, gram_diag, kernel_params
from ppgpc.sparse import inducing_cholesky, map_outputs

__all__ = [
    "LOG_LINKS",
    "WhitenedPrior",
    "svgp_conditional",
    "marginal_moments",
    "log_likelihood_curvature",
    "validation_log_predictive",
    "VALIDATION_CHUNK",
    "mixed_amplitudes",
    "prior_params",
    "inducing_values",
    "svi_result",
    "mixing_matrix",
    "includes_hyper_prior",
    "own_inducing_values",
    "log_likelihood",
    "batch_log_likelihood_sum",
    "on_devices",
    "inducing_latent",
]

_MIN_VAR = 1e-10
"""Floor on the conditional variance k_ii - |a_i|^2 (exactly 0 at an inducing input)."""


def _log_link_softmax(f: jax.Array) -> jax.Array:
    """log softmax(f): (..., C) -> (..., C)."""
    return jax.nn.log_softmax(f, axis=-1)


def _log_link_ilr(f: jax.Array) -> jax.Array:
    """log softmax(V f) (inverse ILR): (..., C-1) -> (..., C)."""
    return simplex.ilr_log_inverse(f)


LOG_LINKS = {"softmax": _log_link_softmax, "ilr": _log_link_ilr}


# ---------------------------------------------------------------- the whitened prior
class WhitenedPrior(dist.MultivariateNormal):
    """N(0, I_M) for each of ``num_latent`` whitened inducing vectors: batch (L,), event (M,).

    A distinct type only so that its KL from a ``MultivariateNormal`` q can be registered in
    closed form at O(L M^2) (NumPyro's generic MVN-MVN KL solves with the prior's factor,
    O(L M^3)).
    """

    def __init__(self, num_latent: int, num_inducing: int):
        eye = jnp.broadcast_to(jnp.eye(num_inducing), (num_latent, num_inducing, num_inducing))
        super().__init__(jnp.zeros((num_latent, num_inducing)), scale_tril=eye)


@kl_divergence.register(dist.MultivariateNormal, WhitenedPrior)
def _kl_whitened(p, q):
    """KL(N(m, R R^T) || N(0, I)) = 1/2 (|m|^2 + |R|_F^2 - M - 2 sum log |diag R|), (L,)."""
    M = p.loc.shape[-1]
    R = jnp.broadcast_to(p.scale_tril, p.batch_shape + (M, M))
    m = jnp.broadcast_to(p.loc, p.batch_shape + (M,))
    log_diag = jnp.log(jnp.abs(jnp.diagonal(R, axis1=-2, axis2=-1)))
    return 0.5 * (jnp.sum(m * m, -1) + jnp.sum(R * R, (-2, -1)) - M) - jnp.sum(log_diag, -1)


# ----------------------------------------------------------------- SVGP conditional
def _latent_axes(data) -> tuple[int | None, int | None]:
    """``vmap`` axes over latents of the kernel parameters and the inducing inputs (None:
    shared by the latents)."""
    return (None if data.shared_kernel else 0), (None if data.shared_inducing else 0)


def _per_latent(data, fn, *more_axes):
    """``fn(params, Z, *more)`` as it is when kernel and inducing inputs are shared, else
    mapped over the latents one at a time (outputs gain a leading L axis).

    The map is ``ppgpc.sparse.map_outputs`` (a ``lax.map`` loop), not ``vmap``: under
    ``vmap`` the Cholesky factors and triangular solves become batched LAPACK calls, which
    jaxlib 0.10 spreads over XLA's CPU thread pool from inside a pool thread; two of them
    running at once (as in the ELBO's gradient) can each wait for work queued behind the
    other, and the step never ends. Seen on 2 cores at letter's size (L = 25, M = 200,
    B = 512) in four of four unpinned runs while the other core was busy (gdb: both pool
    threads in ``lapack_dtrsm_ffi``, waiting in ``ParallelBatchMap``); with the loop, two of
    two such runs finished. One latent at a time makes unbatched calls and is no slower
    (``docs/benchmarks.md``; ``benchmarks/svgp_step_profile.py`` times the parts).
    """
    kernel_axis, inducing_axis = _latent_axes(data)
    if kernel_axis is None and inducing_axis is None:
        return fn
    return map_outputs(fn, (kernel_axis, inducing_axis) + more_axes)


def _chol_mm(data, kernel, params, Z):
    """Cholesky factor of K_mm + jitter: (M, M), or (L, M, M) per latent (padded inducing
    inputs, ``data.inducing_mask``, an identity block)."""
    return _per_latent(data, lambda p, z: inducing_cholesky(kernel, p, z, data.kmm_jitter,
                                                            data.inducing_mask)
                       .factor)(params, Z)


def _projection_one(kernel, params, Z, chol_mm, Xs, inducing_mask=None):
    K = gram(kernel, params, Z, Xs)
    if inducing_mask is not None:  # padded inducing inputs see nothing
        K = K * inducing_mask[:, None]
    a = linalg.tri_solve(chol_mm, K)
    resid = gram_diag(kernel, params, Xs) - jnp.sum(a * a, axis=0)
    return a, jnp.maximum(resid, _MIN_VAR)


def _projection(data, kernel, params, Z, chol_mm, Xs):
    """a = L_mm^-1 K_m* and the residual variance k** - |a|^2, floored: (M, n) and (n,)
    when kernel and inducing inputs are shared, else (L, M, n) and (L, n)."""
    return _per_latent(data, lambda p, z, c: _projection_one(kernel, p, z, c, Xs,
                                                             data.inducing_mask), 0)(
        params, Z, chol_mm)


def svgp_conditional(data, kernel, params, Z, chol_mm, v, Xs):
    """p(f(Xs) | v) for whitened inducing values (docs/math.md section 4).

    Args:
        data: ``SVGPData`` (whether kernel and inducing inputs are shared by the latents).
        Z: (M, D) or (L, M, D) inducing inputs; chol_mm: (M, M) or (L, M, M) Cholesky
            factors of K_mm; v: (..., L, M) whitened inducing values; Xs: (n, D).

    Returns:
        mean (..., n, L) = a_c^T v_c per latent, and variance k** - |a_c|^2 (floored at
        1e-10), shaped (n, 1) when the latents share kernel and inducing inputs, else (n, L).
    """
    a, resid = _projection(data, kernel, params, Z, chol_mm, Xs)
    if a.ndim == 2:
        return jnp.einsum("mn,...lm->...nl", a, v), resid[:, None]
    return jnp.einsum("lmn,...lm->...nl", a, v), resid.T


def marginal_moments(a, resid, q_mean, q_tril):
    """The marginals of q(f_i) = int p(f_i | v) q(v) dv at a batch of inputs.

    Args:
        a: (M, B) L_mm^-1 K_mb, or (L, M, B) per latent; resid: (B,) k_ii - |a_i|^2, or
            (L, B); q_mean: (L, M) m_c; q_tril: (L, M, M) R_c.

    Returns:
        mean (B, L) = a_ci^T m_c and variance (B, L) = resid_ci + |R_c^T a_ci|^2.
    """
    if a.ndim == 2:
        proj = jnp.einsum("lmk,mb->lkb", q_tril, a)                         # R_c^T a_i
        return a.T @ q_mean.T, resid[:, None] + jnp.sum(proj * proj, axis=1).T
    proj = jnp.einsum("lmk,lmb->lkb", q_tril, a)
    mean = jnp.einsum("lmb,lm->bl", a, q_mean)
    return mean, resid.T + jnp.sum(proj * proj, axis=1).T


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
    ``data.placement`` (``ppgpc.blocks.sum_blocks`` over blocks of the batch):

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
    replicated on the mesh (``ppgpc.blocks.replicate``).

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


# ------------------------------------------------------------------ held-out scoring
VALIDATION_CHUNK = 1024
"""Held-out points scored at once by ``validation_log_predictive`` (bounds its memory to
O(L M chunk) for the projections and O(S chunk C) for the draws)."""


def mixing_matrix(data, params: dict):
    """The fitted mixing matrix W (L, L): the ``mixing`` parameter, or the identity when the
    model holds it there (``prepare(learn_mixing=False)``)."""
    return params["mixing"] if data.learn_mixing else jnp.eye(data.num_latent)


def _chunk_log_predictive(key, params: dict, data, kernel, Xs, ys, num_draws: int):
    """log p(y_i | x_i) for one chunk (n,) (``validation_log_predictive``)."""
    kp = kernel_params(params)
    Z = params["inducing_inputs"]
    a, resid = _projection(data, kernel, kp, Z, _chol_mm(data, kernel, kp, Z), Xs)
    mean, var = marginal_moments(a, resid, params["q_mean"], params["q_scale_tril"])
    f = mean + jnp.sqrt(var) * jax.random.normal(key, (num_draws,) + mean.shape)
    log_p = LOG_LINKS[data.link](f @ mixing_matrix(data, params).T)                                   # (S, n, C)
    log_p_y = jnp.take_along_axis(log_p, ys[None, :, None], axis=-1)[..., 0]  # (S, n)
    return jax.scipy.special.logsumexp(log_p_y, axis=0) - jnp.log(num_draws)


_chunk_log_predictive_jit = jax.jit(_chunk_log_predictive, static_argnums=(3, 6))


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
    depend on how many inducing inputs follow it (padded ones, ``ppgpc.padding``)."""
    hypers = {k: params[k] for k in ("kernel_variance", "kernel_lengthscale",
                                     "inducing_inputs")}
    hypers["mixing"] = mixing_matrix(data, params)
    m, R = params["q_mean"], params["q_scale_tril"]                         # (L, M), (L, M, M)
    L, M = m.shape
    e = jax.vmap(lambda j: jax.random.normal(jax.random.fold_in(key, j), (num_draws, L)),
                 out_axes=-1)(jnp.arange(M))                               # (S, L, M)
    v = m[None] + jnp.einsum("lij,slj->sli", R, e)
    return dict(hypers=hypers, inducing=jnp.swapaxes(v, -1, -2), predictive_kind="inducing")


# ------------------------------------------------------ full (non-sparse) latent model


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

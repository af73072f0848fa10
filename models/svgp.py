"""Sparse variational GP classifier (Hensman et al. 2015; docs/math.md section 4), with a softmax
link (SVGPC, C latents) or the inverse ILR link (Uncollapsed-ILR, C-1 latents; docs/math.md
section 1 "Uncollapsed sparse" and the ILR paper's section 3.3).

Model, for N points, C classes, L latent functions (L = C for ``link="softmax"``, C - 1 for
``link="ilr"``), M inducing inputs Zm and an L x L mixing matrix W:

    v_c ~ N(0, I_M),   u_c = f_c(Zm) = L_mm v_c          (whitened inducing values, c = 1..L)
    f_c(x_i) | v_c ~ N(a_i^T v_c, k_ii - a_i^T a_i),     a_i = L_mm^-1 k_mi
    y_i | f_i ~ Categorical(link(W f_i))                 softmax(W f) or softmax(V W f)

Variational family: q(v_c) = N(m_c, S_c), S_c = R_c R_c^T with a full lower-triangular R_c
(``q_mean`` (L, M), ``q_scale_tril`` (L, M, M)), and q(f | v) = p(f | v), so that

    ELBO = (N / B) sum_{i in batch} E_q[log p(y_i | W f_i)] - sum_c KL(q(v_c) || N(0, I)).

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
  (``ppgpc.infer.natgrad``).
* ``"joint"``: one draw of v = m + R e shared by the minibatch, then
  f_i = a_i^T v + sqrt(k_ii - |a_i|^2) e_i.

The KL is analytic (``WhitenedPrior``). A minibatch of B of the N points is drawn without
replacement (``minibatch_rows``: the B smallest of per-point uniforms u_i from
``fold_in(key, i)``) and its likelihood scaled by N / B; the normals of point i come from
``fold_in(key, i)`` as well (``row_normals``), so a point's terms do not depend on how many
rows the data has. (The joint estimator draws its minibatch with
``numpyro.plate("data", N, subsample_size=B)``, whose indices the guide shares.)

Padded data (``pad``, ``ppgpc.runtime.padding``; the marginal and Price estimators): the padded
rows have likelihood weight zero in full batches and are never drawn into a minibatch, N is
the number of real rows; where the inducing inputs are the training inputs (M = N, the
default below 200 points) they are padded too, each padded one an identity block of K_mm
that no input sees, so its q(v) stays the prior N(0, 1) with KL zero.
Kernel hyperparameters, inducing inputs and W are ``numpyro.param`` sites (point
estimates maximising the ELBO); inducing inputs start at k-means++ centres. With
``prepare(kernel_prior=True)`` the model also adds the kernel's log prior log p(theta)
(factor site ``kernel_log_prior``, outside the data plate, so not scaled by N / B), and SVI
then maximises ELBO + log p(theta): type-II MAP of the kernel hyperparameters instead of
type-II ML. W can carry the latents' scale (W f has the same law under (W diag(s),
var / s^2) for any s > 0), so a prior on var alone does not bound it;
``prepare(variance_prior_on="mixed")`` puts the variance prior on the amplitude each latent
has in W f, var_l |W[:, l]|^2 (``mixed_amplitudes``), which is invariant along that ridge.

Per-latent kernels and inducing inputs (``prepare(shared_kernel=False,
shared_inducing=False)``): each latent f_c gets its own kernel hyperparameters and its own
inducing inputs Zm_c, so u_c = f_c(Zm_c), L_mm,c and a_ci = L_mm,c^-1 k_c(Zm_c, x_i) are per
latent, and everything above holds with a_i replaced by a_ci: GPyTorch's batch-shaped
multitask SVGP, which the ILR paper's SVGPC and Uncollapsed-ILR baselines were built on
(L M inducing inputs in all, L Cholesky factors of M x M per step). The two options are
independent.

NumPyro sites: params ``kernel_variance`` () or (L,), ``kernel_lengthscale`` (D,) or () (with
a leading L axis under ``shared_kernel=False``), ``inducing_inputs`` (M, D) or (L, M, D),
``mixing`` (L, L) in the model and ``q_mean`` (L, M), ``q_scale_tril`` (L, M, M) in the
guide (the model reads them too under the marginal estimator, as Pyro's
``VariationalSparseGP`` does); latent ``v`` (L, M), ``f`` (B, L) (joint estimator only);
observed ``y`` (B,), or (S, B) under the marginal estimator with the likelihood scaled by 1/S;
on several devices (``on_devices``, the driver's ``devices``) the marginal estimator's sum
over the batch is taken device by device and enters as the factor ``y_batch`` instead.
Fit with driver method ``"svi"`` (``ppgpc.infer.svi``).
Predictions use the driver's ``"inducing"`` predictive kind: draws of v and the SVGP
conditional at new inputs (``inducing_latent``).

For small N, ``latent_model``/``latent_conditional`` give the full (non-sparse) GP with the
same link and W = I, whitened (f_c = chol(K) w_c), for ``method="nuts", form="latent"``: the
exact posterior to compare the variational one with.

The link ``"gaussian"`` (``prepare_regression``) replaces the categorical likelihood by
Y_i ~ N(W f_i, sigma^2 I); it exists so that the bound can be checked against Titsias's
collapsed bound (``ppgpc.gp.sparse``), which it equals at the optimal q(v) when W = I.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.kl import kl_divergence

from ppgpc.gp import exact, linalg, simplex
from ppgpc.gp.inducing import initial_inducing_inputs, resolve_num_inducing
from ppgpc.gp.kernels import gram, gram_diag, kernel_log_prior, kernel_params, sample_kernel_params
from ppgpc.gp.sparse import DEFAULT_KMM_JITTER, inducing_cholesky, map_outputs
from ppgpc.models.spec import SVI, Inducing, Latent, ModelSpec, record_jitter
from ppgpc.runtime.blocks import Placement, layout, replicate, sum_blocks
from ppgpc.runtime.padding import mask_gram, pad_rows, real_rows_only, row_mask
from ppgpc.validation import check_positive

__all__ = [
    "LINKS",
    "ELL_ESTIMATORS",
    "VARIANCE_PRIOR_ON",
    "DEFAULT_LIKELIHOOD_SAMPLES",
    "SVGPData",
    "prepare",
    "pad",
    "num_points",
    "minibatch_rows",
    "row_normals",
    "prepare_regression",
    "num_latent",
    "log_link",
    "initial_hypers",
    "model",
    "guide",
    "latent_model",
    "latent_conditional",
    "SPEC",
    "svgp_spec",
    "inducing_latent",
    "on_devices",
    "inducing_values",
    "svi_result",
    "mixed_amplitudes",
    "prior_params",
    "WhitenedPrior",
    "svgp_conditional",
    "marginal_moments",
    "log_likelihood_curvature",
    "validation_log_predictive",
    "LOG_LINKS",
    "VALIDATION_CHUNK",
    "mixing_matrix",
    "includes_hyper_prior",
    "own_inducing_values",
    "log_likelihood",
    "batch_log_likelihood_sum",
]

LINKS = ("softmax", "ilr")
"""Classification links: softmax over C latents (SVGPC) or the inverse ILR over C-1."""

ELL_ESTIMATORS = ("marginal", "price", "joint")
"""Monte Carlo forms of the expected log-likelihood (module docstring)."""

VARIANCE_PRIOR_ON = ("kernel", "mixed")
"""Where the kernel prior's variance term applies (``prepare(variance_prior_on=)``)."""

DEFAULT_LIKELIHOOD_SAMPLES = 10
"""Draws per point of the marginal estimator (GPyTorch's ``num_likelihood_samples``)."""

# ---------------------------------------------------------------- the ELBO's pieces
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

    The map is ``ppgpc.gp.sparse.map_outputs`` (a ``lax.map`` loop), not ``vmap``: one
    latent at a time the Cholesky factors and triangular solves are unbatched LAPACK calls,
    which cannot wait on each other in XLA's CPU thread pool as batched ones can
    (docs/records/speed.md, "One latent at a time").
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


# ---------------------------------------------------------------- the data and the model
@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["X", "y", "inducing_init", "targets", "kmm_jitter",
                                "noise_var", "mask", "inducing_mask"],
                   meta_fields=["num_classes", "link", "ell_estimator",
                                "likelihood_samples", "shared_kernel", "shared_inducing",
                                "kernel_prior", "variance_prior_on", "initial_variance",
                                "initial_lengthscale", "learn_mixing", "placement"])
@dataclasses.dataclass(frozen=True)
class SVGPData:
    """Prepared training data of the SVGP classifier (a pytree: arrays are leaves, the
    link and sizes are static metadata, so the data passes through ``jax.jit``)."""

    X: jax.Array
    """(N, D) inputs."""
    y: jax.Array
    """(N,) integer labels in 0..C-1 (zeros for the Gaussian link)."""
    num_classes: int
    """C."""
    link: str
    """``"softmax"``, ``"ilr"`` or ``"gaussian"``."""
    inducing_init: jax.Array
    """(M, D) starting inducing inputs, or (L, M, D) with ``shared_inducing=False``."""
    kmm_jitter: float
    """Relative jitter on K_mm (times the kernel variance)."""
    targets: Optional[jax.Array] = None
    """(N, L) regression targets (Gaussian link only)."""
    noise_var: float = 0.0
    """sigma^2 (Gaussian link only)."""
    ell_estimator: str = "marginal"
    """``"marginal"`` (local reparameterisation), ``"price"`` (the same draws, Price's
    theorem for the variance gradients) or ``"joint"`` (module docstring)."""
    likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES
    """S, draws per point of the marginal estimator."""
    shared_kernel: bool = True
    """One set of kernel hyperparameters for all latents, or one per latent."""
    shared_inducing: bool = True
    """One set of inducing inputs for all latents, or one per latent."""
    kernel_prior: bool = False
    """Add the kernel's log prior to the objective: type-II MAP of the kernel
    hyperparameters instead of type-II ML (``model``)."""
    variance_prior_on: str = "kernel"
    """With ``kernel_prior``: the variance prior is on each latent's kernel variance
    (``"kernel"``) or on its amplitude after mixing, var_l |W[:, l]|^2 (``"mixed"``;
    ``mixed_amplitudes``)."""
    initial_variance: float = 1.0
    """Starting kernel variance of SVI."""
    initial_lengthscale: Optional[float] = None
    """Starting lengthscale(s) of SVI; None: sqrt(D) (``kernel.initial_params``)."""
    learn_mixing: bool = True
    """Learn the mixing matrix W (a ``numpyro.param``), or hold W = I: the independent-
    latent classifier that ``latent_model`` (NUTS) samples exactly."""
    placement: Placement = Placement()
    """Where the minibatch's sum runs (static): one device, or split over the devices of a
    mesh (``on_devices``, the driver's ``devices``)."""
    mask: Optional[jax.Array] = None
    """(N,) row mask of data padded by ``pad`` (1 real, 0 padded); None when unpadded."""
    inducing_mask: Optional[jax.Array] = None
    """(M,) mask of the inducing inputs padded by ``pad`` (1 real, 0 padded); None when
    they are not padded."""

    @property
    def num_inducing(self) -> int:
        """M."""
        return int(self.inducing_init.shape[-2])

    @property
    def num_latent(self) -> int:
        """L."""
        if self.link == "gaussian":
            return int(self.targets.shape[1])
        return _num_latent(self.link, self.num_classes)


def _num_latent(link: str, num_classes: int) -> int:
    return num_classes if link == "softmax" else num_classes - 1


def _check_link(link) -> str:
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; choose from {list(LINKS)}")
    return link


def _check_ell(ell_estimator, likelihood_samples) -> tuple[str, int]:
    if ell_estimator not in ELL_ESTIMATORS:
        raise ValueError(f"unknown ell_estimator {ell_estimator!r}; choose from "
                         f"{list(ELL_ESTIMATORS)}")
    if (isinstance(likelihood_samples, bool) or int(likelihood_samples) != likelihood_samples
            or likelihood_samples < 1):
        raise ValueError("likelihood_samples must be a positive integer, got "
                         f"{likelihood_samples!r}")
    return ell_estimator, int(likelihood_samples)


def prepare(X, y, num_classes: int, *, link: str = "softmax", num_inducing: int | None = None,
            seed: int = 0, kmm_jitter: float = DEFAULT_KMM_JITTER,
            ell_estimator: str = "marginal",
            likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES,
            shared_kernel: bool = True, shared_inducing: bool = True,
            kernel_prior: bool = False, variance_prior_on: str = "kernel",
            initial_variance: float = 1.0,
            initial_lengthscale: float | None = None,
            learn_mixing: bool = True) -> SVGPData:
    """Data, link and k-means++ inducing inputs.

    Args:
        X: (N, D) inputs; y: (N,) integer labels in 0..num_classes-1.
        link: ``"softmax"`` (L = C) or ``"ilr"`` (L = C - 1).
        num_inducing: M <= N, None: min(200, N) (``ppgpc.gp.inducing.resolve_num_inducing``);
            inducing inputs start at k-means++ centres refined by Lloyd steps.
        seed: seed of the k-means++ initialisation.
        kmm_jitter: relative jitter added to K_mm.
        ell_estimator: ``"marginal"`` (default), ``"price"`` or ``"joint"`` Monte Carlo form
            of the expected log-likelihood and its gradient (module docstring).
        likelihood_samples: S, draws per point of the marginal estimator.
        shared_kernel: one kernel (variance, lengthscales) for all L latents (default), or
            one per latent (sites ``kernel_variance`` (L,), ``kernel_lengthscale`` (L, D)).
        shared_inducing: one set of M inducing inputs for all latents (default), or one per
            latent (site ``inducing_inputs`` (L, M, D), every latent starting from the same
            k-means++ centres). ``shared_kernel=False, shared_inducing=False`` is GPyTorch's
            batch-shaped multitask SVGP (module docstring, "Per-latent kernels and inducing
            inputs").
        kernel_prior: add the kernel's log prior (``kernel.priors``, one per latent with
            ``shared_kernel=False``) to the objective, so that SVI finds the type-II MAP
            kernel hyperparameters instead of the type-II ML ones (``model``).
        variance_prior_on: where the kernel prior's variance term applies: ``"kernel"``
            (default) on each latent's kernel variance var_l, or ``"mixed"`` on its
            amplitude in the mixed latent W f, var_l |W[:, l]|^2 (``mixed_amplitudes``;
            why, in the module docstring). Needs ``kernel_prior=True``.
        initial_variance: the kernel variance SVI starts from (default 1).
        initial_lengthscale: the lengthscale SVI starts every input's (and every latent's)
            lengthscale from; None (default): sqrt(D), the median of the lengthscale prior
            (``kernel.initial_params``). GPyTorch starts from softplus(0) = 0.693 for both.
        learn_mixing: learn W (default), or hold W = I: the model ``latent_model`` (NUTS)
            samples, so that the two posteriors are of one model.
    """
    for name, flag in (("learn_mixing", learn_mixing), ("kernel_prior", kernel_prior)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    _check_link(link)
    if variance_prior_on not in VARIANCE_PRIOR_ON:
        raise ValueError(f"unknown variance_prior_on {variance_prior_on!r}; choose from "
                         f"{list(VARIANCE_PRIOR_ON)}")
    if variance_prior_on != "kernel" and not kernel_prior:
        raise ValueError(f"variance_prior_on={variance_prior_on!r} places the kernel prior's "
                         "variance term; it needs kernel_prior=True")
    initial_variance = check_positive("initial_variance", initial_variance)
    if initial_lengthscale is not None:
        initial_lengthscale = check_positive("initial_lengthscale", initial_lengthscale)
    ell_estimator, likelihood_samples = _check_ell(ell_estimator, likelihood_samples)
    if num_classes < 2:
        raise ValueError(f"a classifier needs at least 2 classes, got {num_classes}")
    X = np.asarray(X, dtype=np.float64)  # (host-side: eager ops would compile per N)
    M = resolve_num_inducing(num_inducing, X.shape[0])
    Z = initial_inducing_inputs(X, M, seed)
    if not shared_inducing:
        Z = jax.device_put(np.tile(np.asarray(Z)[None],
                                   (_num_latent(link, num_classes), 1, 1)))
    return SVGPData(X=jax.device_put(X), y=jax.device_put(np.asarray(y)),
                    num_classes=int(num_classes), link=link,
                    inducing_init=Z, kmm_jitter=float(kmm_jitter),
                    ell_estimator=ell_estimator, likelihood_samples=likelihood_samples,
                    shared_kernel=bool(shared_kernel), shared_inducing=bool(shared_inducing),
                    kernel_prior=kernel_prior, variance_prior_on=variance_prior_on,
                    initial_variance=initial_variance,
                    initial_lengthscale=initial_lengthscale,
                    learn_mixing=learn_mixing)


def prepare_regression(X, Y, noise_var: float, Z, kmm_jitter: float = 0.0,
                       ell_estimator: str = "marginal",
                       likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES,
                       shared_kernel: bool = True) -> SVGPData:
    """Data for the Gaussian link: targets Y (N, L), noise sigma^2, inducing inputs Z (M, D)
    shared by the latents, or (L, M, D) one set per latent; ``shared_kernel`` as for
    ``prepare``."""
    ell_estimator, likelihood_samples = _check_ell(ell_estimator, likelihood_samples)
    X, Y, Z = (jnp.asarray(a, dtype=jnp.float64) for a in (X, Y, Z))
    if Z.ndim == 3 and Z.shape[0] != Y.shape[1]:
        raise ValueError(f"per-latent inducing inputs Z {Z.shape} need one set per target "
                         f"column, L = {Y.shape[1]}")
    return SVGPData(X=X, y=jnp.zeros(X.shape[0], dtype=jnp.int32), num_classes=Y.shape[1],
                    link="gaussian", inducing_init=Z,
                    kmm_jitter=float(kmm_jitter), targets=Y, noise_var=float(noise_var),
                    ell_estimator=ell_estimator, likelihood_samples=likelihood_samples,
                    shared_kernel=bool(shared_kernel), shared_inducing=Z.ndim == 2)


def pad(data: SVGPData, size: int) -> SVGPData:
    """``data`` padded to ``size`` rows (module docstring, "Padded data"): inputs and labels
    zero on the padded rows and the row mask; the inducing inputs too when there is one per
    training point (M = N). Data of the joint estimator, the Gaussian link or on a mesh are
    returned as they are."""
    if (data.ell_estimator == "joint" or data.link == "gaussian"
            or data.placement.mesh is not None):
        return data
    if data.mask is not None:
        raise ValueError("pad takes data as prepared, not padded data")
    N = data.X.shape[0]
    changes = dict(X=pad_rows(data.X, size), y=pad_rows(data.y, size),
                   mask=row_mask(N, size))
    if data.num_inducing == N:
        changes.update(inducing_init=pad_rows(data.inducing_init, size, axis=-2),
                       inducing_mask=row_mask(N, size))
    return dataclasses.replace(data, **changes)


def num_points(data: SVGPData):
    """N, the real rows: an int, or a traced scalar for padded data."""
    return data.X.shape[0] if data.mask is None else jnp.sum(data.mask)


def minibatch_rows(key, data: SVGPData, batch_size: int | None):
    """The rows of a minibatch and the likelihood's scale N / B (module docstring): all
    rows (padded ones too, which ``data.mask`` weighs zero) with scale 1 for a full batch
    (``batch_size`` None); else B distinct real rows, the B smallest of u_i ~ U(0, 1) from
    ``fold_in(key, i)``, whatever rows follow the real ones."""
    N = data.X.shape[0]
    if batch_size is None:
        return jnp.arange(N), 1.0
    u = jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(key, i)))(jnp.arange(N))
    if data.mask is not None:
        u = jnp.where(data.mask > 0, u, 2.0)
    idx = jax.lax.top_k(-u, batch_size)[1]
    return idx, num_points(data) / batch_size


def row_normals(key, idx, shape: tuple):
    """Standard normals (*shape[:-1], B, shape[-1]) for the rows ``idx`` (B,): row i's from
    ``fold_in(key, i)``."""
    eps = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), shape))(idx)
    return jnp.moveaxis(eps, 0, -2)


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


# ------------------------------------------------------ full (non-sparse) latent model
def num_latent(num_classes: int, link: str = "softmax") -> int:
    """L: C latents for the softmax link, C - 1 for the inverse ILR."""
    return _num_latent(_check_link(link), num_classes)


def log_link(f: jax.Array, link: str = "softmax") -> jax.Array:
    """log p(y = c | f): log softmax(f) (link ``"softmax"``, (..., C) -> (..., C)) or
    log softmax(V f) (``"ilr"``, (..., C-1) -> (..., C))."""
    return LOG_LINKS[_check_link(link)](f)


def num_latent_softmax(num_classes: int) -> int:
    """L = C (softmax link)."""
    return num_classes


def num_latent_ilr(num_classes: int) -> int:
    """L = C - 1 (inverse ILR link)."""
    return num_classes - 1


def initial_hypers(data: SVGPData, kernel) -> dict:
    """Kernel variance 1, lengthscales at sqrt(D) (the full latent model's sites)."""
    start = kernel.initial_params(data.X.shape[1], variance=1.0)
    return {"kernel_" + k: v for k, v in start.items()}


def prior_factor(data: SVGPData, kernel, hypers: dict) -> linalg.Cholesky:
    """chol(K) (N, N) of the shared kernel with hyperparameters ``hypers`` at the training
    inputs (padded rows masked)."""
    return linalg.cholesky(mask_gram(gram(kernel, kernel_params(hypers), data.X), data.mask),
                           rows=data.mask)


def latent_model(data: SVGPData, kernel, fixed_hypers: dict | None = None,
                 factor: linalg.Cholesky | None = None) -> None:
    """The full GP classifier with the same link and W = I, whitened for NUTS:
    f_c = chol(K) w_c, w_c ~ N(0, I_N), y_i ~ Categorical(link(f_i)).

    Sites: ``kernel_*`` (unless fixed), ``f_white`` (L, N), deterministic ``f`` (N, L),
    ``y`` observed (N,), one label per point inside ``numpyro.plate("data", N)`` (one
    log-likelihood term per point for ``az.from_numpyro``; dims from
    ``ppgpc.infer.arviz_dims``). ``factor``: ``prior_factor(data, kernel, fixed_hypers)``,
    given to skip the factorisation.
    """
    N = data.X.shape[0]
    if factor is None:
        params = sample_kernel_params(kernel, data.X.shape[1], fixed=fixed_hypers)
        factor = linalg.cholesky(mask_gram(gram(kernel, params, data.X), data.mask),
                                 rows=data.mask)
    chol_K = factor
    record_jitter(chol_K)
    f = exact.whitened_latent(chol_K.factor, data.num_latent)
    with numpyro.plate("data", N, dim=-1), real_rows_only(data.mask):
        numpyro.sample("y", dist.Categorical(logits=LOG_LINKS[data.link](f)), obs=data.y)


def latent_conditional(data: SVGPData, kernel, hypers: dict, f, Xs):
    """f(Xs) | f(X) = f under the GP prior: mean (n, L), variance (n, L)."""
    return exact.latent_conditional(kernel, kernel_params(hypers), data.X, f, Xs, data.mask)


def _prepare_for_link(link: str, X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with its link fixed to ``link``: a ``link`` option that differs is refused
    with the model that has it."""
    given = options.pop("link", link)
    if given != link:
        raise ValueError(f"this model's link is {link!r}, got link={given!r}; use the "
                         f"{'ilr_gp_uncollapsed' if given == 'ilr' else 'softmax_svgp'} "
                         "model for that link" if given in LINKS else
                         f"unknown link {given!r}; choose from {list(LINKS)}")
    return prepare(X, y, num_classes, link=link, **options)


def _prepare_softmax(X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with ``link="softmax"`` (a module-level function, so that a fit holding
    the spec pickles)."""
    return _prepare_for_link("softmax", X, y, num_classes, **options)


def _prepare_ilr(X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with ``link="ilr"`` (a module-level function, so that a fit holding the
    spec pickles)."""
    return _prepare_for_link("ilr", X, y, num_classes, **options)


_PREPARE = {"softmax": _prepare_softmax, "ilr": _prepare_ilr}


def svgp_spec(name: str, link: str, num_latent, description: str) -> ModelSpec:
    """The spec of the sparse variational classifier with ``link`` (one of ``LINKS``).

    Args:
        name: the model name the driver knows it by.
        link: ``"softmax"`` or ``"ilr"``; fixes ``prepare``'s link and the ``log_link``.
        num_latent: ``C -> L`` for that link (C for softmax, C - 1 for ILR).
        description: one line for the model registry.
    """
    return ModelSpec(
        name=name, description=description, prepare=_PREPARE[link], pad=pad,
        num_latent=num_latent,
        log_link=LOG_LINKS[link], initial_hypers=initial_hypers,
        latent=Latent(latent_model=latent_model, latent_conditional=latent_conditional,
                      prior_factor=prior_factor),
        svi=SVI(model=model, guide=guide, result=svi_result,
                validation_log_predictive=validation_log_predictive,
                gaussian_variational_sites=(("q_mean", "q_scale_tril"),),
                includes_hyper_prior=includes_hyper_prior),
        inducing=Inducing(inducing_latent=inducing_latent, inducing_values=own_inducing_values),
        sparse_alternative='fit by SVI: inference="svi" (driver method "svi")',
        seeded_prepare=True, place=on_devices)


SPEC = svgp_spec("softmax_svgp", "softmax", num_latent_softmax,
                 "SVGPC: Hensman et al.'s sparse variational GP classifier, softmax link")

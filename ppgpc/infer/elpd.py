"""Leave-one-out ELPD as ArviZ ``ELPDData``, right for every model, for ``az.compare``.

The quantity is the expected log pointwise predictive density of the observed LABELS,

    elpd_loo = sum_i log p(y_i | y_-i),   p(y_i | y_-i) = E_{f_i | y_-i}[ p(y_i | f_i) ],

with p(y_i | f_i) the model's categorical likelihood (``spec.log_link``), so that every
classifier is scored on the same footing.

Two estimators:

* ``exact_loo`` (conjugate fits with point hyperparameters, ILR-GP and GPD, method
  ``exact`` or ``map``): with the hyperparameters held fixed, f_i | y_-i is Gaussian,
  N(m_-i, v_-i), in closed form from the one factorisation of the fit (Rasmussen and
  Williams section 5.4.2, ``ppgpc.infer.loo.loo_latent``). The expectation through the
  link is a Monte Carlo average over S standard-normal draws eps_s shared by the points,

      log p(y_i | y_-i) ~= logsumexp_s log p(y_i | m_-i + sqrt(v_-i) eps_s) - log S.

  ``p_loo = lppd - elpd_loo`` with lppd_i = log E[p(y_i | f_i)] under the full-data latent
  predictive N(m_i, v_i), estimated with the same draws.

* ``psis_loo`` (any fit with posterior draws (f^(s), theta^(s)) at the training inputs):
  Pareto-smoothed importance sampling (Vehtari, Gelman and Gabry 2017). The posterior
  without point i is p(f, theta | y_-i) proportional to p(f, theta | y) / l_i(f_i, theta),
  where l_i is the likelihood term of point i THAT THE POSTERIOR WAS CONDITIONED ON. For
  ILR-GP and GPD that is the Gaussian pseudo-likelihood of the transformed targets,
  l_i = N(t_i | f_i, noise_i(theta)) (``spec.conjugate.pseudo_log_lik``); for the other
  models it is the categorical likelihood itself. So the raw log ratios are
  r_i^(s) = -log l_i(f_i^(s)), smoothed by ``az.psislw`` into normalised log weights
  w_i^(s), and

      log p(y_i | y_-i) ~= logsumexp_s [ w_i^(s) + log p(y_i | f_i^(s)) ].

  ``az.loo`` on the export's ``log_likelihood`` (the categorical term) uses the
  categorical term as the ratio too, which is the wrong ratio for ILR-GP and GPD.

  A GPD fit with ``predict_from="noisy"`` predicts from the pseudo-observation f_i + e_i,
  e_i ~ N(0, s2_i) with s2_i the noise of the label the leave-one-out mean predicts (what
  ``exact_loo`` and a refit's ``predict_proba`` use). Its utility is then
  p(y_i | f_i^(s)) averaged over K standard-normal draws of e_i per posterior draw, with
  s2_i read from ``spec.latent.latent_conditional`` at the PSIS-weighted leave-one-out mean.

  Fits of a model with ``spec.psis_loo_refusal`` are refused with that reason: the
  collapsed sparse ones (``ilr_gp_sparse``, ``dirichlet_gp_sparse``), whose
  q(u) is conditioned on N(t_i | a_i^T u, noise_i), the pseudo-likelihood of the projection
  a_i^T u = K_im K_mm^-1 u, not of f_i, so ratios from draws of f_i (which carry the
  conditional variance k_ii - a_i^T a_i) weight the draws wrongly.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ppgpc.evaluation.arviz_objects import elpd_data, psislw, relative_ess
from ppgpc.infer.arviz_export import training_latent
from ppgpc.infer.loo import loo_latent
from ppgpc.infer.results import FitResult, stream_key
from ppgpc.runtime.programs import jit

if TYPE_CHECKING:
    from arviz import ELPDData

__all__ = ["exact_loo", "psis_loo", "EXACT_LOO_DRAWS", "NOISY_UTILITY_DRAWS"]

EXACT_LOO_DRAWS = 4096
"""Standard-normal draws S through the link of ``exact_loo``."""

_EXACT_LOO_TAG = 0x200  # the default key of exact_loo's draws: fold_in(PRNGKey(seed), tag)
_NOISY_UTILITY_TAG = 0x201  # psis_loo's draws of the pseudo-observation noise

NOISY_UTILITY_DRAWS = 64
"""Standard-normal draws K per posterior draw of the pseudo-observation noise in ``psis_loo``'s
utility for a fit that predicts from noisy pseudo-observations (GPD ``predict_from="noisy"``)."""


@functools.partial(jit, static_argnames=("spec",))
def _full_predictive(spec, kernel, data, hypers):
    """The full-data latent predictive at the training inputs: mean (N, L), var (N, L)."""
    posterior = spec.conjugate.condition(data, kernel, hypers)
    return spec.conjugate.predict(data, kernel, hypers, posterior, data.X)


@functools.partial(jit, static_argnames=("log_link", "num_draws"))
def _log_predictive(key, log_link, mean, var, y, num_draws):
    """(N,) log E[p(y_i | f_i)], f_i ~ N(mean_i, var_i), S draws shared by the points."""
    eps = jax.random.normal(key, (num_draws, 1, mean.shape[-1]), dtype=mean.dtype)
    logp = log_link(mean[None] + jnp.sqrt(var)[None] * eps)                   # (S, N, C)
    logp_y = jnp.take_along_axis(logp, y[None, :, None], axis=-1)[..., 0]     # (S, N)
    return logsumexp(logp_y, axis=0) - jnp.log(num_draws)


def exact_loo(result: FitResult, *, key=None, num_draws: int = EXACT_LOO_DRAWS) -> "ELPDData":
    """Closed-form leave-one-out ELPD of a conjugate fit with point hyperparameters.

    log p(y_i | y_-i) = log E[p(y_i | f_i)], f_i ~ N(m_-i, v_-i) the closed-form
    leave-one-out latent predictive (module docstring), by Monte Carlo through the link.

    Args:
        result: a ``FitResult`` of ``ilr_gp`` or ``dirichlet_gp`` (or a model with
            ``loo_predictive``) fitted with method ``exact`` or ``map``.
        key: PRNG key of the S shared standard-normal draws (default:
            ``fold_in(PRNGKey(result.seed), 0x200)``).
        num_draws: S.

    Returns:
        ``ELPDData`` (log scale) with ``elpd_loo``, ``se`` (sqrt(N var_i loo_i)), ``p_loo``
        (lppd - elpd_loo), ``n_samples`` (S), ``n_data_points``, ``warning`` (False: no
        importance sampling) and the pointwise ``loo_i`` [obs]: ``az.compare`` accepts it.

    Raises:
        ValueError: the fit is not a point-hyperparameter conjugate fit (``loo_latent``), or
            ``num_draws`` is not a positive integer.

    Example:
        >>> import numpy as np, arviz as az
        >>> from ppgpc.infer import fit, exact_loo
        >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
        >>> a = exact_loo(fit("ilr_gp", X, y, method="exact", num_draws=1))
        >>> b = exact_loo(fit("dirichlet_gp", X, y, method="exact", num_draws=1))
        >>> list(az.compare({"ilr": a, "gpd": b}).columns[:2])
        ['rank', 'elpd_loo']
    """
    if int(num_draws) != num_draws or num_draws < 1:
        raise ValueError(f"num_draws must be a positive integer; got {num_draws!r}")
    loo_mean, loo_var = loo_latent(result)
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    mean, var = _full_predictive(result.spec, result.kernel, result.data, hypers)
    key = stream_key(result.seed, _EXACT_LOO_TAG) if key is None else key
    y = jnp.asarray(result.data.y)
    log_link = result.spec.log_link
    loo_i = _log_predictive(key, log_link, loo_mean, loo_var, y, int(num_draws))
    lppd_i = _log_predictive(key, log_link, mean, var, y, int(num_draws))
    return elpd_data(loo_i, lppd_i, int(num_draws), warning=False)


@functools.partial(jit, static_argnames=("log_link", "pseudo_log_lik"))
def _log_terms(log_link, pseudo_log_lik, data, hypers, f, y):
    """(log ratios, categorical log-likelihood), each (chain, draw, N)."""
    logp = log_link(f)
    loglik = jnp.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
    if pseudo_log_lik is None:
        return -loglik, loglik
    per_draw = jax.vmap(jax.vmap(pseudo_log_lik, in_axes=(None, 0, 0)), in_axes=(None, 0, 0))
    return -per_draw(data, hypers, f), loglik


def _predicts_from_noise(result: FitResult) -> bool:
    """Whether the fit's predictive adds pseudo-observation noise (GPD ``predict_from``)."""
    return getattr(getattr(result.data, "options", None), "predict_from", "latent") == "noisy"


@functools.partial(jit, static_argnames=("log_link", "num_draws"))
def _noisy_log_utility(key, log_link, f, noise_sd, y, num_draws):
    """(S, N) log mean_k p(y_i | f_i^(s) + noise_sd_i eps_sk), K draws eps_sk per posterior
    draw, shared by the points."""
    eps = jax.random.normal(key, (num_draws, f.shape[0], 1, f.shape[-1]), dtype=f.dtype)

    def one(e):
        logp = log_link(f + noise_sd[None] * e)                            # (S, N, C)
        return jnp.take_along_axis(logp, y[None, :, None], axis=-1)[..., 0]

    return logsumexp(jax.lax.map(one, eps), axis=0) - jnp.log(num_draws)


def _check_scorable(result: FitResult) -> bool:
    """Whether the fit predicts from noisy pseudo-observations, after refusing those
    ``psis_loo`` cannot score: ``spec.psis_loo_refusal``, noisy ones with sampled hypers."""
    if result.spec.psis_loo_refusal is not None:
        raise ValueError(
            f"psis_loo cannot score {result.spec.psis_loo_refusal} (model "
            f"{result.spec.name!r}); score the dense model (exact_loo or psis_loo) or use "
            "held-out data")
    noisy = _predicts_from_noise(result)
    if noisy and not result.point_hypers:
        raise ValueError("psis_loo of a fit that predicts from noisy pseudo-observations "
                         "(predict_from='noisy') needs point hyperparameters (method "
                         "'exact' or 'map'); this fit sampled them")
    return noisy


def _pointwise_terms(result: FitResult, f):
    """(log ratios r_i^(s), log p(y_i | f_i^(s))), each (N, S), of the (chain, draw, N, L)
    latent draws ``f`` with their hyperparameters."""
    chains, draws, N = f.shape[:3]
    hypers = {k: jnp.broadcast_to(v, (chains, draws) + v.shape[2:])
              for k, v in result.hypers.items()}
    conjugate = result.spec.conjugate
    pseudo_log_lik = None if conjugate is None else conjugate.pseudo_log_lik
    terms = _log_terms(result.spec.log_link, pseudo_log_lik, result.data, hypers, f,
                       jnp.asarray(result.data.y))
    return tuple(np.asarray(t).reshape(chains * draws, N).T for t in terms)


def _noisy_loglik(result: FitResult, flat: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """(N, S) log mean_k p(y_i | f_i^(s) + e_ik) of the (S, N, L) draws ``flat``, with the
    noise variance s2_i of the label the PSIS-weighted leave-one-out mean predicts."""
    loo_mean = np.einsum("ns,snl->nl", np.exp(log_weights), flat)       # (N, L)
    point = {k: v[0, 0] for k, v in result.hypers.items()}
    _, var = result.spec.latent.latent_conditional(result.data, result.kernel, point,
                                                   jnp.asarray(loo_mean), result.data.X)
    return np.asarray(_noisy_log_utility(
        stream_key(result.seed, _NOISY_UTILITY_TAG), result.spec.log_link, jnp.asarray(flat),
        jnp.sqrt(jnp.maximum(jnp.asarray(var), 0.0)), jnp.asarray(result.data.y),
        NOISY_UTILITY_DRAWS)).T


def psis_loo(result: FitResult, *, reff: float | None = None) -> "ELPDData":
    """PSIS-LOO ELPD of any fit, with importance ratios from the likelihood term the
    posterior was conditioned on: loo_i = logsumexp_s(w_i^(s) + log p(y_i | f_i^(s))),
    w_i = ``az.psislw(r_i, reff)`` (module docstring).

    Args:
        result: a ``FitResult`` with posterior draws of the latent (chain x draw draws; a
            point-hyperparameter conjugate fit samples its exact posterior ``num_draws``
            times).
        reff: relative efficiency ESS / S of the draws for the Pareto smoothing (default:
            as ``az.loo``: 1 for one chain, else the mean ESS of the latent draws over S).

    Returns:
        ``ELPDData`` (log scale) as ``az.loo(..., pointwise=True)`` returns it:
        ``elpd_loo``, ``se``, ``p_loo`` (lppd - elpd_loo, lppd from the same draws),
        ``n_samples``, ``n_data_points``, ``warning`` (some Pareto k above ``good_k`` =
        min(1 - 1 / log10 S, 0.7)), ``loo_i`` [obs], ``pareto_k`` [obs], ``good_k``.

    Raises:
        ValueError: a collapsed sparse fit (module docstring), a noisy-prediction fit with
            sampled hyperparameters, or a non-positive ``reff``.

    Example:
        >>> import numpy as np
        >>> from ppgpc.infer import fit, psis_loo
        >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
        >>> elpd = psis_loo(fit("ilr_gp", X, y, method="exact", num_draws=1000))
        >>> elpd.pareto_k.shape
        (30,)
    """
    noisy = _check_scorable(result)
    f = training_latent(result)                                           # (chain, draw, N, L)
    log_ratio, loglik = _pointwise_terms(result, f)                       # (N, S)
    S = log_ratio.shape[1]
    reff = (float(reff) if reff is not None else 1.0 if f.shape[0] == 1  # as az.loo's r_eff
            else relative_ess(np.asarray(f)))
    if not 0 < reff:
        raise ValueError(f"reff must be positive; got {reff}")
    log_weights, pareto_k = psislw(log_ratio, reff)                       # normalised
    if noisy:
        loglik = _noisy_loglik(result, np.asarray(f).reshape(S, f.shape[2], -1), log_weights)
    loo_i = np.asarray(logsumexp(jnp.asarray(log_weights + loglik), axis=-1))
    lppd_i = np.asarray(logsumexp(jnp.asarray(loglik), axis=-1)) - np.log(S)
    good_k = min(1 - 1 / np.log10(S), 0.7)
    return elpd_data(loo_i, lppd_i, S, warning=bool(np.any(pareto_k > good_k)),
                     pareto_k=pareto_k, good_k=good_k)

"""The full (non-sparse) GP with the SVGP's link, whitened, for NUTS on the latent form: the
exact posterior to compare the variational one with (``ppgpc.models.svgp``)."""

from __future__ import annotations

import jax
import numpyro
import numpyro.distributions as dist

from ppgpc.gp import exact, linalg
from ppgpc.gp.kernels import gram, kernel_params, sample_kernel_params
from ppgpc.models.spec import record_jitter
from ppgpc.models.svgp.data import _check_link, _num_latent, SVGPData
from ppgpc.models.svgp.likelihood import LOG_LINKS
from ppgpc.runtime.padding import mask_gram, real_rows_only


__all__ = ["num_latent", "log_link", "initial_hypers", "latent_model", "latent_conditional",
           "num_latent_softmax", "num_latent_ilr", "prior_factor"]

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

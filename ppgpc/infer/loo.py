"""Closed-form leave-one-out scores of a conjugate fit, for choosing a smoothing level.

A conjugate model (ILR-GP, GPD) conditions a GP on Gaussian pseudo-targets, so with its
hyperparameters held fixed the predictive of the latent at each training input given all
the other points is Gaussian and available from the one factorisation of the fit
(``ppgpc.gp.loo_predictive``, Rasmussen and Williams section 5.4.2). Pushed through the
model's link it gives the leave-one-out predictive of each label,

    p(y_i | y_-i) = E[ p(y_i | r f_i) ],   f_i ~ N(mean_-i, var_-i),

estimated by Monte Carlo with S standard-normal draws shared by every point (each point's
estimate is a marginal expectation, so sharing the draws changes no point's law, and the
score is a smooth function of r). The leave-one-out NLL is -1/N sum_i log p(y_i | y_-i).

The factor r rescales the latent before the link. It is what makes one ILR fit serve a
whole grid of smoothing levels: the ILR targets of level epsilon are a(epsilon) times fixed
unit targets, a(epsilon) = log(1 + C epsilon / (1 - epsilon)), and Proposition 1's noise
standard deviation is proportional to a(epsilon) too (docs/math.md section 1). Scaling targets
and noise by a scales the type-II ML optimum's kernel variance by a^2 and leaves the
lengthscales where they were, so the fitted latent of level epsilon' is exactly
a(epsilon') / a(epsilon) times that of level epsilon: epsilon is an inverse temperature of
the latent. (Under type-II MAP the kernel-variance prior breaks the exact equivariance; the
scores are then those of the rescaled fit.)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import logsumexp

from ppgpc.infer.predictive import padded_training
from ppgpc.infer.results import FitResult
from ppgpc.runtime.padding import bucket, first_rows, pad_rows
from ppgpc.runtime.programs import jit

__all__ = ["loo_latent", "loo_nll", "LOO_DRAWS"]

LOO_DRAWS = 512
"""Standard-normal draws per point of the Monte Carlo leave-one-out predictive."""


def loo_latent(result: FitResult):
    """(mean (N, L), var (N, L)): the closed-form leave-one-out predictive of the latent at
    each training input of a point-hyperparameter conjugate fit (``exact`` or ``map``).

    Raises:
        ValueError: the fit is not a point-hyperparameter conjugate fit, or its model has
            no ``loo_predictive``.
    """
    spec = result.spec
    if not (result.predictive_kind == "conjugate" and result.point_hypers
            and spec.has("conjugate") and spec.conjugate.loo_predictive is not None):
        raise ValueError(
            f"closed-form leave-one-out needs a conjugate fit with point hyperparameters "
            f"(method 'exact' or 'map' of a model with loo_predictive); got method "
            f"{result.method!r} of model {spec.name!r}")
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    data, _ = padded_training(result)  # one program per bucket of N
    num_points = int(result.data.X.shape[0])
    mean, var = _loo_latent(spec, result.kernel, data, hypers)
    return first_rows(mean, num_points), first_rows(var, num_points)


@functools.partial(jit, static_argnames=("spec",))
def _loo_latent(spec, kernel, data, hypers):
    posterior = spec.conjugate.condition(data, kernel, hypers)
    return spec.conjugate.loo_predictive(data, kernel, hypers, posterior)


@functools.partial(jit, static_argnames=("log_link", "num_draws"))
def _loo_nll(key, log_link, mean, var, y, scales, num_draws):
    eps = jax.random.normal(key, (num_draws, 1, mean.shape[-1]), dtype=mean.dtype)
    f0 = mean[None] + jnp.sqrt(var)[None] * eps                         # (S, N, L)

    def score(scale):
        logp = log_link(scale * f0)                                     # (S, N, C)
        logp_y = jnp.take_along_axis(logp, y[None, :, None], axis=-1)[..., 0]
        return -(logsumexp(logp_y, axis=0) - jnp.log(num_draws))         # (N,)

    return lax.map(score, scales)


SCALE_BLOCK = 16
"""``loo_nll`` scores its scales in blocks of this many (a grid padded by repeating its last
value), so that grids of a few lengths share one program."""


def loo_nll(key, log_link, mean, var, y, scales=(1.0,), num_draws: int = LOO_DRAWS, *,
            pointwise: bool = False):
    """Leave-one-out NLL of labels y under the latent predictive N(mean, var), the latent
    scaled by each of ``scales`` before the link (module docstring).

    Args:
        key: PRNG key of the shared standard-normal draws.
        log_link: ``f (..., L) -> log p(y = c | f) (..., C)`` (a module-level function).
        mean, var: (N, L) leave-one-out predictive moments (``loo_latent``).
        y: (N,) integer labels.
        scales: factors r on the latent, shape (G,).
        num_draws: S.
        pointwise: return each point's -log p(y_i | y_-i) instead of their mean.

    Returns:
        (G,) leave-one-out NLL per scale, or (G, N) with ``pointwise``.
    """
    # the points padded to a bucket of sizes (unit-variance rows, dropped after), and the
    # scales to a multiple of SCALE_BLOCK (repeating the last), so that a new number of
    # points or a grid extended at its edge compiles nothing
    num_points = int(np.shape(y)[0])
    size = bucket(num_points)
    scales = np.atleast_1d(np.asarray(scales, dtype=np.float64))
    num_scales = scales.shape[0]
    scales = pad_rows(scales, -(-num_scales // SCALE_BLOCK) * SCALE_BLOCK, scales[-1])
    losses = _loo_nll(key, log_link, pad_rows(mean, size), pad_rows(var, size, 1.0),
                      pad_rows(y, size), scales, int(num_draws))
    losses = first_rows(first_rows(losses, num_scales), num_points, axis=1)
    return losses if pointwise else jax.device_put(np.mean(np.asarray(losses), axis=-1))

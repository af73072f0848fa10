"""Method ``"nuts"``: NUTS on a model's collapsed or latent form.

On the collapsed form (``form="collapsed"``, the ``conjugate`` capability) NUTS samples the
hyperparameters, and each draw is paired with an exact conditional draw of the latent; on
the latent form (``form="latent"``, the ``latent`` capability) it samples the latent with
the hyperparameters fixed or sampled too (``sample_hyperparameters=True``). Fixed
hyperparameters are the given ones, else the type-II ML values of the collapsed form, else,
for a model without one, the model's own fit (``Latent.fit_hypers``: the logistic-softmax
GP's CAVI) or its SVI fit at its own schedule (``ppgpc.infer.svi.svi_hypers``: the SVGP),
so that ``fit(..., method="nuts", form="latent")`` and the model's estimator hold the same
values on the same data.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.infer.cavi import cavi_check, cavi_info
from ppgpc.infer.common import as_draws, check_hyperparameters, jitted, method
from ppgpc.infer.exact import OPTIMIZER_OPTIONS, point_hypers
from ppgpc.infer.mcmc import run_nuts
from ppgpc.infer.records import FitInfo, RunOutput, SamplerInfo
from ppgpc.infer.svi import svi_hypers
from ppgpc.models.spec import JITTER_SITE
from ppgpc.runtime.padding import num_real_rows
from ppgpc.validation import check_options, check_probability

__all__ = ["NUTS_METHOD", "NUTS_OPTIONS", "run_nuts_method", "check_nuts_options"]

NUTS_OPTIONS = {
    "form": "collapsed",
    "num_warmup": 500,
    "num_samples": None,
    "max_samples": None,
    "num_chains": 4,
    "hyperparameters": None,
    "sample_hyperparameters": False,
    "target_accept": 0.8,
    "max_tree_depth": 10,
    "dense_mass": False,
    "progress_bar": True,
}
"""Options of ``"nuts"`` and their defaults: four chains (what the R-hat and ESS thresholds
of ``ppgpc.infer.convergence`` assume; Vehtari et al. 2021) warmed up for 500 transitions,
then drawn in windows until the check passes (``ppgpc.infer.mcmc``): ``num_samples`` draws
per chain at least when given, ``max_samples`` (default ``DEFAULT_MAX_SAMPLES``) at most."""

_SVI_STREAM = 0x737669
"""``fold_in`` data of the key of the SVI fit that gives NUTS its hyperparameters."""

_FORMS = {"collapsed": "conjugate", "latent": "latent"}
"""The capability group each form of NUTS needs."""


def _one_latent_draw_per_hyper_draw(keys, spec, data, kernel, flat_hypers):
    """(S, N, L): for each hyperparameter draw, one exact conditional draw of the latent;
    and the largest Cholesky jitter the conditional posteriors needed."""
    conjugate = spec.conjugate

    def draw(args):
        h, k = args
        posterior = conjugate.condition(data, kernel, h)
        return (conjugate.sample_train(k, data, kernel, h, posterior, 1)[0],
                jnp.max(posterior.jitter))

    latent, jitter = lax.map(draw, (flat_hypers, keys))
    return latent, jnp.max(jitter)


def _checked_latent(num_real: int, draws: dict) -> dict:
    """What the windowed check looks at: the latent at the real (not padded) rows and any
    sampled hyperparameter (not the whitened latent, a transform of the same)."""
    out = {k: v for k, v in draws.items() if k not in ("f", "f_white", JITTER_SITE)}
    out["f"] = draws["f"][:, :, :num_real]
    return out


def check_nuts_options(opts: dict) -> dict:
    """NUTS settings, checked before NumPyro sees them (it would fail deep inside, or, for
    ``target_accept`` outside (0, 1), run a sampler that cannot adapt)."""
    check_probability("target_accept", opts["target_accept"], kind="a probability")
    return check_options(opts, counts=("num_samples", "max_samples", "num_chains",
                                       "max_tree_depth"),
                         non_negative=("num_warmup",),
                         flags=("dense_mass", "sample_hyperparameters", "progress_bar"),
                         optional=("num_samples", "max_samples"))


def run_nuts_method(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"nuts"`` (``ppgpc.infer.methods.METHODS``)."""
    form = opts["form"]
    if form not in _FORMS:
        raise ValueError(f"nuts form must be 'collapsed' or 'latent', got {form!r}")
    if not spec.has(_FORMS[form]):
        other = "latent" if form == "collapsed" else "collapsed"
        hint = f"; use form={other!r}" if spec.has(_FORMS[other]) else ""
        raise ValueError(f"model {spec.name!r} has no {form} form for NUTS (missing the "
                         f"{_FORMS[form]!r} capability){hint}")
    k_mcmc, k_latent = jax.random.split(key)
    mcmc_opts = {k: opts[k] for k in ("num_warmup", "num_samples", "max_samples", "num_chains",
                                      "target_accept", "max_tree_depth", "dense_mass",
                                      "progress_bar")}
    optimizers = ()
    optimizer = initial = cavi = svi = None

    if form == "collapsed":
        # the type-II MAP point only starts the chains, which sample the hyperparameters
        start = point_hypers(spec, data, kernel, opts["hyperparameters"], True,
                             OPTIMIZER_OPTIONS)
        init, initial = start.values, start.optimizer
        how = "sampled (NUTS)"
        out = run_nuts(k_mcmc, spec.conjugate.collapsed_model, (data, kernel),
                       init_values=init, **mcmc_opts)
        hypers = {k: v for k, v in out.samples.items() if k in init}
        C, S = next(iter(hypers.values())).shape[:2]
        flat = {k: v.reshape((C * S,) + v.shape[2:]) for k, v in hypers.items()}
        keys = jax.random.split(k_latent, C * S)

        latent, jitter = jitted(_one_latent_draw_per_hyper_draw, ("spec",))(
            keys, spec, data, kernel, flat)
        latent = latent.reshape((C, S) + latent.shape[1:])
        point = False
    else:
        point = not opts["sample_hyperparameters"]
        if not point:
            fixed, factor = None, None
            how = "sampled (NUTS)"
        elif opts["hyperparameters"] is None and not spec.has("conjugate") \
                and spec.latent.fit_hypers is not None:
            # the model's own fit (the logistic-softmax GP's CAVI), as its estimator runs it
            fit = spec.latent.fit_hypers(data, kernel, progress=bool(opts["progress_bar"]))
            fixed = check_hyperparameters(spec, data, kernel, fit.values)
            how, cavi = fit.how, cavi_info(fit)
            optimizers = (cavi_check(cavi),)
        elif opts["hyperparameters"] is None and not spec.has("conjugate") \
                and spec.has("svi"):
            # the model's SVI fit at its own schedule (the SVGP), as its estimator runs it
            fit = svi_hypers(spec, data, kernel, jax.random.fold_in(key, _SVI_STREAM),
                             progress=bool(opts["progress_bar"]))
            fixed = check_hyperparameters(spec, data, kernel, fit.values)
            how, svi = fit.how, fit.output.info.svi
            optimizers = tuple(fit.output.optimizers)
        else:
            given = point_hypers(spec, data, kernel, opts["hyperparameters"], False,
                                 OPTIMIZER_OPTIONS)
            fixed, how, optimizer = given.values, given.how, given.optimizer
            optimizers = () if given.check is None else (given.check,)
        if point:  # the prior's factor once, not at every gradient
            factor = None if spec.latent.prior_factor is None else jitted(
                spec.latent.prior_factor)(data, kernel, fixed)
        real = num_real_rows(data)
        out = run_nuts(k_mcmc, spec.latent.latent_model, (data, kernel, fixed, factor),
                       keep=None if fixed is None else ("f", JITTER_SITE),
                       checked=functools.partial(_checked_latent, real), **mcmc_opts)
        samples = dict(out.samples)
        # the models record their Cholesky jitter as a deterministic site
        jitter = jnp.max(samples.pop(JITTER_SITE, jnp.zeros(())))
        latent = samples["f"]
        if fixed is None:
            hypers = {k: v for k, v in samples.items() if k.startswith("kernel_")}
            extra = {k: v for k, v in samples.items()
                     if k not in hypers and k not in ("f", "f_white")}
            hypers.update(extra)
        else:
            hypers = as_draws(fixed)

    sampler = SamplerInfo(num_draws=int(out.run.num_draws), stop_reason=out.run.stop_reason,
                          divergences=int(np.sum(out.sample_stats["diverging"])), form=form)
    info = FitInfo(hyperparameters=how, optimizer=optimizer, initial_optimizer=initial,
                   cavi=cavi, svi=svi, sampler=sampler)
    if not bool(jnp.all(jnp.isfinite(latent))):
        raise FloatingPointError("NUTS produced non-finite latent draws")
    return RunOutput(hypers=hypers, latent=latent, predictive_kind="latent" if form == "latent"
                     else "conjugate", point_hypers=point, info=info,
                     sample_stats=out.sample_stats, optimizers=optimizers, jitter=float(jitter),
                     # the windows' last check looked at the draws the driver checks, except
                     # on the collapsed form (hyperparameters only)
                     run=out.run._replace(check=None) if form == "collapsed" else out.run)


NUTS_METHOD = method("nuts", run_nuts_method, (("conjugate",), ("latent",)), NUTS_OPTIONS,
                     check=check_nuts_options, sampler=True)
"""The driver's method ``"nuts"`` (``ppgpc.infer.methods.METHODS``)."""

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

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from ppgpc.infer.cavi import cavi_point
from ppgpc.infer.common import Options, as_draws, check_hyperparameters, jitted, method
from ppgpc.infer.exact import point_hypers
from ppgpc.infer.mcmc import run_nuts
from ppgpc.infer.records import FitInfo, PointHypers, RunOutput
from ppgpc.infer.svi import svi_hypers
from ppgpc.models.spec import JITTER_SITE
from ppgpc.runtime.padding import num_real_rows
from ppgpc.validation import check_probability

__all__ = ["NUTS_METHOD", "NUTSOptions", "run_nuts_method"]

@dataclasses.dataclass(frozen=True)
class NUTSOptions(Options):
    """Options of ``"nuts"``: four chains (what the R-hat and ESS thresholds of
    ``ppgpc.infer.convergence`` assume; Vehtari et al. 2021) warmed up for ``num_warmup``
    transitions, then drawn in windows until the check passes (``ppgpc.infer.mcmc``)."""

    form: str = "collapsed"
    """``"collapsed"`` (the hyperparameters, each draw paired with an exact latent draw) or
    ``"latent"``."""
    num_warmup: int = 500
    """The most warm-up transitions per chain: the warm-up ends earlier, on a window's end,
    once the adaptation has settled (``ppgpc.infer.mcmc.run_nuts``); the record's
    ``num_warmup`` is the warm-up run."""
    num_samples: int | None = None
    """The least draws per chain (None: until the check passes)."""
    max_samples: int | None = None
    """The most draws per chain (None: ``ppgpc.infer.mcmc.DEFAULT_MAX_SAMPLES``)."""
    num_chains: int = 4
    hyperparameters: dict | None = None
    """Fixed values on the latent form (None: fitted, module docstring)."""
    sample_hyperparameters: bool = False
    """Sample the hyperparameters beside the latent (latent form)."""
    target_accept: float = 0.8
    max_tree_depth: int = 10
    dense_mass: bool = False
    progress_bar: bool = True

    COUNTS = ("num_samples", "max_samples", "num_chains", "max_tree_depth")
    NON_NEGATIVE = ("num_warmup",)
    FLAGS = ("dense_mass", "sample_hyperparameters", "progress_bar")
    OPTIONAL = ("num_samples", "max_samples")
    VALUES = Options.VALUES + ("num_warmup", "num_samples", "max_samples")

    def extra_checks(self) -> "NUTSOptions":
        """``target_accept`` outside (0, 1) would run a sampler that cannot adapt; a form
        that is not one of ``_FORMS`` is named."""
        check_probability("target_accept", self.target_accept, kind="a probability")
        if self.form not in _FORMS:
            raise ValueError(f"nuts form must be 'collapsed' or 'latent', got {self.form!r}")
        return self


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


def _fixed_point(spec, data, kernel, key, opts: NUTSOptions) -> PointHypers:
    """The hyperparameters the latent form holds fixed (module docstring): given, else the
    collapsed form's type-II ML values, else the model's own fit (the logistic-softmax GP's
    CAVI) or its SVI fit at its own schedule (the SVGP), as the model's estimator runs it."""
    if opts.hyperparameters is not None or spec.has("conjugate"):
        return point_hypers(spec, data, kernel, opts.hyperparameters, False)
    if spec.latent.fit_hypers is not None:
        point = cavi_point(spec.latent.fit_hypers(data, kernel, progress=opts.progress_bar))
    elif spec.has("svi"):
        point = svi_hypers(spec, data, kernel, jax.random.fold_in(key, _SVI_STREAM),
                           progress=opts.progress_bar)
    else:
        return point_hypers(spec, data, kernel, None, False)   # names what is missing
    return point._replace(values=check_hyperparameters(spec, data, kernel, point.values))


def _sample(key, model, args, opts: NUTSOptions, **sites):
    """``ppgpc.infer.mcmc.run_nuts`` of ``model(*args)`` with these options (``sites``:
    its ``init_values``, ``keep`` and ``checked``)."""
    return run_nuts(key, model, args, num_warmup=opts.num_warmup,
                    num_samples=opts.num_samples, max_samples=opts.max_samples,
                    num_chains=opts.num_chains, target_accept=opts.target_accept,
                    max_tree_depth=opts.max_tree_depth, dense_mass=opts.dense_mass,
                    progress_bar=opts.progress_bar, **sites)


def _collapsed(spec, data, kernel, keys, opts: NUTSOptions):
    """NUTS on the hyperparameters of the collapsed form, started at the type-II MAP point,
    and one exact conditional latent draw per hyperparameter draw: (output, latent draws
    (chain, draw, N, L), their largest jitter, the start's record)."""
    k_mcmc, k_latent = keys
    start = point_hypers(spec, data, kernel, opts.hyperparameters, True)
    out = _sample(k_mcmc, spec.conjugate.collapsed_model, (data, kernel), opts,
                  init_values=start.values)
    hypers = {k: v for k, v in out.samples.items() if k in start.values}
    C, S = next(iter(hypers.values())).shape[:2]
    flat = {k: v.reshape((C * S,) + v.shape[2:]) for k, v in hypers.items()}
    latent, jitter = jitted(_one_latent_draw_per_hyper_draw, ("spec",))(
        jax.random.split(k_latent, C * S), spec, data, kernel, flat)
    # the windows' last check looked at the hyperparameters only: the driver checks both
    out = out._replace(check=None)
    return out, hypers, latent.reshape((C, S) + latent.shape[1:]), jitter, start.record


def _latent(spec, data, kernel, key, opts: NUTSOptions):
    """NUTS on the latent form, the hyperparameters fixed (``_fixed_point``) or sampled:
    (output, hyperparameter draws, latent draws (chain, draw, N, L), largest jitter, the
    fixed point (None when sampled))."""
    point = None if opts.sample_hyperparameters else _fixed_point(spec, data, kernel, key,
                                                                  opts)
    fixed = None if point is None else point.values
    # the prior's factor once, not at every gradient
    factor = None if point is None or spec.latent.prior_factor is None else jitted(
        spec.latent.prior_factor)(data, kernel, fixed)
    out = _sample(jax.random.split(key)[0], spec.latent.latent_model,
                  (data, kernel, fixed, factor), opts,
                  keep=None if fixed is None else ("f", JITTER_SITE),
                  checked=functools.partial(_checked_latent, num_real_rows(data)))
    samples = dict(out.samples)
    # the models record their Cholesky jitter as a deterministic site
    jitter = jnp.max(samples.pop(JITTER_SITE, jnp.zeros(())))
    if point is not None:
        return out, as_draws(fixed), samples["f"], jitter, point
    hypers = {k: v for k, v in samples.items() if k not in ("f", "f_white")}
    return out, hypers, samples["f"], jitter, None


def run_nuts_method(spec, data, kernel, key, opts: NUTSOptions) -> RunOutput:
    """Runner of method ``"nuts"`` (``ppgpc.infer.methods.METHODS``)."""
    form = opts.form
    if not spec.has(_FORMS[form]):
        other = "latent" if form == "collapsed" else "collapsed"
        hint = f"; use form={other!r}" if spec.has(_FORMS[other]) else ""
        raise ValueError(f"model {spec.name!r} has no {form} form for NUTS (missing the "
                         f"{_FORMS[form]!r} capability){hint}")
    if form == "collapsed":
        out, hypers, latent, jitter, initial = _collapsed(
            spec, data, kernel, jax.random.split(key), opts)
        info = FitInfo(hyperparameters="sampled (NUTS)", initial_optimizer=initial)
    else:
        out, hypers, latent, jitter, point = _latent(spec, data, kernel, key, opts)
        info = FitInfo(hyperparameters="sampled (NUTS)") if point is None else FitInfo(
            hyperparameters=point.how, **point.info_parts())
    if not bool(jnp.all(jnp.isfinite(latent))):
        raise FloatingPointError("NUTS produced non-finite latent draws")
    info = dataclasses.replace(info, sampler=dataclasses.replace(out.sampler, form=form))
    return RunOutput(hypers=hypers, latent=latent,
                     predictive_kind="latent" if form == "latent" else "conjugate",
                     point_hypers=form == "latent" and not opts.sample_hyperparameters,
                     info=info, sample_stats=out.sample_stats, jitter=float(jitter),
                     chains=out.check)


NUTS_METHOD = method("nuts", run_nuts_method, (("conjugate",), ("latent",)), NUTSOptions,
                     sampler=True)
"""The driver's method ``"nuts"`` (``ppgpc.infer.methods.METHODS``)."""

"""One entry point, ``fit``, that runs any model module with any method it supports.

A method is a runner function registered in ``_RUNNERS`` together with the ``ModelSpec``
fields it needs and the options it accepts. ``supported_methods(spec)`` is derived from
those requirements, so a model supports a method exactly when it provides the functions the
method uses; nothing here special-cases a model.

Methods:

* ``"exact"``: kernel hyperparameters by type-II maximum likelihood (L-BFGS on the collapsed
  model), then the closed-form conjugate latent posterior (MATH.md section 1).
* ``"map"``: the same with the hyperparameter priors included (type-II MAP).
* ``"nuts"``: NUTS on the collapsed model over the hyperparameters (``form="collapsed"``,
  each draw then paired with an exact conditional draw of the latent), or on the latent form
  (``form="latent"``) with hyperparameters fixed (the type-II ML values unless given) or
  sampled too (``sample_hyperparameters=True``).
"""

from __future__ import annotations

import functools
import math
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.infer.mcmc import run_nuts
from ppgpc.infer.optimize import optimize_sites
from ppgpc.infer.results import FitResult
from ppgpc.infer.spec import ModelSpec
from ppgpc.kernels import make_kernel
from ppgpc.validation import (
    MAX_EXACT_POINTS,
    check_exact_size,
    check_features,
    check_integer_labels,
    check_options,
    check_probability,
    check_seed,
    check_size_limit,
)

__all__ = ["fit", "supported_methods", "register_method", "check_method_options", "METHODS"]

_CONJUGATE = ("collapsed_model", "condition", "predict", "sample_train")
_LATENT = ("latent_model", "latent_conditional")

_OPTIMIZER_OPTIONS = {"hyperparameters": None, "num_draws": 1000, "max_iter": 500, "tol": 1e-6,
                      "optimizer": "lbfgs", "learning_rate": 0.1, "progress_bar": False}
_NUTS_OPTIONS = {
    "form": "collapsed",
    "num_warmup": 500,
    "num_samples": 500,
    "num_chains": 2,
    "hyperparameters": None,
    "sample_hyperparameters": False,
    "target_accept": 0.8,
    "max_tree_depth": 10,
    "dense_mass": False,
    "progress_bar": True,
}


def _resolve_spec(model) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    from ppgpc.models import get_spec

    return get_spec(model)


def _with_options(method: str, defaults: dict, given: dict) -> dict:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"method {method!r} got unknown option(s) {unknown}; its options are "
            f"{sorted(defaults)}"
        )
    return {**defaults, **given}


def _as_draws(hypers: dict) -> dict:
    """Point hyperparameters as (chain=1, draw=1, ...) arrays."""
    return {k: jnp.asarray(v, dtype=jnp.float64)[None, None] for k, v in hypers.items()}


_POSITIVE_HYPERS = ("kernel_", "noise_scale")
"""Prefixes of the hyperparameters that live on (0, inf): kernel variances and lengthscales,
noise scales (a GPD class mean or an inducing input may be any real)."""


def _check_hyperparameters(spec, data, kernel, given: dict) -> dict:
    """Given hyperparameters as float64 arrays of the model's shapes (a scalar broadcasts,
    e.g. one lengthscale for every input of an ARD kernel).

    Raises:
        ValueError: missing or unknown names, a shape that does not broadcast to the
            model's, non-finite values, or a non-positive kernel or noise parameter.
    """
    initial = spec.initial_hypers(data, kernel)
    if set(given) != set(initial):
        raise ValueError(
            f"hyperparameters must name exactly {sorted(initial)}, got {sorted(given)}"
        )
    out = {}
    for k, v in given.items():
        shape = np.shape(initial[k])
        try:
            value = np.broadcast_to(np.asarray(v, dtype=np.float64), shape)
        except (TypeError, ValueError):
            raise ValueError(f"hyperparameter {k} must have shape {shape} (or be a scalar), "
                             f"got {np.asarray(v, dtype=object).shape}") from None
        if not np.all(np.isfinite(value)):
            raise ValueError(f"hyperparameter {k} is not finite: {value}")
        if k.startswith(_POSITIVE_HYPERS) and not np.all(value > 0):
            raise ValueError(f"hyperparameter {k} must be positive, got {value}")
        out[k] = jnp.asarray(value)
    return out


def _point_hypers(spec, data, kernel, given, include_prior, opts):
    """Given hyperparameters, or the type-II ML / MAP optimum; plus facts for ``info``."""
    if given is not None:
        return _check_hyperparameters(spec, data, kernel, given), {"hyperparameters": "given"}
    if not spec.provides("collapsed_model"):
        raise ValueError(
            f"model {spec.name!r} has no collapsed form to fit hyperparameters by type-II ML; "
            "pass hyperparameters={...} (e.g. from an SVI fit) or sample_hyperparameters=True")
    opt = optimize_sites(
        spec.collapsed_model, spec.initial_hypers(data, kernel), args=(data, kernel),
        include_prior=include_prior, max_iter=opts["max_iter"], tol=opts["tol"],
        optimizer=opts["optimizer"], learning_rate=opts["learning_rate"],
        progress_bar=opts["progress_bar"],
    )
    if not opt.converged and opts["optimizer"] == "lbfgs":  # a small relative change converged
        warnings.warn(
            f"hyperparameter optimisation stopped ({opt.stop_reason}) after "
            f"{opt.num_iterations} iterations with gradient norm {opt.grad_norm:.2e} > "
            f"tol={opts['tol']}; the estimate may be off",
            RuntimeWarning, stacklevel=4,
        )
    info = {
        "hyperparameters": "type-II MAP" if include_prior else "type-II ML",
        "log_marginal_likelihood" if not include_prior else "log_posterior": opt.objective,
        "optimizer": opts["optimizer"],
        "optimizer_iterations": opt.num_iterations,
        "optimizer_evaluations": opt.num_evaluations,
        "optimizer_grad_norm": opt.grad_norm,
        "optimizer_converged": opt.converged,
        "optimizer_stop_reason": opt.stop_reason,
    }
    return opt.params, info


@functools.lru_cache(maxsize=None)
def _jit(fn, static_argnames=()):
    """A cached ``jax.jit`` of a model function (kernels are static pytrees already)."""
    return jax.jit(fn, static_argnames=static_argnames)


@jax.jit
def _all_finite(tree) -> jax.Array:
    """True when every entry of every leaf is finite: one program per pytree structure, one
    scalar back to the host (not the N x N factor)."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x))
                              for x in jax.tree_util.tree_leaves(tree)]))


def _check_posterior(posterior, what: str) -> float:
    jitter = float(jnp.max(posterior.jitter)) if hasattr(posterior, "jitter") else 0.0
    if not bool(_all_finite(posterior)):
        raise FloatingPointError(
            f"the {what} could not be computed: the kernel matrix was not positive definite "
            "even with the maximum jitter. Check for duplicated inputs or extreme scales."
        )
    if jitter > 0:
        warnings.warn(f"the Cholesky factorisation needed jitter {jitter:.3g}", RuntimeWarning,
                      stacklevel=4)
    return jitter


def _run_point(spec, data, kernel, key, opts, include_prior):
    hypers, info = _point_hypers(spec, data, kernel, opts["hyperparameters"], include_prior,
                                 opts)
    posterior = _jit(spec.condition)(data, kernel, hypers)
    info["cholesky_jitter"] = _check_posterior(posterior, "conjugate posterior")
    latent = _jit(spec.sample_train, ("num_samples",))(
        key, data, kernel, hypers, posterior, num_samples=int(opts["num_draws"]))
    return dict(hypers=_as_draws(hypers), latent=latent[None], predictive_kind="conjugate",
                point_hypers=True, info=info)


def _run_exact(spec, data, kernel, key, opts):
    return _run_point(spec, data, kernel, key, opts, include_prior=False)


def _run_map(spec, data, kernel, key, opts):
    return _run_point(spec, data, kernel, key, opts, include_prior=True)


def _one_latent_draw_per_hyper_draw(keys, spec, data, kernel, flat_hypers):
    """(S, N, L): for each hyperparameter draw, one exact conditional draw of the latent."""

    def draw(args):
        h, k = args
        posterior = spec.condition(data, kernel, h)
        return spec.sample_train(k, data, kernel, h, posterior, 1)[0]

    return lax.map(draw, (flat_hypers, keys))


def _check_optimizer_options(opts: dict) -> dict:
    """exact/map settings, checked before any work (a negative ``num_draws`` would end in a
    reshape error inside JAX, a negative Adam ``max_iter`` would take no step)."""
    return check_options(opts, counts=("num_draws", "max_iter"), positive=("learning_rate",),
                         flags=("progress_bar",))


def _check_nuts_options(opts: dict) -> dict:
    """NUTS settings, checked before NumPyro sees them (it would fail deep inside, or, for
    ``target_accept`` outside (0, 1), run a sampler that cannot adapt)."""
    check_probability("target_accept", opts["target_accept"], kind="a probability")
    return check_options(opts, counts=("num_samples", "num_chains", "max_tree_depth"),
                         non_negative=("num_warmup",),
                         flags=("dense_mass", "sample_hyperparameters", "progress_bar"))


def _run_nuts(spec, data, kernel, key, opts):
    form = opts["form"]
    if form not in ("collapsed", "latent"):
        raise ValueError(f"nuts form must be 'collapsed' or 'latent', got {form!r}")
    needed = _CONJUGATE if form == "collapsed" else _LATENT
    missing = [f for f in needed if not spec.provides(f)]
    if missing:
        other = "latent" if form == "collapsed" else "collapsed"
        hint = (f"; use form={other!r}" if all(spec.provides(f) for f in
                                              (_LATENT if other == "latent" else _CONJUGATE))
                else "")
        raise ValueError(f"model {spec.name!r} has no {form} form for NUTS (missing "
                         f"{missing}){hint}")
    k_mcmc, k_latent = jax.random.split(key)
    mcmc_opts = {k: opts[k] for k in ("num_warmup", "num_samples", "num_chains", "target_accept",
                                      "max_tree_depth", "dense_mass", "progress_bar")}
    info: dict = {"form": form}

    if form == "collapsed":
        init, opt_info = _point_hypers(spec, data, kernel, opts["hyperparameters"], True,
                                       _OPTIMIZER_OPTIONS)
        info.update({"init_" + k: v for k, v in opt_info.items()})
        model = functools.partial(spec.collapsed_model, data, kernel)
        out = run_nuts(k_mcmc, model, init_values=init, **mcmc_opts)
        hypers = {k: v for k, v in out.samples.items() if k in init}
        C, S = next(iter(hypers.values())).shape[:2]
        flat = {k: v.reshape((C * S,) + v.shape[2:]) for k, v in hypers.items()}
        keys = jax.random.split(k_latent, C * S)

        latent = _jit(_one_latent_draw_per_hyper_draw, ("spec",))(keys, spec, data, kernel, flat)
        latent = latent.reshape((C, S) + latent.shape[1:])
        point = False
    else:
        if opts["sample_hyperparameters"]:
            fixed, point = None, False
        else:
            fixed, opt_info = _point_hypers(spec, data, kernel, opts["hyperparameters"], False,
                                            _OPTIMIZER_OPTIONS)
            info.update(opt_info)
            point = True
        model = functools.partial(spec.latent_model, data, kernel, fixed)
        out = run_nuts(k_mcmc, model, **mcmc_opts)
        latent = out.samples["f"]
        if fixed is None:
            hypers = {k: v for k, v in out.samples.items() if k.startswith("kernel_")}
            extra = {k: v for k, v in out.samples.items()
                     if k not in hypers and k not in ("f", "f_white")}
            hypers.update(extra)
        else:
            hypers = _as_draws(fixed)

    divergences = int(np.sum(out.sample_stats["diverging"]))
    info["divergences"] = divergences
    if divergences:
        warnings.warn(
            f"NUTS reported {divergences} divergent transition(s); check the trace and consider "
            "a higher target_accept", RuntimeWarning, stacklevel=3,
        )
    if not bool(jnp.all(jnp.isfinite(latent))):
        raise FloatingPointError("NUTS produced non-finite latent draws")
    return dict(hypers=hypers, latent=latent, predictive_kind="latent" if form == "latent"
                else "conjugate", point_hypers=point, info=info,
                sample_stats=out.sample_stats)


# method name -> (runner, spec fields it needs (any of the alternatives), default options)
_RUNNERS: dict = {}

METHODS: tuple = ()
"""Every method the driver knows (updated by ``register_method``)."""


_SCALABLE: dict = {}
"""Methods exempt from ``max_exact_points``: name -> True (the method never forms an N x N
matrix) or a predicate ``(options, num_samples) -> bool`` (whether these options make it
sparse)."""


def _size_limited(spec, method: str, opts: dict, num_samples: int) -> bool:
    """Whether ``fit`` applies ``max_exact_points``: not for a sparse model (a spec with
    ``extras["scalable"]``, e.g. the collapsed sparse bounds, whose cost is O(N M^2)), nor
    for a scalable method, nor for a method that these options make sparse."""
    if spec.extras.get("scalable", False):
        return False
    scalable = _SCALABLE.get(method, False)
    if callable(scalable):
        return not scalable(opts, num_samples)
    return not scalable


def register_method(name: str, runner, requirements, defaults: dict, *,
                    scalable=False, check=None) -> None:
    """Teach the driver a method.

    Args:
        name: the method's name, e.g. ``"gibbs"``.
        runner: ``runner(spec, data, kernel, key, options) -> dict`` with the ``FitResult``
            fields ``hypers``, ``latent``, ``predictive_kind``, ``point_hypers``, ``info`` and
            optionally ``sample_stats``.
        requirements: alternatives, each a tuple of spec fields (``"condition"``, or
            ``"extras.<key>"``) that must all be present; the model supports the method if
            any alternative is met.
        defaults: the method's options and their defaults (unknown options are refused).
        scalable: True if the method never forms an N x N matrix, so ``fit``'s
            ``max_exact_points`` does not apply to it (minibatch SVI); or a predicate
            ``(options, num_samples) -> bool`` for a method that is sparse under some
            options only (CAVI with ``num_inducing`` < N).
        check: ``check(options) -> options``, the method's settings checked (a ValueError
            naming the bad one) and normalised; ``fit`` calls it before it looks at the
            data, so a bad setting is refused before any JAX code runs.
    """
    global METHODS
    _RUNNERS[name] = (runner, tuple(tuple(r) for r in requirements), dict(defaults),
                      check or dict)
    if scalable:
        _SCALABLE[name] = scalable
    else:
        _SCALABLE.pop(name, None)
    METHODS = tuple(_RUNNERS)


register_method("exact", _run_exact, (_CONJUGATE,), _OPTIMIZER_OPTIONS,
                check=_check_optimizer_options)
register_method("map", _run_map, (_CONJUGATE,), _OPTIMIZER_OPTIONS,
                check=_check_optimizer_options)
register_method("nuts", _run_nuts, (_CONJUGATE, _LATENT), _NUTS_OPTIONS,
                check=_check_nuts_options)


def supported_methods(model) -> tuple[str, ...]:
    """The methods a model supports: those whose required spec fields it provides, less any
    the spec opts out of in ``extras["excluded_methods"]``."""
    spec = _resolve_spec(model)
    excluded = set(spec.extras.get("excluded_methods", ()))  # e.g. nuts for sparse models
    return tuple(
        name for name, (_, alternatives, _, _) in _RUNNERS.items()
        if name not in excluded
        and any(all(spec.provides(f) for f in fields) for fields in alternatives)
    )


def check_method_options(method: str, options: dict) -> dict:
    """A method's options completed with its defaults and checked, as ``fit`` does before
    it looks at the data; for callers that run other work first (an estimator's smoothing
    search), so a bad setting is refused before that work rather than after it.

    Raises:
        ValueError: an unknown method, or a setting that is not what it should be (named).
        TypeError: an option the method does not have (the valid ones are named).
    """
    if method not in _RUNNERS:
        raise ValueError(f"unknown method {method!r}; the driver knows {list(_RUNNERS)}")
    _, _, defaults, check = _RUNNERS[method]
    return check(_with_options(method, defaults, options))


def fit(
    model,
    X,
    y,
    *,
    method: str = "exact",
    num_classes: int | None = None,
    kernel="rbf-ard",
    model_options: dict | None = None,
    seed: int = 0,
    max_exact_points: int | None = MAX_EXACT_POINTS,
    **method_options,
) -> FitResult:
    """Fit a classifier with the given inference method.

    Args:
        model: a ``ModelSpec`` or a model name (``"ilr_gp"``; see ``ppgpc.models.available``).
        X: (N, D) training inputs (already scaled as you want them).
        y: (N,) integer labels 0..C-1.
        method: one of ``supported_methods(model)``.
        num_classes: C (default: largest label + 1).
        kernel: a kernel name (``"rbf-ard"``, ``"rbf"``, ``"matern52-ard"``, ``"matern52"``;
            ``ppgpc.kernels.make_kernel``) or object.
        model_options: passed to the model's ``prepare`` (e.g. ``epsilon``, ``tau``). A
            model whose ``prepare`` is random (``extras["seeded_prepare"]``: the k-means++
            start of the inducing inputs) gets ``seed`` unless these options give one.
        seed: integer seed; every random step derives its key from it.
        max_exact_points: refuse exact/MCMC GP inference above this N (None: no limit;
            sparse models such as ``"ilr_gp_sparse"`` and scalable methods such as
            ``"svi"`` ignore it).
        **method_options: the method's options (an unknown one raises a TypeError naming
            the valid ones). exact/map: ``hyperparameters``, ``num_draws``, ``max_iter``,
            ``tol``, ``optimizer`` (``"lbfgs"`` or ``"adam"``), ``learning_rate`` (Adam),
            ``progress_bar`` (Adam). nuts: ``form``, ``num_warmup``, ``num_samples``,
            ``num_chains``, ``hyperparameters``, ``sample_hyperparameters``, ``target_accept``,
            ``max_tree_depth``, ``dense_mass``, ``progress_bar``. svi (``ppgpc.infer.svi``):
            ``batch_size``, ``max_iter``, ``learning_rate``, ``optimizer``, ``schedule``,
            ``warmup_steps``, ``num_particles``, ``tol``, ``patience``, ``window``,
            ``num_draws``, ``progress_bar``, ``natural_gradient``, ``validation_data``,
            ``validation_draws``, ``restore_best``, ``validation_patience``.

    Returns:
        A ``FitResult`` that predicts class probabilities and exports to ArviZ.

    Example:
        >>> import numpy as np
        >>> from ppgpc.infer import fit
        >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
        >>> result = fit("ilr_gp", X, y, method="exact")
        >>> result.predict_proba(X[:3]).shape
        (3, 2)
    """
    spec = _resolve_spec(model)
    supported = supported_methods(spec)
    if method not in _RUNNERS:
        raise ValueError(
            f"unknown method {method!r}: model {spec.name!r} supports {list(supported)} "
            f"(the driver knows {list(_RUNNERS)})"
        )
    if method not in supported:
        raise ValueError(
            f"model {spec.name!r} does not support method {method!r}; it supports "
            f"{list(supported)}"
        )
    runner = _RUNNERS[method][0]
    opts = check_method_options(method, method_options)
    seed = check_seed(seed)
    max_exact_points = check_size_limit(max_exact_points)
    X = check_features(X)
    y, num_classes = check_integer_labels(y, X.shape[0], num_classes)
    if _size_limited(spec, method, opts, X.shape[0]):
        check_exact_size(X.shape[0], max_exact_points, spec.name,
                         spec.extras.get("sparse_alternative"))
    kernel = make_kernel(kernel)
    model_options = dict(model_options or {})
    if spec.extras.get("seeded_prepare", False):  # e.g. the k-means++ inducing inputs
        model_options.setdefault("seed", seed)
    data = spec.prepare(X, y, num_classes, **model_options)

    start = time.perf_counter()
    out = runner(spec, data, kernel, jax.random.PRNGKey(seed), opts)
    out["info"]["fit_seconds"] = time.perf_counter() - start
    settings = {
        "method": method,
        "kernel": getattr(kernel, "name", type(kernel).__name__),
        "kernel_ard": bool(getattr(kernel, "ard", False)),
        "num_classes": num_classes,
        "model_options": model_options,
        "method_options": {k: v for k, v in opts.items() if k != "hyperparameters"},
    }
    info = {k: (float(v) if isinstance(v, (np.floating, float)) and not math.isnan(v) else v)
            for k, v in out.pop("info").items()}
    return FitResult(spec=spec, kernel=kernel, data=data, method=method, settings=settings,
                     info=info, seed=int(seed), **out)

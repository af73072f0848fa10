"""One entry point, ``fit``, that runs any model with any method it supports.

The methods live in modules of their own, each declared there with the capability groups
of ``ppgpc.models.spec.ModelSpec`` it needs and listed in ``ppgpc.infer.methods.METHODS``:
``exact`` and ``map`` (``ppgpc.infer.exact``), ``nuts`` (``ppgpc.infer.nuts``), ``cavi``,
``gibbs`` and ``svi``. ``supported_methods(spec)`` is
derived from those requirements, so a model supports a method exactly when it fills the
groups the method uses; nothing here special-cases a model.

A model with a ``pad`` function (``ppgpc.models.spec.ModelSpec.pad``) is fitted on its data padded
to ``ppgpc.runtime.padding.bucket(N)`` rows, so that every N of a bucket runs the same compiled
programs; its draws at the training inputs are cut back to the N real rows, and the
result holds the unpadded data.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from ppgpc.gp.kernels import make_kernel
from ppgpc.infer.common import DEVICES_OPTION, resolve_spec
from ppgpc.infer.methods import (check_devices, check_method_options, get_method,
                                method_names, register_method, size_limited,
                                supported_methods, unsupported_reason)
from ppgpc.infer.convergence import ConvergenceReport, relative_jitter, warn_if_needed
from ppgpc.evaluation import metrics
from ppgpc.infer.records import RunOutput, SamplerInfo, ValidationInfo
from ppgpc.infer.results import FitResult
from ppgpc.runtime.blocks import num_shards
from ppgpc.runtime.padding import bucket, first_rows
from ppgpc.runtime.programs import training_signature, use_training_shape
from ppgpc.runtime.threads import blas_limited
from ppgpc.validation import (MAX_EXACT_POINTS, check_exact_size, check_features,
                              check_integer_labels, check_seed, check_size_limit)

__all__ = ["fit", "supported_methods", "register_method", "check_method_options", "METHODS"]

METHODS: tuple[str, ...]
"""Every registered method's name, a user's included, read when asked (module
``__getattr__``), so a method registered later is in it."""


def __getattr__(name: str):
    if name == "METHODS":  # every registered method, a user's included
        return method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    validation_data=None,
    warn: bool = True,
    **method_options,
) -> FitResult:
    """Fit a classifier with the given inference method.

    Args:
        model: a ``ModelSpec`` or a model name (``ppgpc.models.available``).
        X: (N, D) training inputs (already scaled as you want them).
        y: (N,) integer labels 0..C-1.
        method: one of ``supported_methods(model)``.
        num_classes: C (default: largest label + 1).
        kernel: a kernel name (``ppgpc.gp.kernels.make_kernel``) or object.
        model_options: passed to the model's ``prepare`` (a model whose ``prepare`` is
            random, ``ModelSpec.seeded_prepare``, gets ``seed`` unless these give one).
        seed: integer seed; every random step derives its key from it.
        max_exact_points: refuse exact/MCMC GP inference above this N (None: no limit;
            sparse models and scalable methods ignore it).
        validation_data: held-out ``(X_val, y_val)``, scaled as ``X``: a method with a
            held-out monitor of its own (``svi``) takes it; for any other the driver scores
            the result's mean NLL on it (``FitInfo.validation``).
        warn: raise a ``ppgpc.ConvergenceWarning`` when the fit's checks fail (False: the
            verdict is only in ``result.info.convergence``).
        **method_options: the fields of the method's ``Options`` (``OptimizerOptions``,
            ``NUTSOptions``, ``CAVIOptions``, ``GibbsOptions``, ``SVIOptions``; an unknown
            one raises a TypeError naming the valid ones), and ``devices`` for the methods
            that split sums over devices (``ppgpc.runtime.blocks.resolve_mesh``).

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
    spec = resolve_spec(model)
    runner = _supported(spec, method).runner
    monitored = _monitors(method)
    opts = check_method_options(method, _with_monitor(method_options, validation_data,
                                                      monitored))
    seed, max_exact_points = check_seed(seed), check_size_limit(max_exact_points)
    X = check_features(X)
    y, num_classes = check_integer_labels(y, X.shape[0], num_classes)
    held_out = None  # checked before the fit, scored after it
    if validation_data is not None and not monitored:
        held_out = _checked_held_out(validation_data, X.shape[1], num_classes)
    if size_limited(spec, method, opts, X.shape[0]):
        check_exact_size(X.shape[0], max_exact_points, spec.name, spec.sparse_alternative)
    mesh = check_devices(spec, method_options.get(DEVICES_OPTION), method)
    kernel, model_options = make_kernel(kernel), dict(model_options or {})
    if spec.seeded_prepare:  # e.g. the k-means++ inducing inputs
        model_options.setdefault("seed", seed)
    data = spec.prepare(X, y, num_classes, **model_options)
    if mesh is not None:  # the sums over points split over the mesh's data axis
        data = spec.place(data, mesh)
    result = _result(spec, method, runner, data, kernel, seed, opts, mesh,
                     {"num_classes": num_classes, "model_options": model_options})
    if held_out is not None:
        result = _scored(result, *held_out)
    if warn:
        warn_if_needed(result.info.convergence)
    return result


def _result(spec, method: str, runner, data, kernel, seed: int, opts, mesh,
            settings: dict) -> FitResult:
    """The ``FitResult`` of the runner on ``data`` (on the devices of ``mesh``, or padded
    where the model pads the fit): its draws, its ``FitInfo`` with the time, devices and
    ``ConvergenceReport``, and its settings (``settings`` and the method's)."""
    start = time.perf_counter()
    num_points = int(np.shape(data.X)[0])
    out = _run(spec, method, runner, data, kernel, seed, opts, num_points, padded=mesh is None)
    devices = None if mesh is None else num_shards(mesh)
    info = dataclasses.replace(out.info, fit_seconds=time.perf_counter() - start,
                               convergence=_assess(method, out), devices=devices)
    settings = {
        "method": method,
        "kernel": getattr(kernel, "name", type(kernel).__name__),
        "kernel_ard": bool(getattr(kernel, "ard", False)),
        **settings,
        "method_options": {k: v for k, v in opts.as_dict().items()
                           if k not in ("hyperparameters", "initial_hyperparameters")},
    }
    if devices is not None:  # as a count: a Mesh does not go into a save's JSON
        settings["method_options"][DEVICES_OPTION] = devices
    return FitResult(spec=spec, kernel=kernel, data=data, method=method, settings=settings,
                     info=info, seed=int(seed), hypers=out.hypers, latent=out.latent,
                     predictive_kind=out.predictive_kind, point_hypers=out.point_hypers,
                     sample_stats=dict(out.sample_stats), inducing=out.inducing)


def _supported(spec, method: str):
    """The ``Method`` ``method``, when ``spec`` supports it.

    Raises:
        ValueError: an unknown method, or one the model does not support (why, and what it
            supports).
    """
    supported = supported_methods(spec)
    if method not in method_names():
        raise ValueError(
            f"unknown method {method!r}: model {spec.name!r} supports {list(supported)} "
            f"(the driver knows {list(method_names())})")
    reason = unsupported_reason(spec, method)
    if reason is not None:
        raise ValueError(f"model {spec.name!r} does not support method {method!r}: {reason}; "
                         f"it supports {list(supported)}")
    return get_method(method)


def _run(spec, method: str, runner, data, kernel, seed: int, opts, num_points: int, *,
         padded: bool) -> RunOutput:
    """The runner's output on ``data`` (``num_points`` rows), padded to its bucket where the
    model pads this fit (fixed training shapes, ``ppgpc.runtime.padding``) and cut back to
    the real rows."""
    run_data = data
    if padded and spec.pads_fit(method, opts.as_dict()):
        run_data = spec.pad(data, bucket(num_points))
    # bounded compiled code over a long process (``ppgpc.runtime.programs``)
    use_training_shape(training_signature(
        (kernel, run_data), (spec.name, method, opts.structure())))
    with blas_limited():  # one BLAS thread during the run (``ppgpc.runtime.threads``)
        out = runner(spec, run_data, kernel, jax.random.PRNGKey(seed), opts)
    if not isinstance(out, RunOutput):
        raise TypeError(f"the runner of method {method!r} returned {type(out).__name__}, not "
                        "a ppgpc.infer.records.RunOutput")
    return out if run_data is data else _real_part(out, run_data, num_points)


def _with_monitor(method_options: dict, validation_data, monitored: bool) -> dict:
    """The method's options with ``validation_data`` for a method that monitors it."""
    if validation_data is None or not monitored:
        return method_options
    if method_options.get("validation_data") is not None:
        raise ValueError("give validation_data once: as fit's argument or as the method's "
                         "option, not both")
    return {**method_options, "validation_data": validation_data}


def _monitors(method: str) -> bool:
    """Whether ``method`` watches held-out data itself (its options have
    ``validation_data``)."""
    return "validation_data" in {f.name for f in dataclasses.fields(get_method(method).options)}


def _checked_held_out(validation_data, num_features: int, num_classes: int):
    """``validation_data`` = (X_val, y_val) as checked inputs (n, D) and labels (n,) in
    0..C-1.

    Raises:
        ValueError: not a pair, or inputs or labels the training ones would be refused for
            (named), or another number of columns than the training inputs.
    """
    try:
        X_val, y_val = validation_data
    except (TypeError, ValueError):
        raise ValueError("validation_data must be a pair (X_val, y_val), got "
                         f"{type(validation_data).__name__}") from None
    X_val = check_features(X_val, name="validation inputs", num_features=num_features)
    y_val, _ = check_integer_labels(y_val, X_val.shape[0], num_classes)
    return X_val, y_val


def _scored(result: FitResult, X_val, y_val) -> FitResult:
    """``result`` with its mean held-out NLL on (X_val, y_val) (``_checked_held_out``) in
    ``info.validation``, scored at the fit's last iteration."""
    nll = float(metrics.nll(result.predict_proba(X_val), y_val))
    step = result.info.iterations
    validation = ValidationInfo(nll=(nll,), steps=(step,), best_nll=nll, best_step=step,
                                size=int(len(y_val)))
    return dataclasses.replace(result, info=dataclasses.replace(result.info,
                                                                validation=validation))


def _real_part(out: RunOutput, run_data, num_points: int) -> RunOutput:
    """A padded fit's output cut to the real rows: the latent draws at the training inputs,
    and the inducing draws and inputs where the inducing inputs were padded with the rows
    (the prepared data's ``inducing_mask``; ``ppgpc.runtime.padding``)."""
    if out.latent is not None:
        out = out._replace(latent=first_rows(out.latent, num_points, axis=2))
    inducing_mask = run_data.inducing_mask
    if inducing_mask is not None and out.inducing is not None:
        M = int(np.sum(np.asarray(inducing_mask)))
        hypers = dict(out.hypers)
        hypers["inducing_inputs"] = first_rows(hypers["inducing_inputs"], M, axis=-2)
        out = out._replace(inducing=first_rows(out.inducing, M, axis=2), hypers=hypers)
    return out


def _assess(method: str, out: RunOutput) -> ConvergenceReport:
    """The ``ConvergenceReport`` of a runner's output (``ppgpc.infer.convergence``): the
    checks of the optimisations its record holds (``FitInfo.checks``), its largest jitter
    and, for a sampler, its chains (``SamplerInfo.check``)."""
    chains = None
    if get_method(method).sampler:
        draws = {"f": out.latent} if out.latent is not None else {"v": out.inducing}
        if not out.point_hypers:
            draws.update(out.hypers)
        sampler = out.info.sampler or SamplerInfo(  # a sampler of one's own without a record
            num_draws=0, stop_reason="", divergences=sum(
                int(np.sum(out.sample_stats[k])) for k in ("diverging", "hyper_diverging")
                if k in out.sample_stats))
        chains = sampler.check(draws, out.chains)
    return ConvergenceReport(method=method, chains=chains, optimizers=out.info.checks(),
                             max_jitter=relative_jitter(out.jitter, out.hypers))

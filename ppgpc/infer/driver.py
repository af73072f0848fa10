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
from ppgpc.infer.convergence import ConvergenceReport, chain_check, relative_jitter, warn_if_needed
from ppgpc.infer.records import RunOutput
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
    warn: bool = True,
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
            ``ppgpc.gp.kernels.make_kernel``) or object.
        model_options: passed to the model's ``prepare`` (e.g. ``epsilon``, ``tau``). A
            model whose ``prepare`` is random (``ModelSpec.seeded_prepare``: the k-means++
            start of the inducing inputs) gets ``seed`` unless these options give one.
        seed: integer seed; every random step derives its key from it.
        max_exact_points: refuse exact/MCMC GP inference above this N (None: no limit;
            sparse models such as ``"ilr_gp_sparse"`` and scalable methods such as
            ``"svi"`` ignore it).
        warn: raise a ``ppgpc.ConvergenceWarning`` when the fit's checks fail (False: the
            verdict is only in ``result.info.convergence``, for a caller that merges several
            fits' reports and warns once, as the estimators do).
        **method_options: the method's options (an unknown one raises a TypeError naming
            the valid ones). exact/map: ``hyperparameters``, ``initial_hyperparameters``
            (a warm start of the optimisation, by site name), ``num_draws``, ``max_iter``,
            ``tol``, ``optimizer`` (``"lbfgs"`` or ``"adam"``), ``learning_rate`` (Adam),
            ``progress_bar`` (iterations, objective and gradient on stderr once the fit has
            run a couple of seconds), ``devices`` (collapsed sparse models: None for one
            device, n for the first n of ``jax.devices()``, or a ``jax.sharding.Mesh`` with
            an axis ``"data"``; each device sums the bound over its share of the data).
            nuts: ``form``, ``num_warmup``, ``num_samples`` (the least draws per chain;
            by default the chains run until R-hat and ESS pass), ``max_samples`` (the
            most), ``num_chains``,
            ``hyperparameters``, ``sample_hyperparameters``, ``target_accept``,
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
    spec = resolve_spec(model)
    supported = supported_methods(spec)
    if method not in method_names():
        raise ValueError(
            f"unknown method {method!r}: model {spec.name!r} supports {list(supported)} "
            f"(the driver knows {list(method_names())})"
        )
    reason = unsupported_reason(spec, method)
    if reason is not None:
        raise ValueError(
            f"model {spec.name!r} does not support method {method!r}: {reason}; it supports "
            f"{list(supported)}"
        )
    runner = get_method(method).runner
    opts = check_method_options(method, method_options)
    seed = check_seed(seed)
    max_exact_points = check_size_limit(max_exact_points)
    X = check_features(X)
    y, num_classes = check_integer_labels(y, X.shape[0], num_classes)
    if size_limited(spec, method, opts, X.shape[0]):
        check_exact_size(X.shape[0], max_exact_points, spec.name, spec.sparse_alternative)
    devices = opts.pop(DEVICES_OPTION, None)
    mesh = check_devices(spec, devices, method)
    kernel = make_kernel(kernel)
    model_options = dict(model_options or {})
    if spec.seeded_prepare:  # e.g. the k-means++ inducing inputs
        model_options.setdefault("seed", seed)
    data = spec.prepare(X, y, num_classes, **model_options)
    if mesh is not None:  # the sums over points split over the mesh's data axis
        data = spec.place(data, mesh)

    num_points = X.shape[0]
    run_data = data
    # fixed training shapes (``ppgpc.runtime.padding``)
    if mesh is None and spec.pads_fit(method, opts):
        run_data = spec.pad(data, bucket(num_points))
    # bounded compiled code over a long process (``ppgpc.runtime.programs``)
    use_training_shape(training_signature(
        (kernel, run_data), (spec.name, method, sorted(opts.items(), key=lambda kv: kv[0]))))
    start = time.perf_counter()
    with blas_limited():  # one BLAS thread during the run (``ppgpc.runtime.threads``)
        out = runner(spec, run_data, kernel, jax.random.PRNGKey(seed), opts)
    if not isinstance(out, RunOutput):
        raise TypeError(f"the runner of method {method!r} returned {type(out).__name__}, not "
                        "a ppgpc.infer.records.RunOutput")
    if run_data is not data:
        out = _real_part(out, run_data, num_points)
    fit_seconds = time.perf_counter() - start
    report = _assess(method, out)
    settings = {
        "method": method,
        "kernel": getattr(kernel, "name", type(kernel).__name__),
        "kernel_ard": bool(getattr(kernel, "ard", False)),
        "num_classes": num_classes,
        "model_options": model_options,
        "method_options": {k: v for k, v in opts.items()
                           if k not in ("hyperparameters", "initial_hyperparameters")},
    }
    devices = None
    if mesh is not None:  # as a count: a Mesh does not go into a save's JSON
        settings["method_options"][DEVICES_OPTION] = devices = num_shards(mesh)
    info = dataclasses.replace(out.info, fit_seconds=fit_seconds, convergence=report,
                               devices=devices)
    result = FitResult(spec=spec, kernel=kernel, data=data, method=method, settings=settings,
                       info=info, seed=int(seed), hypers=out.hypers, latent=out.latent,
                       predictive_kind=out.predictive_kind, point_hypers=out.point_hypers,
                       sample_stats=dict(out.sample_stats), inducing=out.inducing)
    if warn:
        warn_if_needed(report)
    return result


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
    """The ``ConvergenceReport`` of a runner's output (``ppgpc.infer.convergence``): its
    optimisation stages, its largest jitter and, for a sampler, its chains."""
    jitter = relative_jitter(out.jitter, out.hypers)
    run = out.run  # a windowed sampler's WindowedRun (ppgpc.infer.mcmc)
    chains = None
    if get_method(method).sampler:
        draws = {"f": out.latent} if out.latent is not None else {"v": out.inducing}
        if not out.point_hypers:
            draws.update(out.hypers)
        stats = out.sample_stats or {}
        divergences = sum(int(np.sum(stats[k])) for k in ("diverging", "hyper_diverging")
                          if k in stats)
        if run is not None and run.check is not None:  # the same draws, checked last
            chains = dataclasses.replace(run.check, divergences=divergences,
                                         stop_reason=run.stop_reason,
                                         num_warmup=run.num_warmup)
        else:
            how = {} if run is None else {"stop_reason": run.stop_reason,
                                          "num_warmup": run.num_warmup}
            chains = chain_check(draws, divergences, **how)
    return ConvergenceReport(method=method, chains=chains, optimizers=tuple(out.optimizers),
                             max_jitter=jitter)

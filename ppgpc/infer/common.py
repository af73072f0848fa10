"""What the inference methods share: the method registry and the helpers every runner uses.

A method is a runner registered with ``register_method`` together with the capability
groups of ``ppgpc.models.spec.ModelSpec`` it needs and the options it accepts. A model supports a
method exactly when it fills one of the method's alternatives of groups (and does not list
the method in ``excluded_methods``), so no generic module special-cases a model; when it
does not, ``unsupported_reason`` names the group that is missing.

A runner is ``runner(spec, data, kernel, key, options) -> RunOutput``
(``ppgpc.infer.records``: the draws by site name, (chain, draw, ...), how they predict, a
typed ``FitInfo`` of what the run did, and what the convergence report reads); the driver
(``ppgpc.infer.fit``) checks the inputs, runs it and builds the ``FitResult``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from ppgpc.models import available as available_models, get_spec
from ppgpc.models.spec import CAPABILITIES, ModelSpec
from ppgpc.runtime.blocks import resolve_mesh
from ppgpc.runtime.programs import jit

__all__ = ["as_draws", "check_hyperparameters", "POSITIVE_HYPERS", "register_method",
           "Method", "get_method", "method_names", "supported_methods", "unsupported_reason",
           "check_method_options", "size_limited", "resolve_spec", "jitted", "DEVICES_OPTION",
           "device_methods", "check_devices"]


# ------------------------------------------------------------------ shared helpers
def as_draws(hypers: dict) -> dict:
    """Point hyperparameters (...) as (chain=1, draw=1, ...) float64 arrays."""
    return {k: jnp.asarray(v, dtype=jnp.float64)[None, None] for k, v in hypers.items()}


POSITIVE_HYPERS = ("kernel_", "noise_scale")
"""Prefixes of the hyperparameters that live on (0, inf): kernel variances and lengthscales,
noise scales (a GPD class mean or an inducing input may be any real)."""


def check_hyperparameters(spec: ModelSpec, data, kernel, given: dict) -> dict:
    """Given hyperparameters as float64 arrays of the model's shapes (a scalar broadcasts,
    e.g. one lengthscale for every input of an ARD kernel).

    Args:
        spec: the model's spec (its ``initial_hypers`` gives the names and shapes).
        data: the model's prepared data.
        kernel: the kernel object.
        given: hyperparameter values by site name.

    Returns:
        The values by site name, each of the shape ``spec.initial_hypers`` gives it.

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
        if k.startswith(POSITIVE_HYPERS) and not np.all(value > 0):
            raise ValueError(f"hyperparameter {k} must be positive, got {value}")
        out[k] = jnp.asarray(value)
    return out


@functools.lru_cache(maxsize=None)
def jitted(fn: Callable, static_argnames: tuple = ()) -> Callable:
    """A cached ``jax.jit`` of a model function (kernels are static pytrees already), so
    that one model function is compiled once per process and shape, not once per fit."""
    return jit(fn, static_argnames=static_argnames)


def resolve_spec(model) -> ModelSpec:
    """A ``ModelSpec`` as given, or the registered spec of a model name
    (``ppgpc.models.get_spec``)."""
    return model if isinstance(model, ModelSpec) else get_spec(model)


# ------------------------------------------------------------------ method registry
class Method(NamedTuple):
    """A registered method (``register_method``)."""

    name: str
    runner: Callable[..., dict]
    requires: tuple
    """Alternatives, each a tuple of capability group names that must all be filled."""
    defaults: dict
    check: Callable[[dict], dict]
    scalable: Any
    """False, True (never forms an N x N matrix) or ``(options, num_samples) -> bool``."""
    devices: Any = False
    """Whether the method takes the option ``devices`` (``DEVICES_OPTION``): False, True, or
    ``(options) -> str | None``, why these (checked) options cannot use it (None: they can)."""
    sampler: bool = False
    """An MCMC method: its draws are checked for R-hat and ESS (``ppgpc.infer.convergence``)."""


_METHODS: dict[str, Method] = {}


def _alternatives(requires) -> tuple:
    """``requires`` as a tuple of alternatives: one group name, one tuple of names, or a
    tuple of such tuples."""
    if isinstance(requires, str):
        requires = (requires,)
    requires = tuple(requires)
    if all(isinstance(r, str) for r in requires):
        requires = (requires,)
    out = tuple(tuple(alternative) for alternative in requires)
    for group in {g for alternative in out for g in alternative}:
        if group not in CAPABILITIES:
            raise ValueError(f"unknown capability {group!r}; the groups of a ModelSpec are "
                             f"{list(CAPABILITIES)}")
    if not out or not all(out):
        raise ValueError("a method requires at least one capability group")
    return out


def register_method(name: str, runner, requires, defaults: dict, *,
                    scalable=False, check=None, devices=False, sampler=False) -> None:
    """Teach the driver a method.

    Args:
        name: the method's name, e.g. ``"gibbs"``.
        runner: ``runner(spec, data, kernel, key, options) ->
            ppgpc.infer.records.RunOutput``.
        requires: the capability groups of ``ModelSpec`` the method needs: one name
            (``"svi"``), a tuple of names that must all be filled (``("gibbs",
            "latent")``), or a tuple of such alternatives, any one of which suffices
            (``(("conjugate",), ("latent",))`` for NUTS on either form).
        defaults: the method's options and their defaults (unknown options are refused).
        scalable: True if the method never forms an N x N matrix, so ``fit``'s
            ``max_exact_points`` does not apply to it (minibatch SVI); or a predicate
            ``(options, num_samples) -> bool`` for a method that is sparse under some
            options only (CAVI with ``num_inducing`` < N).
        check: ``check(options) -> options``, the method's settings checked (a ValueError
            naming the bad one) and normalised; ``fit`` calls it before it looks at the
            data, so a bad setting is refused before any JAX code runs.
        devices: the method runs a model's sums over points on the devices of a mesh when
            the model can (``ModelSpec.place``): it takes the option ``devices``
            (``DEVICES_OPTION``), which the driver applies before the runner starts. True,
            or ``(options) -> str | None`` for a method that can under some options only
            (the stochastic CAVI): why the checked options cannot, None when they can.
        sampler: an MCMC method, whose chains the driver checks for R-hat, ESS and
            divergences (``ppgpc.infer.convergence``).

    The runner may also return ``optimizers``, the ``OptimizerCheck`` of each optimisation
    stage it ran, and ``jitter``, the largest Cholesky jitter of the fitted model (absolute);
    the driver turns them into the fit's ``ConvergenceReport``.

    How ``ppgpc.infer.svi`` registers its method, when it is imported::

        register_method("svi", run_svi, "svi", SVI_OPTIONS, scalable=True)
    """
    _METHODS[name] = Method(name=name, runner=runner, requires=_alternatives(requires),
                            defaults=dict(defaults), check=check or dict,
                            scalable=scalable or False,
                            devices=devices if callable(devices) else bool(devices),
                            sampler=bool(sampler))


def method_names() -> tuple[str, ...]:
    """Every registered method, in the order of registration."""
    return tuple(_METHODS)


def get_method(name: str) -> Method:
    """The registered method ``name``.

    Raises:
        ValueError: no method of that name is registered (the known ones are named).
    """
    try:
        return _METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; the driver knows {list(_METHODS)}") \
            from None


def unsupported_reason(spec: ModelSpec, method: str) -> str | None:
    """Why ``spec`` does not support ``method`` (None when it does): the model excludes it,
    or the capability groups that are missing from the alternative closest to filled."""
    if method in spec.excluded_methods:
        return f"the model excludes it (excluded_methods={list(spec.excluded_methods)})"
    missing = [[g for g in alternative if not spec.has(g)]
               for alternative in get_method(method).requires]
    if any(not m for m in missing):
        return None
    fewest = min(missing, key=len)
    names = " and ".join(repr(g) for g in fewest)
    return f"it has no {names} capability (it has {list(spec.capabilities)})"


def supported_methods(model) -> tuple[str, ...]:
    """The methods a model supports: those whose required capability groups its spec fills,
    less any the spec opts out of in ``excluded_methods``.

    Args:
        model: a ``ModelSpec`` or a model name (``ppgpc.models.available()``).
    """
    spec = resolve_spec(model)
    return tuple(name for name in _METHODS if unsupported_reason(spec, name) is None)


def _with_options(method: str, defaults: dict, given: dict) -> dict:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"method {method!r} got unknown option(s) {unknown}; its options are "
            f"{sorted(defaults)}"
        )
    return {**defaults, **given}


DEVICES_OPTION = "devices"
"""The option of the methods registered with ``devices=True``: None (one device), an integer
n (the first n of ``jax.devices()``) or a ``jax.sharding.Mesh`` with an axis ``"data"``
(``ppgpc.runtime.blocks.resolve_mesh``)."""


def device_methods() -> tuple[str, ...]:
    """The methods that take the option ``devices``."""
    return tuple(name for name, m in _METHODS.items() if m.devices)


def _device_models(method: str) -> list[str]:
    """The registered models that support ``method`` and can place their data on a mesh."""
    return [name for name in available_models() if get_spec(name).place is not None
            and unsupported_reason(get_spec(name), method) is None]


def _who_can() -> str:
    """The device methods with the models that can use them, for refusals."""
    return "; ".join(f"{method}: {_device_models(method)}" for method in device_methods())


def check_method_options(method: str, options: dict) -> dict:
    """A method's options completed with its defaults and checked, as ``fit`` does before
    it looks at the data; for callers that run other work first (an estimator's smoothing
    search), so a bad setting is refused before that work rather than after it.

    Raises:
        ValueError: an unknown method, or a setting that is not what it should be (named),
            ``devices`` given to a method that cannot use it (the ones that can are named)
            or a ``devices`` value ``ppgpc.runtime.blocks.resolve_mesh`` refuses.
        TypeError: an option the method does not have (the valid ones are named).
    """
    entry = get_method(method)
    options = dict(options)
    devices = options.pop(DEVICES_OPTION, None)
    if devices is not None and not entry.devices:
        raise ValueError(
            f"method {method!r} cannot split its work over devices (devices={devices!r}); "
            f"the methods that can are {list(device_methods())}, with these models: "
            f"{_who_can()}")
    checked = entry.check(_with_options(method, entry.defaults, options))
    if entry.devices:
        resolve_mesh(devices)  # a bad value is refused here, before any work
        reason = entry.devices(checked) if callable(entry.devices) else None
        if devices is not None and reason is not None:
            raise ValueError(f"method {method!r} cannot split its work over devices "
                             f"(devices={devices!r}) with these options: {reason}")
        checked[DEVICES_OPTION] = devices
    return checked


def check_devices(spec: ModelSpec, devices, method: str | None = None):
    """The mesh ``devices`` asks for (``ppgpc.runtime.blocks.resolve_mesh``; None for one device),
    checked against the model: its ``ModelSpec.place`` splits the prepared data over it.

    Args:
        spec: the model's spec.
        devices: the option's value.
        method: the method it is for, to name the models that can run it on devices.

    Raises:
        ValueError: a model that cannot split its data (the ones that can are named), or a
            value ``resolve_mesh`` refuses.
    """
    mesh = resolve_mesh(devices)
    if mesh is not None and spec.place is None:
        able = (f"with method {method!r} are {_device_models(method)}"
                if method in device_methods() else f"are: {_who_can()}")
        raise ValueError(
            f"model {spec.name!r} cannot split its data over devices (devices={devices!r}); "
            f"the models that can {able}")
    return mesh


def size_limited(spec: ModelSpec, method: str, options: dict, num_samples: int) -> bool:
    """Whether ``fit`` applies ``max_exact_points``: not for a ``scalable`` model (e.g. the
    collapsed sparse bounds, whose cost is O(N M^2)), nor for a scalable method, nor for a
    method that these options make sparse."""
    if spec.scalable:
        return False
    scalable = get_method(method).scalable
    if callable(scalable):
        return not scalable(options, num_samples)
    return not scalable

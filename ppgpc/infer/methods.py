"""The driver's methods, declared in one table (``METHODS``), and the questions asked of it.

Each method module declares its method as a constant (``ppgpc.infer.common.method``: the
runner, the capability groups of ``ppgpc.models.spec.ModelSpec`` it needs, its options and
their check); ``METHODS`` lists them, in this order: ``exact`` and ``map``
(``ppgpc.infer.exact``), ``nuts``, ``cavi``, ``gibbs``, ``svi``. A model supports a method
exactly when it fills one of the method's alternatives of groups (and does not list the
method in ``excluded_methods``), so no generic module special-cases a model; when it does
not, ``unsupported_reason`` names the group that is missing. ``register_method`` adds a
method of one's own to the table.
"""

from __future__ import annotations

from ppgpc.infer import cavi, exact, gibbs, nuts, svi
from ppgpc.infer.common import DEVICES_OPTION, Method, Options, method, resolve_spec
from ppgpc.models import available as available_models, get_spec
from ppgpc.models.spec import ModelSpec
from ppgpc.runtime.blocks import resolve_mesh

__all__ = ["METHODS", "register_method", "method_names", "get_method", "unsupported_reason",
           "supported_methods", "device_methods", "check_method_options", "check_devices",
           "size_limited"]

METHODS: dict[str, Method] = {
    m.name: m for m in (exact.EXACT_METHOD, exact.MAP_METHOD, nuts.NUTS_METHOD,
                        cavi.CAVI_METHOD, gibbs.GIBBS_METHOD, svi.SVI_METHOD)}
"""Every method the driver runs, by name."""


def register_method(name: str, runner, requires, options, **flags) -> Method:
    """Add a method of one's own to ``METHODS`` (or replace one of that name); the
    arguments are ``ppgpc.infer.common.method``'s (``options`` an ``Options`` class or a
    dict of defaults). Returns the method."""
    METHODS[name] = entry = method(name, runner, requires, options, **flags)
    return entry


def method_names() -> tuple[str, ...]:
    """Every method of ``METHODS``, in its order."""
    return tuple(METHODS)


def get_method(name: str) -> Method:
    """The method ``name`` of ``METHODS``.

    Raises:
        ValueError: no method of that name (the known ones are named).
    """
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; the driver knows {list(METHODS)}") \
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
    return tuple(name for name in METHODS if unsupported_reason(spec, name) is None)


def device_methods() -> tuple[str, ...]:
    """The methods that take the option ``devices``."""
    return tuple(name for name, m in METHODS.items() if m.devices)


def _device_models(method: str) -> list[str]:
    """The registered models that support ``method`` and can place their data on a mesh."""
    return [name for name in available_models() if get_spec(name).place is not None
            and unsupported_reason(get_spec(name), method) is None]


def _who_can() -> str:
    """The device methods with the models that can use them, for refusals."""
    return "; ".join(f"{method}: {_device_models(method)}" for method in device_methods())


def check_method_options(method: str, options: dict) -> Options:
    """A method's options (its ``Options``, the option ``devices`` apart) completed with
    their defaults and checked, as ``fit`` does before it looks at the data; for callers
    that run other work first (an estimator's smoothing search), so a bad setting is
    refused before that work rather than after it.

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
    checked = entry.options.from_given(method, options).checked()
    if entry.devices:
        resolve_mesh(devices)  # a bad value is refused here, before any work
        reason = entry.devices(checked) if callable(entry.devices) else None
        if devices is not None and reason is not None:
            raise ValueError(f"method {method!r} cannot split its work over devices "
                             f"(devices={devices!r}) with these options: {reason}")
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


def size_limited(spec: ModelSpec, method: str, options: Options, num_samples: int) -> bool:
    """Whether ``fit`` applies ``max_exact_points``: not for a ``scalable`` model (e.g. the
    collapsed sparse bounds, whose cost is O(N M^2)), nor for a scalable method, nor for a
    method that these options make sparse."""
    if spec.scalable:
        return False
    scalable = get_method(method).scalable
    if callable(scalable):
        return not scalable(options, num_samples)
    return not scalable

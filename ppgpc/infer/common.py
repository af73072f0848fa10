"""What the inference methods share: the ``Method`` record and the helpers every runner uses.

A method (``method``) is a runner together with the capability groups of
``ppgpc.models.spec.ModelSpec`` it needs and the options it accepts; each method module
declares its own, and ``ppgpc.infer.methods.METHODS`` lists them.

A runner is ``runner(spec, data, kernel, key, options) -> RunOutput``
(``ppgpc.infer.records``: the draws by site name, (chain, draw, ...), how they predict, a
typed ``FitInfo`` of what the run did, and what the convergence report reads); the driver
(``ppgpc.infer.fit``) checks the inputs, runs it and builds the ``FitResult``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, ClassVar, NamedTuple

import jax.numpy as jnp
import numpy as np

from ppgpc.models import get_spec
from ppgpc.models.spec import CAPABILITIES, ModelSpec
from ppgpc.runtime.programs import jit
from ppgpc.validation import check_options

__all__ = ["as_draws", "check_hyperparameters", "POSITIVE_HYPERS", "method", "Method",
           "Options", "options_type", "resolve_spec", "jitted", "DEVICES_OPTION"]


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
@dataclasses.dataclass(frozen=True)
class Options:
    """A method's options: a frozen dataclass whose fields are the options, with their
    defaults (as NumPyro's ``NUTS(...)`` and optax's constructors take typed keywords).
    ``ppgpc.infer.fit`` builds one from its keywords (``from_given``) and checks it once
    (``checked``); the runner reads its fields.

    A subclass names its fields' kinds in ``COUNTS`` (integers >= 1), ``NON_NEGATIVE``
    (integers >= 0), ``POSITIVE`` (finite numbers > 0), ``FLAGS`` (True or False) and
    ``OPTIONAL`` (those of them that may be None; ``ppgpc.validation.check_options``), and
    overrides ``extra_checks`` for what those do not cover. ``VALUES`` names the fields that
    are values of the compiled programs (arguments, or used on the host), not their
    structure: a fit that changes only those runs the programs of the fit before
    (``structure``).
    """

    COUNTS: ClassVar[tuple] = ()
    NON_NEGATIVE: ClassVar[tuple] = ()
    POSITIVE: ClassVar[tuple] = ()
    FLAGS: ClassVar[tuple] = ()
    OPTIONAL: ClassVar[tuple] = ()
    VALUES: ClassVar[tuple] = ("progress_bar", "hyperparameters", "initial_hyperparameters")

    @classmethod
    def from_given(cls, method: str, given: dict) -> "Options":
        """The options ``given`` by name, the others at their defaults.

        Raises:
            TypeError: an option the method does not have (the valid ones are named).
        """
        names = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"method {method!r} got unknown option(s) {unknown}; its options "
                            f"are {names}")
        return cls(**given)

    def as_dict(self) -> dict:
        """The options by name (a save's ``method_options``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def structure(self) -> tuple:
        """The ``(name, value)`` pairs that shape the compiled programs (every field but
        ``VALUES``): with the data's shapes, the fit's training signature
        (``ppgpc.runtime.programs.training_signature``)."""
        return tuple((k, v) for k, v in self.as_dict().items() if k not in self.VALUES)

    def replace(self, **changes) -> "Options":
        return dataclasses.replace(self, **changes)

    def checked(self) -> "Options":
        """These options with every field checked and normalised (a ValueError names the
        first that is not what it should be)."""
        out = check_options(self.as_dict(), counts=self.COUNTS,
                            non_negative=self.NON_NEGATIVE, positive=self.POSITIVE,
                            flags=self.FLAGS, optional=self.OPTIONAL)
        return type(self)(**out).extra_checks()

    def extra_checks(self) -> "Options":
        """What the fields' kinds do not cover (a subclass's own checks): these options,
        checked and normalised further."""
        return self


def options_type(name: str, defaults: dict) -> type:
    """An ``Options`` class with fields ``defaults`` (a method a user declares with a dict
    of defaults)."""
    def field(value):
        if isinstance(value, (dict, list, set)):
            return dataclasses.field(default_factory=lambda: type(value)(value))
        return dataclasses.field(default=value)

    return dataclasses.make_dataclass(f"{name}_options", [
        (key, Any, field(value)) for key, value in defaults.items()],
        bases=(Options,), frozen=True)


class Method(NamedTuple):
    """A method of the driver (``method``; ``ppgpc.infer.methods.METHODS``)."""

    name: str
    runner: Callable[..., Any]
    """``runner(spec, data, kernel, key, options: Options) -> RunOutput``."""
    requires: tuple
    """Alternatives, each a tuple of capability group names that must all be filled."""
    options: type
    """Its ``Options`` class."""
    scalable: Any
    """False, True (never forms an N x N matrix) or ``(options, num_samples) -> bool``."""
    devices: Any = False
    """Whether the method takes the option ``devices`` (``DEVICES_OPTION``): False, True, or
    ``(options) -> str | None``, why these (checked) options cannot use it (None: they can)."""
    sampler: bool = False
    """An MCMC method: its draws are checked for R-hat and ESS (``ppgpc.infer.convergence``)."""


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


def method(name: str, runner, requires, options, *,
           scalable=False, devices=False, sampler=False) -> Method:
    """A method the driver can run (listed in ``ppgpc.infer.methods.METHODS``, or added
    there with ``ppgpc.infer.methods.register_method``).

    Args:
        name: the method's name, e.g. ``"gibbs"``.
        runner: ``runner(spec, data, kernel, key, options) ->
            ppgpc.infer.records.RunOutput``, ``options`` an instance of ``options``.
        requires: the capability groups of ``ModelSpec`` the method needs: one name
            (``"svi"``), a tuple of names that must all be filled (``("gibbs",
            "latent")``), or a tuple of such alternatives, any one of which suffices
            (``(("conjugate",), ("latent",))`` for NUTS on either form).
        options: the method's ``Options`` class (unknown options are refused, and its
            ``checked`` runs before the data is looked at, so a bad setting is refused
            before any JAX code runs), or a dict of the options' defaults.
        scalable: True if the method never forms an N x N matrix, so ``fit``'s
            ``max_exact_points`` does not apply to it (minibatch SVI); or a predicate
            ``(options, num_samples) -> bool`` for a method that is sparse under some
            options only (CAVI with ``num_inducing`` < N).
        devices: the method runs a model's sums over points on the devices of a mesh when
            the model can (``ModelSpec.place``): it takes the option ``devices``
            (``DEVICES_OPTION``), which the driver applies before the runner starts. True,
            or ``(options) -> str | None`` for a method that can under some options only
            (the stochastic CAVI): why the checked options cannot, None when they can.
        sampler: an MCMC method, whose chains the driver checks for R-hat, ESS and
            divergences (``ppgpc.infer.convergence``).

    How ``ppgpc.infer.svi`` declares its method::

        SVI_METHOD = method("svi", run_svi, "svi", SVIOptions, scalable=True, devices=True)
    """
    if isinstance(options, dict):
        options = options_type(name, options)
    if not (isinstance(options, type) and issubclass(options, Options)):
        raise TypeError(f"method {name!r}: options must be an Options class or a dict of "
                        f"defaults, got {options!r}")
    return Method(name=name, runner=runner, requires=_alternatives(requires), options=options,
                  scalable=scalable or False,
                  devices=devices if callable(devices) else bool(devices),
                  sampler=bool(sampler))


DEVICES_OPTION = "devices"
"""The option of the methods registered with ``devices=True``: None (one device), an integer
n (the first n of ``jax.devices()``) or a ``jax.sharding.Mesh`` with an axis ``"data"``
(``ppgpc.runtime.blocks.resolve_mesh``)."""

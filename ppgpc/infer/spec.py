"""The contract between a model module (``ppgpc.models.*``) and the inference driver.

A model module exports one ``ModelSpec``: plain functions, no state. The driver decides which
methods a model supports from which fields are filled in (see ``METHOD_REQUIREMENTS`` in
``ppgpc.infer.driver``), so adding a method to a model means adding a function here, never a
special case in the driver.

Conventions shared by every field:

* ``data`` is the model's prepared training data, a NamedTuple with at least ``X`` (N, D),
  ``y`` (N,) integer labels in 0..C-1 and ``num_classes``.
* ``hypers`` is a dict keyed by NumPyro site name (``kernel_variance``, ``kernel_lengthscale``,
  and any model-specific ones such as ``mean``).
* Latent values have a trailing axis of size L = ``num_latent(C)`` (C - 1 for ILR-GP, C for
  GPD and the softmax models).

The conjugate models (ILR-GP, GPD) build their specs with ``conjugate_spec`` and, for the
collapsed sparse variant, ``collapsed_sparse_spec``: each module defines its functions under
the names of the fields they fill, and states only its name and description.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional

__all__ = ["ModelSpec", "CONJUGATE_FIELDS", "SPARSE_FIELDS", "conjugate_spec",
           "collapsed_sparse_spec"]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Functions a classifier module provides to the driver.

    Required:
        name: short identifier, e.g. ``"ilr_gp"``.
        prepare: ``(X, y, num_classes, **options) -> data``: targets, noise and the like.
        num_latent: ``C -> L``.
        log_link: ``f (..., L) -> log p(y = c | f) (..., C)``, the categorical likelihood of the
            classifier (used for predictions and the pointwise log-likelihood export).
        initial_hypers: ``(data, kernel) -> hypers``: starting values for optimisation/NUTS.

    Conjugate models (methods ``exact``, ``map`` and ``nuts`` with ``form="collapsed"``):
        collapsed_model: NumPyro model ``(data, kernel)`` with the latent GP integrated out:
            hyperparameter sites plus the observed Gaussian target site.
        condition: ``(data, kernel, hypers) -> posterior``: the exact latent posterior.
        predict: ``(data, kernel, hypers, posterior, Xs) -> (mean (n, L), var (n, L))``.
        sample_train: ``(key, data, kernel, hypers, posterior, S) -> (S, N, L)`` joint draws of
            the latent at the training inputs.
        loo_predictive: ``(data, kernel, hypers, posterior) -> (mean (N, L), var (N, L))``:
            the closed-form leave-one-out predictive of the latent at each training input
            with the hyperparameters held fixed (``ppgpc.gp.loo_predictive``), which the
            estimators use to choose a smoothing level without refitting.
        pseudo_log_lik: ``(data, hypers, f (..., N, L)) -> (..., N)``: log p(t_i | f_i), the
            Gaussian pseudo-likelihood term of point i that the posterior was conditioned on
            (``sum_l log N(t_il | f_il, noise_il)``), for PSIS-LOO's importance ratios
            (``ppgpc.infer.elpd.psis_loo``).

    Latent-form MCMC (``nuts`` with ``form="latent"``):
        latent_model: NumPyro model ``(data, kernel, fixed_hypers=None)`` sampling the latent
            explicitly; it must record the latent at the training inputs as the deterministic
            site ``"f"`` of shape (N, L).
        latent_conditional: ``(data, kernel, hypers, f, Xs) -> (mean (n, L), var (n, L))``:
            the prior GP conditional of the latent at Xs given its values f (N, L).

    Other methods (Gibbs, CAVI, SVI) take what they need from ``extras``, a mapping from a
    name to a function or object; a method registered with ``register_method`` names its
    requirements as ``"extras.<name>"``. ``extras["excluded_methods"]`` (a tuple of method
    names) opts out of methods the filled fields would otherwise allow (the collapsed sparse
    models provide the conjugate functions but must not run NUTS over inducing inputs).
    ``extras["scalable"]`` exempts every method of the model from the driver's
    ``max_exact_points`` (the model never forms an N x N matrix), and
    ``extras["sparse_alternative"]`` names what that limit's error suggests instead.
    ``extras["seeded_prepare"]`` says that ``prepare`` takes a ``seed`` (for its k-means++
    inducing inputs), which the driver fills from its own.
    """

    name: str
    prepare: Callable[..., Any]
    num_latent: Callable[[int], int]
    log_link: Callable[[Any], Any]
    initial_hypers: Callable[..., dict]
    collapsed_model: Optional[Callable[..., None]] = None
    condition: Optional[Callable[..., Any]] = None
    predict: Optional[Callable[..., Any]] = None
    sample_train: Optional[Callable[..., Any]] = None
    loo_predictive: Optional[Callable[..., Any]] = None
    pseudo_log_lik: Optional[Callable[..., Any]] = None
    latent_model: Optional[Callable[..., None]] = None
    latent_conditional: Optional[Callable[..., Any]] = None
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""

    def provides(self, field: str) -> bool:
        """Whether the spec fills ``field``: an attribute name, or ``"extras.<key>"``."""
        if field.startswith("extras."):
            return field[len("extras."):] in self.extras
        return getattr(self, field, None) is not None

    def __hash__(self) -> int:  # extras is a dict; specs are hashed by identity of content
        return hash((self.name, self.prepare, self.log_link, tuple(sorted(self.extras))))


CONJUGATE_FIELDS = ("prepare", "num_latent", "log_link", "initial_hypers", "collapsed_model",
                    "condition", "predict", "sample_train", "loo_predictive", "pseudo_log_lik",
                    "latent_model", "latent_conditional")
"""The function fields of a conjugate model's spec: every method, ``nuts`` in both forms."""

SPARSE_FIELDS = ("prepare", "initial_hypers", "collapsed_model", "condition", "predict",
                 "sample_train")
"""The function fields a collapsed sparse variant defines itself (as ``sparse_<field>``)."""


def conjugate_spec(name: str, description: str, functions: Mapping[str, Any],
                   extras: Mapping[str, Any] | None = None) -> ModelSpec:
    """The spec of a conjugate model, which runs ``exact``, ``map`` and ``nuts``.

    Args:
        name: the model name, e.g. ``"ilr_gp"``.
        description: one line for the model registry.
        functions: the model module's namespace (its ``globals()``), holding one function
            for each field in ``CONJUGATE_FIELDS`` under the field's name.
        extras: further ``extras``, e.g. ``"sparse_alternative"``: what the driver's
            too-large-for-exact-inference error suggests instead.
    """
    return ModelSpec(name=name, description=description, extras=dict(extras or {}),
                     **{field: functions[field] for field in CONJUGATE_FIELDS})


def collapsed_sparse_spec(exact: ModelSpec, name: str, description: str,
                          functions: Mapping[str, Any]) -> ModelSpec:
    """The spec of the collapsed sparse variant (Titsias's bound) of a conjugate model.

    The variant keeps ``exact``'s ``num_latent``, ``log_link`` and ``pseudo_log_lik`` (on
    the dense data inside its ``SparseData``), has no latent form, and
    runs ``exact`` and ``map`` only: ``extras["excluded_methods"]`` refuses NUTS over the
    inducing inputs. Its cost is O(N M^2), so ``extras["scalable"]`` exempts it from the
    driver's ``max_exact_points``; ``extras["seeded_prepare"]``: the driver's seed picks the
    k-means++ start.

    Args:
        exact: the conjugate model's spec (``conjugate_spec``).
        name: the variant's model name, e.g. ``"ilr_gp_sparse"``.
        description: one line for the model registry.
        functions: the model module's namespace, holding ``sparse_<field>`` for each field
            in ``SPARSE_FIELDS``, and optionally ``sparse_inducing_predictive(data, kernel,
            hypers, posterior) -> (mean, var)``, each (M, L): latent l's predictive at its
            inducing inputs (the shared ones, or its own when they differ between
            latents), without observation noise (``extras["inducing_predictive"]``, used
            by the ArviZ export for ``u``).
    """
    extras = {"excluded_methods": ("nuts",), "scalable": True, "seeded_prepare": True}
    if "sparse_inducing_predictive" in functions:
        extras["inducing_predictive"] = functions["sparse_inducing_predictive"]
    return ModelSpec(name=name, description=description, num_latent=exact.num_latent,
                     log_link=exact.log_link, extras=extras,
                     pseudo_log_lik=functools.partial(_on_base_data, exact.pseudo_log_lik),
                     **{field: functions["sparse_" + field] for field in SPARSE_FIELDS})


def _on_base_data(function, data, *args):
    """``function`` applied to the dense model's data inside a ``SparseData``."""
    return function(data.base, *args)

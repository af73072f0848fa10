"""The contract between a model module (``ppgpc.models.*``) and the inference methods.

A model module exports one ``ModelSpec``: plain functions, no state. Besides the five
functions every model has (``prepare``, ``num_latent``, ``log_link``, ``initial_hypers``
and its ``name``), the spec holds optional *capability groups*, each a small NamedTuple of
functions that one family of inference methods needs:

=============  ====================================================================
group          used by
=============  ====================================================================
``conjugate``  ``exact``, ``map``, ``nuts`` (collapsed form), closed-form and PSIS LOO
``latent``     ``nuts`` (latent form), ``gibbs`` and ``cavi`` predictions
``gibbs``      ``gibbs``
``cavi``       ``cavi``
``svi``        ``svi``
``inducing``   fits held as whitened inducing draws (predictive kind ``"inducing"``),
               and the ArviZ export's ``u`` of sparse fits
=============  ====================================================================

A method states the groups it needs (``ppgpc.infer.register_method``), so a model supports
a method exactly when it fills those groups, and the driver's refusal names the group that
is missing. Adding a method to a model means filling a group here, never a special case in
a generic module.

Conventions shared by every function:

* ``data`` is the model's prepared training data, a pytree (a NamedTuple or a registered
  dataclass) that is a ``TrainingData``: ``X`` (N, D), ``y`` (N,) integer labels in 0..C-1,
  ``num_classes``, the row ``mask`` of padded data and the ``inducing_mask`` of padded
  inducing inputs (each None where there is none). That is all the driver reads of it;
  the rest is the model's own.
* ``hypers`` is a dict keyed by NumPyro site name (``kernel_variance``, ``kernel_lengthscale``,
  and any model-specific ones such as ``mean``).
* Latent values have a trailing axis of size L = ``num_latent(C)`` (C - 1 for ILR-GP, C for
  GPD and the softmax models).

The conjugate models (ILR-GP, GPD) build their specs with ``conjugate_spec`` and, for the
collapsed sparse variant, ``collapsed_sparse_spec``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Optional, Protocol, runtime_checkable

from ppgpc.gp import sparse

__all__ = ["ModelSpec", "TrainingData", "Conjugate", "Latent", "HyperFit", "Gibbs", "CAVI",
           "SVI", "Inducing",
           "CAPABILITIES", "conjugate_spec", "collapsed_sparse_spec",
           "JITTER_SITE", "record_jitter"]

@runtime_checkable
class TrainingData(Protocol):
    """What the driver reads of every model's prepared data (``ModelSpec.prepare``).

    Attributes:
        X: (N, D) inputs (N padded rows included).
        y: (N,) integer labels in 0..C-1.
        num_classes: C.
        mask: (N,) 1.0 for a real row, 0.0 for a padded one (``ModelSpec.pad``); None
            where the data are not padded.
        inducing_mask: (M,) the same for inducing inputs padded with the rows (the SVGP
            with M = N); None where the model has no such inputs or they are not padded.
    """

    @property
    def X(self) -> Any: ...

    @property
    def y(self) -> Any: ...

    @property
    def num_classes(self) -> int: ...

    @property
    def mask(self) -> Any: ...

    @property
    def inducing_mask(self) -> Any: ...


JITTER_SITE = "cholesky_jitter"
"""The deterministic site in which a latent model records the Cholesky jitter its prior
covariance needed (``record_jitter``); the driver reads it from NUTS's draws and reports its
largest value (``ppgpc.infer.convergence``), and keeps it out of the posterior."""


def record_jitter(chol) -> None:
    """Record the jitter of a ``ppgpc.gp.linalg.Cholesky`` (its largest entry, for a batch of
    factors) as the deterministic site ``JITTER_SITE``."""
    import jax.numpy as jnp
    import numpyro

    numpyro.deterministic(JITTER_SITE, jnp.max(chol.jitter))



class Conjugate(NamedTuple):
    """A model whose latent posterior is Gaussian given the hyperparameters.

    Attributes:
        collapsed_model: NumPyro model ``(data, kernel)`` with the latent GP integrated out:
            hyperparameter sites plus the observed Gaussian target site (or, for a collapsed
            sparse bound, a factor).
        condition: ``(data, kernel, hypers) -> posterior``: the exact latent posterior.
        predict: ``(data, kernel, hypers, posterior, Xs) -> (mean (n, L), var (n, L))``.
        sample_train: ``(key, data, kernel, hypers, posterior, S) -> (S, N, L)`` joint draws
            of the latent at the training inputs; None for a model whose point fits are
            held as whitened inducing draws (``Inducing.sample_inducing``: the collapsed
            sparse variants).
        loo_predictive: optional ``(data, kernel, hypers, posterior) -> (mean (N, L), var
            (N, L))``: the closed-form leave-one-out predictive of the latent at each
            training input with the hyperparameters held fixed (``ppgpc.gp.loo_predictive``).
        pseudo_log_lik: optional ``(data, hypers, f (..., N, L)) -> (..., N)``: log p(t_i |
            f_i), the Gaussian pseudo-likelihood term of point i the posterior was
            conditioned on, for PSIS-LOO's importance ratios (``ppgpc.infer.psis_loo``).
    """

    collapsed_model: Callable[..., None]
    condition: Callable[..., Any]
    predict: Callable[..., Any]
    sample_train: Optional[Callable[..., Any]] = None
    loo_predictive: Optional[Callable[..., Any]] = None
    pseudo_log_lik: Optional[Callable[..., Any]] = None


class Latent(NamedTuple):
    """A model written with its latent sampled explicitly.

    Attributes:
        latent_model: NumPyro model ``(data, kernel, fixed_hypers=None)``; it records the
            latent at the training inputs as the deterministic site ``"f"`` (N, L).
        latent_conditional: ``(data, kernel, hypers, f, Xs) -> (mean (n, L), var (n, L))``:
            the prior GP conditional of the latent at Xs given its values f (N, L) at the
            training inputs.
        prior_factor: optional ``(data, kernel, hypers) -> ppgpc.gp.linalg.Cholesky``: the
            Cholesky factor of the latent's prior covariance at the training inputs, which
            ``latent_model(data, kernel, fixed_hypers, factor)`` then takes instead of
            computing it, so that a sampler with fixed hyperparameters factorises once per
            run instead of once per gradient.
        fit_hypers: optional ``(data, kernel, *, progress) -> HyperFit``: the point
            hyperparameters NUTS on this form holds fixed when none are given, for a model
            without a collapsed form to fit them by type-II ML (the logistic-softmax GP's
            CAVI fit).
    """

    latent_model: Callable[..., None]
    latent_conditional: Callable[..., Any]
    prior_factor: Optional[Callable[..., Any]] = None
    fit_hypers: Optional[Callable[..., Any]] = None


class HyperFit(NamedTuple):
    """Point hyperparameters a model fitted itself by an iterative objective (the CAVI fit
    that ``Gibbs.fit_hypers`` and ``Gibbs.fit_inducing`` return), and how that went."""

    values: dict
    """Hyperparameter values by site name (with ``inducing_inputs`` (M, D) for
    ``fit_inducing``)."""
    how: str
    """How they were obtained, e.g. ``"CAVI ELBO (type-II MAP)"``."""
    elbo: float
    """The objective's final value."""
    iterations: int
    converged: bool
    relative_change: float | None
    """Relative change of the objective over the last iteration (or window); None after a
    single value."""
    stochastic: bool = False
    """Fitted on minibatches."""


class Gibbs(NamedTuple):
    """A model with its own Gibbs sampler (``ppgpc.infer.gibbs``).

    Attributes:
        gibbs_kernel: ``(data, kernel, hypers, **kernel_options) -> (init, step)``: a pure
            pair ``init(key) -> state``, ``step(key, state) -> (state, info)`` over
            NamedTuples whose state has a field ``f`` (N, L).
        fit_hypers: ``(data, kernel) -> HyperFit``: the point hyperparameters the sweep
            runs with when none are given.
        inducing_kernel: ``(data, kernel, hypers) -> (init, step)``, a model with an
            inducing-point sampler (method option ``num_inducing``): ``hypers`` holds the
            kernel's and ``inducing_inputs`` (M, D), all fixed; the state has a field ``v``
            (M, L) of whitened inducing values, stored per draw and predicted through the
            ``inducing`` group (predictive kind ``"inducing"``).
        fit_inducing: ``(data, kernel, num_inducing, *, key, progress) -> HyperFit``:
            the point (kernel hyperparameters and ``inducing_inputs``) that sampler runs
            with when no hyperparameters are given.
    """

    gibbs_kernel: Callable[..., Any]
    fit_hypers: Callable[..., Any]
    inducing_kernel: Optional[Callable[..., Any]] = None
    fit_inducing: Optional[Callable[..., Any]] = None


class CAVI(NamedTuple):
    """A model with coordinate-ascent variational inference (``ppgpc.infer.cavi``).

    Attributes:
        cavi: ``(data, kernel, hypers, **options) -> result`` with fields ``hypers``,
            ``inducing`` (the inducing inputs Z), ``sparse``, ``elbo`` and ``converged``.
        sample_q_f: ``(key, data, kernel, result, S) -> (S, N, L)``: joint draws of q's
            latent at the training inputs (the full version, Z = X).
        sample_q_v: ``(key, result, S) -> (S, M, L)``: draws of q's whitened inducing
            values (the sparse version, M < N), predicted through ``Inducing.inducing_latent``.
    """

    cavi: Callable[..., Any]
    sample_q_f: Callable[..., Any]
    sample_q_v: Callable[..., Any]


class SVI(NamedTuple):
    """A model fitted by stochastic variational inference (``ppgpc.infer.svi``).

    Attributes:
        model: NumPyro model ``(data, kernel, batch_size)``; minibatching is its own
            (``numpyro.plate(..., subsample_size=B)``).
        guide: the NumPyro guide, called as the model.
        result: ``(key, params, data, kernel, num_draws) -> dict``: the optimised parameters
            (constrained, by site name) as ``FitResult`` fields: ``hypers`` (point values),
            ``predictive_kind`` and ``inducing`` (S, M, L) or ``latent`` (S, N, L) draws.
        validation_log_predictive: optional ``(key, params, data, kernel, X, y, S) -> (n,)``
            held-out log predictive of each point, for the validation monitor.
        gaussian_variational_sites: pairs ``(mean site, lower-Cholesky scale site)`` of the
            guide's Gaussian factors, which ``natural_gradient`` steps; empty for none.
        includes_hyper_prior: optional ``data -> bool``: whether the objective adds the
            hyperparameters' log prior (type-II MAP rather than ML, as ``info`` reports).
        default_options: optional ``(num_points, batch_size) -> dict``: the SVI options
            (``batch_size``, ``max_iter``, ``learning_rate``) the model runs with on N real
            training rows where a fit gives none (``batch_size`` is the given one or None),
            in place of the driver's generic defaults; NUTS's fit of the hyperparameters
            of a model without a collapsed form uses them too (``ppgpc.infer.nuts``).
    """

    model: Callable[..., None]
    guide: Callable[..., None]
    result: Callable[..., dict]
    validation_log_predictive: Optional[Callable[..., Any]] = None
    gaussian_variational_sites: tuple = ()
    includes_hyper_prior: Optional[Callable[[Any], bool]] = None
    default_options: Optional[Callable[[int, Optional[int]], dict]] = None


class Inducing(NamedTuple):
    """Functions of a model with inducing inputs (all optional).

    Attributes:
        inducing_latent: ``(data, kernel, hypers, v (S, M, L), Xs (n, D), eps (S, n, L)) ->
            (S, n, L)``: draws of the latent at Xs given whitened inducing draws v, the
            predictive of a fit of kind ``"inducing"`` (``hypers`` hold the point
            hyperparameters, inducing inputs and any mixing matrix).
        sample_inducing: ``(key, data, kernel, hypers, posterior, S) -> (S, M, L)``: draws
            of the whitened inducing values under a collapsed sparse posterior
            (``ppgpc.gp.whitened``). A point fit (``exact``, ``map``) of a model that has
            it stores these, predictive kind ``"inducing"``, instead of draws of the latent
            at the N training inputs: O(S M L) floats whatever N.
        inducing_values: ``(data, kernel, hypers, v (..., M, L)) -> u (..., M, L) or None``:
            the latent's own values at the inducing inputs for whitened draws v, where the
            fit's latent at its inducing inputs is not what ``predict_latent`` gives there
            (one set of inducing inputs per latent, before any mixing); None where it is.
    """

    inducing_latent: Optional[Callable[..., Any]] = None
    sample_inducing: Optional[Callable[..., Any]] = None
    inducing_values: Optional[Callable[..., Any]] = None


CAPABILITIES = {"conjugate": Conjugate, "latent": Latent, "gibbs": Gibbs, "cavi": CAVI,
                "svi": SVI, "inducing": Inducing}
"""The capability groups by their field name in ``ModelSpec``."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Functions a classifier module provides to the inference methods.

    Attributes:
        name: short identifier, e.g. ``"ilr_gp"``.
        prepare: ``(X, y, num_classes, **options) -> data``: targets, noise and the like.
        num_latent: ``C -> L``.
        log_link: ``f (..., L) -> log p(y = c | f) (..., C)``, the categorical likelihood of
            the classifier (predictions and the pointwise log-likelihood export).
        initial_hypers: ``(data, kernel) -> hypers``: starting values for optimisation/NUTS.
        conjugate: the capability group ``Conjugate``, None where the model has not got it;
            so are the five below.
        latent: ``Latent``.
        gibbs: ``Gibbs``.
        cavi: ``CAVI``.
        svi: ``SVI``.
        inducing: ``Inducing``.
        excluded_methods: methods the filled groups would allow but the model refuses (the
            collapsed sparse models have conjugate functions but must not run NUTS over
            their inducing inputs).
        scalable: the model never forms an N x N matrix, so the driver's
            ``max_exact_points`` does not apply to any of its methods.
        seeded_prepare: ``prepare`` takes a ``seed`` (its k-means++ inducing inputs), which
            the driver fills from its own.
        sparse_alternative: what the driver's too-many-points error suggests instead.
        psis_loo_refusal: why PSIS-LOO (``ppgpc.infer.psis_loo``) cannot score this model's
            fits from draws of its training latent, as a phrase that completes "cannot
            score ..."; None where it can.
        description: one line for the model registry.
        place: optional ``(data, mesh) -> data``: the prepared data with its sums over
            points split over the devices of a ``jax.sharding.Mesh`` (axis ``"data"``);
            None where the model cannot use several devices (the driver's ``devices``
            option is refused, naming the models that can).
        pad: optional ``(data, size) -> data``: the prepared data padded to ``size`` rows
            with rows that change nothing (``ppgpc.runtime.padding``: a row mask in the data's
            ``mask``, which every function of the model honours; inducing inputs padded
            with the rows carry an ``inducing_mask``, and the driver returns the real ones),
            so that the driver fits any N of one bucket with the same compiled programs;
            None where the model is fitted at its own N. It may return the data as they
            are where a setting of the model cannot pad.
        pads: optional ``(method, method options) -> bool``: which fits run on padded data
            when only some of the model's methods honour the mask; None: every method
            (``pads_fit``).
    """

    name: str
    prepare: Callable[..., Any]
    num_latent: Callable[[int], int]
    log_link: Callable[[Any], Any]
    initial_hypers: Callable[..., dict]
    conjugate: Optional[Conjugate] = None
    latent: Optional[Latent] = None
    gibbs: Optional[Gibbs] = None
    cavi: Optional[CAVI] = None
    svi: Optional[SVI] = None
    inducing: Optional[Inducing] = None
    excluded_methods: tuple = ()
    scalable: bool = False
    seeded_prepare: bool = False
    sparse_alternative: Optional[str] = None
    psis_loo_refusal: Optional[str] = None
    description: str = ""
    place: Optional[Callable[..., Any]] = None
    pad: Optional[Callable[..., Any]] = None
    pads: Optional[Callable[[str, dict], bool]] = None

    def pads_fit(self, method: str, options: dict) -> bool:
        """Whether a fit by ``method`` with the method options ``options`` runs on data
        padded by ``pad``."""
        if self.pad is None:
            return False
        return self.pads is None or bool(self.pads(method, options))

    def __post_init__(self):
        for group, kind in CAPABILITIES.items():
            value = getattr(self, group)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"ModelSpec {self.name!r}: {group} must be a "
                                f"ppgpc.models.spec.{kind.__name__} or None, got "
                                f"{type(value).__name__}")
        object.__setattr__(self, "excluded_methods", tuple(self.excluded_methods))

    def has(self, capability: str) -> bool:
        """Whether the spec fills the capability group ``capability`` (``"conjugate"``, ...)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; the groups are "
                             f"{list(CAPABILITIES)}")
        return getattr(self, capability) is not None

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The capability groups the spec fills, in ``CAPABILITIES`` order."""
        return tuple(group for group in CAPABILITIES if getattr(self, group) is not None)


def conjugate_spec(name: str, description: str, *, prepare, pad, num_latent, log_link,
                   initial_hypers, conjugate: "Conjugate", latent: "Latent",
                   sparse_alternative: str | None = None) -> ModelSpec:
    """The spec of a conjugate model, which runs ``exact``, ``map`` and ``nuts`` (both forms):
    a ``ModelSpec`` with the ``conjugate`` and ``latent`` groups.

    Args:
        name: the model name, e.g. ``"ilr_gp"``.
        description: one line for the model registry.
        prepare, pad, num_latent, log_link, initial_hypers: as ``ModelSpec``'s fields.
        conjugate, latent: the model's capability groups.
        sparse_alternative: what the driver's too-large-for-exact-inference error suggests.
    """
    return ModelSpec(
        name=name, description=description, prepare=prepare, pad=pad, num_latent=num_latent,
        log_link=log_link, initial_hypers=initial_hypers, conjugate=conjugate, latent=latent,
        sparse_alternative=sparse_alternative)


COLLAPSED_PSIS_LOO_REFUSAL = (
    "a collapsed sparse fit (its q(u) is conditioned on the pseudo-likelihood of the "
    "projection K_im K_mm^-1 u, not of f_i, so importance ratios from draws of f_i weight "
    "them wrongly)")
"""Why PSIS-LOO refuses the collapsed sparse variants (``ModelSpec.psis_loo_refusal``)."""


def collapsed_sparse_spec(exact: ModelSpec, name: str, description: str, *, prepare,
                          initial_hypers, collapsed_model, condition, predict,
                          inducing: "Inducing") -> ModelSpec:
    """The spec of the collapsed sparse variant (Titsias's bound) of a conjugate model.

    The variant keeps ``exact``'s ``num_latent``, ``log_link`` and ``pseudo_log_lik`` (on
    the dense data inside its ``SparseData``), has no latent form, and runs ``exact`` and
    ``map`` only: ``excluded_methods`` refuses NUTS over the inducing inputs. Its cost is
    O(N M^2), so it is ``scalable``; its ``prepare`` is seeded (the k-means++ start); its
    sums over points run on the devices of a mesh when asked (``place``,
    ``ppgpc.gp.sparse.on_devices``). PSIS-LOO refuses its fits (``COLLAPSED_PSIS_LOO_REFUSAL``).

    Args:
        exact: the conjugate model's spec (``conjugate_spec``).
        name: the variant's model name, e.g. ``"ilr_gp_sparse"``.
        description: one line for the model registry.
        prepare, initial_hypers: on ``SparseData`` (the dense data plus inducing inputs).
        collapsed_model, condition, predict: the ``Conjugate`` members of the bound and of
            its optimal q(u); the variant has no joint draws at the training inputs and no
            closed-form leave-one-out.
        inducing: its ``Inducing`` group: point fits are held as whitened inducing draws
            (predictive kind ``"inducing"``), O(S M L) floats whatever N.
    """
    return ModelSpec(
        name=name, description=description, prepare=prepare,
        num_latent=exact.num_latent, log_link=exact.log_link, initial_hypers=initial_hypers,
        conjugate=Conjugate(collapsed_model=collapsed_model, condition=condition,
                            predict=predict, pseudo_log_lik=functools.partial(
                                _on_base_data, exact.conjugate.pseudo_log_lik)),
        inducing=inducing,
        excluded_methods=("nuts",), scalable=True, seeded_prepare=True,
        psis_loo_refusal=COLLAPSED_PSIS_LOO_REFUSAL, place=sparse.on_devices)


def _on_base_data(function, data, *args):
    """``function`` applied to the dense model's data inside a ``SparseData``."""
    return function(data.base, *args)

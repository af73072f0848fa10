"""What a method's runner hands the driver (``RunOutput``) and what a fit records about
itself (``FitInfo``), as typed, frozen values.

A runner (``ppgpc.infer.methods.METHODS``) is called as
``runner(spec, data, kernel, key, options)`` and returns a ``RunOutput``: the posterior
draws or point estimate, how the draws turn into predictions, and a ``FitInfo`` of what the
run did; the driver adds the time, the devices and the ``ConvergenceReport`` (from the
``RunOutput``'s ``optimizers``, ``jitter`` and ``run``) with ``dataclasses.replace`` and
builds the ``FitResult``. Nothing mutates a ``FitInfo``: a later stage (an estimator's
search, a held-out score) builds a new one.

``FitInfo`` has one optional part per kind of run, set by the methods that have it:

=====================  =====================================================================
part                   set by
=====================  =====================================================================
``optimizer``          exact/map (type-II ML or MAP), and NUTS's latent form with
                       hyperparameters fitted by type-II ML
``initial_optimizer``  NUTS's collapsed form: the type-II MAP point its chains start from
``sampler``            NUTS and Gibbs: draws per chain, why the chains stopped, divergences
``svi``                SVI: steps, the last window's ELBO, why it stopped, step times
``cavi``               CAVI (and the CAVI fit of the hyperparameters before NUTS or Gibbs)
``validation``         SVI with ``validation_data`` and CAVI with ``validation_fraction``:
                       the held-out NLL trace and its best
=====================  =====================================================================

``FitInfo.to_dict``/``from_dict`` are the JSON form a save holds; ``from_dict`` also reads
the flat dict that saves made before this record existed.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, NamedTuple

import numpy as np

from ppgpc.infer.convergence import (ChainCheck, ConvergenceReport, OptimizerCheck, chain_check,
                                     optimizer_check)

__all__ = ["OptimizerInfo", "SamplerInfo", "SVIInfo", "CAVIInfo", "ValidationInfo", "FitInfo",
           "RunOutput", "PointHypers"]


def _plain(value):
    """A JSON-ready copy: NumPy scalars and arrays to Python numbers and lists, NaN kept."""
    if isinstance(value, (np.generic, np.ndarray)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class _Record:
    """JSON form of a flat frozen dataclass of numbers, strings and tuples."""

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, value: dict):
        if not isinstance(value, dict):
            raise ValueError(f"{cls.__name__} must be a dict, got {type(value).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"{cls.__name__} has no entries {unknown}")
        hints = typing.get_type_hints(cls)
        return cls(**{k: _tuple_if_sequence(hints[k], v) for k, v in value.items()})


def _tuple_if_sequence(hint, value):
    """Lists read back from JSON into the tuples a field declares."""
    if value is None:
        return None
    origins = {typing.get_origin(a) for a in typing.get_args(hint)} | {typing.get_origin(hint)}
    return tuple(value) if tuple in origins and isinstance(value, list) else value


@dataclasses.dataclass(frozen=True)
class OptimizerInfo(_Record):
    """A point optimisation of the hyperparameters (``ppgpc.infer.sites.optimize_sites``)."""

    optimizer: str
    """``"lbfgs"`` or ``"adam"``."""
    objective: str
    """``"log_marginal_likelihood"`` (type-II ML) or ``"log_posterior"`` (type-II MAP)."""
    value: float
    """The objective at the optimum."""
    iterations: int
    evaluations: int
    grad_norm: float
    """max_i |grad_i| at the optimum."""
    converged: bool
    stop_reason: str
    """``ppgpc.infer.optimize.STOP_REASONS``."""

    @property
    def kind(self) -> str:
        """``"type-II MAP"`` (the log posterior) or ``"type-II ML"``."""
        return "type-II MAP" if self.objective == "log_posterior" else "type-II ML"

    def check(self) -> OptimizerCheck:
        """Its ``OptimizerCheck`` (the gradient norm at the end)."""
        return optimizer_check(f"{self.kind} ({self.optimizer})", converged=self.converged,
                               iterations=self.iterations, stop_reason=self.stop_reason,
                               last_change=self.grad_norm)


@dataclasses.dataclass(frozen=True)
class SamplerInfo(_Record):
    """A windowed MCMC run (NUTS or blocked Gibbs, ``ppgpc.infer.mcmc``)."""

    num_draws: int
    """Draws per chain kept."""
    stop_reason: str
    """``"converged"`` (the chain check passed), ``"max_samples"`` (the cap) or
    ``"num_samples"`` (a run without the check)."""
    divergences: int = 0
    """Divergent NUTS transitions (the latent or, for NUTS, all sites)."""
    hyper_divergences: int | None = None
    """Divergences of the hyperparameter HMC step inside Gibbs, when it samples them."""
    form: str | None = None
    """NUTS's ``form``: ``"latent"`` or ``"collapsed"``."""
    num_warmup: int | None = None
    """Warm-up transitions (NUTS) or sweeps (Gibbs) per chain."""

    def check(self, draws: dict, last: ChainCheck | None = None) -> ChainCheck:
        """The ``ChainCheck`` of the run: R-hat and ESS of ``draws`` (chain, draw, ...), or
        the loop's ``last`` check of the same draws, with this record's divergences, stop
        reason and warm-up."""
        divergences = self.divergences + (self.hyper_divergences or 0)
        how = dict(divergences=divergences, stop_reason=self.stop_reason,
                   num_warmup=self.num_warmup or 0)
        if last is not None:
            return dataclasses.replace(last, **how)
        return chain_check(draws, **how)


@dataclasses.dataclass(frozen=True)
class SVIInfo(_Record):
    """Stochastic variational inference (``ppgpc.infer.svi``)."""

    steps: int
    converged: bool
    elbo: float
    """Mean ELBO of the last window."""
    batch_size: int
    seconds_per_step: float
    seconds_per_epoch: float
    stopped_on: str
    """``"elbo"`` (settled), ``"validation"`` (held-out NLL stopped improving) or
    ``"max_iter"``."""
    natural_gradient: float | None = None
    """The natural-gradient step of the Gaussian factors, when they took one."""
    natural_gradient_refused: int | None = None
    """Natural-gradient steps refused (the factor's precision would turn indefinite)."""
    relative_change: float | None = None
    """Relative change of the last two windows' mean ELBO (None after one window)."""

    def check(self) -> OptimizerCheck:
        """Its ``OptimizerCheck``."""
        return optimizer_check("SVI", converged=self.converged, iterations=self.steps,
                               stop_reason=self.stopped_on, last_change=self.relative_change,
                               measure="relative change of the windows' mean ELBO")


@dataclasses.dataclass(frozen=True)
class CAVIInfo(_Record):
    """Coordinate-ascent VI of the logistic-softmax GP (full, sparse or stochastic)."""

    iterations: int
    converged: bool
    relative_change: float | None
    """Relative change of the full-data ELBO over the last iteration (or window); None
    after a single ELBO value."""
    elbo: float
    """The final ELBO."""
    stochastic: bool = False
    """Minibatch (stochastic) CAVI rather than full-data CAVI."""

    def check(self) -> OptimizerCheck:
        """Its ``OptimizerCheck`` (the relative change of the last two ELBO values, which
        the fit compares with its ``tol``)."""
        return optimizer_check("stochastic CAVI" if self.stochastic else "CAVI",
                               converged=self.converged, iterations=self.iterations,
                               stop_reason="relative ELBO change" if self.converged
                               else "max_iter", last_change=self.relative_change,
                               measure="relative ELBO change")


@dataclasses.dataclass(frozen=True)
class ValidationInfo(_Record):
    """Held-out scores of an iterative fit."""

    nll: tuple[float, ...]
    """Held-out mean NLL, one per scored window."""
    steps: tuple[int, ...]
    """The steps at which ``nll`` was scored."""
    best_nll: float
    best_step: int
    size: int
    """Held-out rows."""
    best_window_elbo: float | None = None
    restored_best: bool = False
    """The parameters were set back to those of ``best_step``."""


_PARTS = {"optimizer": OptimizerInfo, "initial_optimizer": OptimizerInfo,
          "sampler": SamplerInfo, "svi": SVIInfo, "cavi": CAVIInfo,
          "validation": ValidationInfo}


@dataclasses.dataclass(frozen=True)
class FitInfo:
    """What a fit did (module docstring): how its hyperparameters were obtained, whether to
    trust it, how long it took, and one part per kind of run."""

    hyperparameters: str = "given"
    """How the hyperparameters were obtained (``"given"``, ``"type-II ML"``, ``"sampled
    (NUTS)"``, ``"CAVI ELBO (type-II MAP)"``, ...); the export's ``point_estimate``."""
    convergence: ConvergenceReport | None = None
    """The fit's ``ConvergenceReport`` (None only in saves from before ppgpc kept it)."""
    fit_seconds: float | None = None
    devices: int | None = None
    """Devices the sums over the data ran on (collapsed sparse models), None for one."""
    thinned_by: int = 1
    """``FitResult.thin`` steps applied."""
    cholesky_jitter: float | None = None
    """Jitter the conjugate posterior's Cholesky factor needed (exact/map)."""
    num_inducing: int | None = None
    """Inducing inputs of an inducing-point Gibbs fit."""
    optimizer: OptimizerInfo | None = None
    initial_optimizer: OptimizerInfo | None = None
    sampler: SamplerInfo | None = None
    svi: SVIInfo | None = None
    cavi: CAVIInfo | None = None
    validation: ValidationInfo | None = None

    def checks(self) -> tuple[OptimizerCheck, ...]:
        """The ``OptimizerCheck`` of each optimisation that fixed the fit's point
        hyperparameters (not the type-II MAP point that only starts NUTS's chains)."""
        return tuple(part.check() for part in (self.cavi, self.svi, self.optimizer)
                     if part is not None)

    @property
    def iterations(self) -> int:
        """Iterations of the optimiser that fitted the result (an estimator's ``n_iter_``):
        SVI steps, CAVI iterations, or L-BFGS / Adam iterations of type-II ML or MAP (of
        the final fit, or of the fit that started NUTS); 0 where none ran."""
        for count in (self.svi and self.svi.steps, self.cavi and self.cavi.iterations,
                      self.optimizer and self.optimizer.iterations,
                      self.initial_optimizer and self.initial_optimizer.iterations):
            if count is not None:
                return int(count)
        return 0

    def to_dict(self) -> dict:
        """The JSON form (``from_dict`` reads it back)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "convergence" or f.name in _PARTS:  # the typed parts' own forms
                out[f.name] = None if value is None else value.to_dict()
            else:
                out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, value: dict) -> "FitInfo":
        """The record ``to_dict`` wrote, or the flat dict of an older save.

        Raises:
            ValueError: not a fit record (names the entry).
        """
        if not isinstance(value, dict):
            raise ValueError(f"a fit's info must be a dict, got {type(value).__name__}")
        if set(value) <= _FIELDS and all(value.get(name) is None or isinstance(
                value[name], dict) for name in _PARTS):
            fields = dict(value)
            report = fields.get("convergence")
            fields["convergence"] = None if report is None else ConvergenceReport.from_dict(
                report)
            for name, part in _PARTS.items():
                if fields.get(name) is not None:
                    fields[name] = part.from_dict(fields[name])
            return cls(**fields)
        return _from_flat(value)


_FIELDS = {f.name for f in dataclasses.fields(FitInfo)}


def _from_flat(d: dict) -> FitInfo:
    """A ``FitInfo`` from the flat ``info`` dict of saves made before the typed record."""
    def optimizer(prefix: str) -> OptimizerInfo | None:
        if prefix + "optimizer_iterations" not in d:
            return None
        objective = next((k for k in ("log_marginal_likelihood", "log_posterior")
                          if prefix + k in d), "log_marginal_likelihood")
        return OptimizerInfo(
            optimizer=str(d.get(prefix + "optimizer", "lbfgs")), objective=objective,
            value=float(d.get(prefix + objective, math.nan)),
            iterations=int(d[prefix + "optimizer_iterations"]),
            evaluations=int(d.get(prefix + "optimizer_evaluations", 0)),
            grad_norm=float(d.get(prefix + "optimizer_grad_norm", math.nan)),
            converged=bool(d.get(prefix + "optimizer_converged", False)),
            stop_reason=str(d.get(prefix + "optimizer_stop_reason", "")))

    sampler = None
    if "num_draws" in d or "divergences" in d or "form" in d:
        sampler = SamplerInfo(num_draws=int(d.get("num_draws", 0)),
                              stop_reason=str(d.get("stop_reason", "num_samples")),
                              divergences=int(d.get("divergences", 0)),
                              hyper_divergences=d.get("hyper_divergences"),
                              form=d.get("form"))
    svi = None if "svi_steps" not in d else SVIInfo(
        steps=int(d["svi_steps"]), converged=bool(d.get("svi_converged", False)),
        elbo=float(d.get("elbo", math.nan)), batch_size=int(d.get("batch_size", 0)),
        seconds_per_step=float(d.get("seconds_per_step", math.nan)),
        seconds_per_epoch=float(d.get("seconds_per_epoch", math.nan)),
        stopped_on=str(d.get("stopped_on", "max_iter")),
        natural_gradient=d.get("natural_gradient"),
        natural_gradient_refused=d.get("natural_gradient_refused"))
    cavi = None if "cavi_iterations" not in d else CAVIInfo(
        iterations=int(d["cavi_iterations"]), converged=bool(d.get("cavi_converged", False)),
        relative_change=d.get("cavi_relative_change"),
        elbo=float(d.get("elbo", math.nan)), stochastic=bool(d.get("cavi_stochastic", False)))
    validation = None if "validation_nll" not in d else ValidationInfo(
        nll=tuple(float(v) for v in d["validation_nll"]),
        steps=tuple(int(v) for v in d.get("validation_steps", ())),
        best_nll=float(d.get("best_validation_nll", math.nan)),
        best_step=int(d.get("best_step", 0)), size=int(d.get("validation_size", 0)),
        best_window_elbo=d.get("best_window_elbo"),
        restored_best=bool(d.get("restored_best", False)))
    report = d.get("convergence")
    return FitInfo(
        hyperparameters=str(d.get("hyperparameters", "given")),
        convergence=None if report is None else ConvergenceReport.from_dict(report),
        fit_seconds=d.get("fit_seconds"), devices=d.get("devices"),
        thinned_by=int(d.get("thinned_by", 1)), cholesky_jitter=d.get("cholesky_jitter"),
        num_inducing=d.get("num_inducing"), optimizer=optimizer(""),
        initial_optimizer=optimizer("init_"), sampler=sampler, svi=svi, cavi=cavi,
        validation=validation)


class RunOutput(NamedTuple):
    """What a method's runner returns to the driver (module docstring).

    Attributes:
        hypers: hyperparameter draws (chain, draw, ...) by site name.
        latent: (chain, draw, N, L) latent draws at the training inputs, or None (kind
            ``"inducing"``).
        predictive_kind: ``"conjugate"``, ``"latent"`` or ``"inducing"``
            (``ppgpc.infer.results``).
        point_hypers: the hyperparameters are one point (one chain, one draw).
        info: what the run did (without time, devices and convergence: the driver's).
        sample_stats: per-draw statistics (chain, draw) and optimisation traces.
        inducing: (chain, draw, M, L) whitened inducing draws (kind ``"inducing"``).
        jitter: the largest Cholesky jitter the run needed.
        chains: a windowed sampler's last ``ChainCheck`` of the draws the driver checks
            (None: the driver computes it).
    """

    hypers: dict
    latent: Any
    predictive_kind: str
    point_hypers: bool
    info: FitInfo
    sample_stats: dict = {}
    inducing: Any = None
    jitter: Any = 0.0
    chains: ChainCheck | None = None


class PointHypers(NamedTuple):
    """Point hyperparameters and how they were obtained: given, or fitted by a run whose
    record (``OptimizerInfo``, ``CAVIInfo`` or ``SVIInfo``) says how it went."""

    values: dict
    """Hyperparameter values by site name."""
    how: str
    """``"given"``, ``"type-II ML"``, ``"CAVI ELBO (type-II MAP)"``, ...
    (``FitInfo.hyperparameters``)."""
    record: Any = None
    """The fit's record, None when the values were given."""

    def info_parts(self) -> dict:
        """The ``FitInfo`` part its record fills (``{"optimizer": ...}``, ``{"cavi": ...}``
        or ``{"svi": ...}``; empty when given)."""
        return {name: self.record for name in ("optimizer", "cavi", "svi")
                if type(self.record) is _PARTS[name]}


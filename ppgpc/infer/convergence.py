"""Whether to trust a fit: one convergence report for every method, one warning class.

Every fit (``ppgpc.infer.fit``, and every estimator's ``fit``) ends with a
``ConvergenceReport`` built from what the run itself measured, kept as a JSON dict in the
result's ``info.convergence`` (so saves and the ArviZ export carry it) and on an
estimator as ``convergence_``. When the report finds a problem, one
``ConvergenceWarning`` is raised for the fit, with a one-line summary and what to do.

The checks and their thresholds:

* **MCMC** (NUTS, Gibbs, the inducing-point Gibbs sampler), over every stored draw (the
  latent f or the whitened inducing values v, and sampled hyperparameters): the
  rank-normalised split R-hat below ``RHAT_MAX`` = 1.01 and the bulk and tail effective
  sample sizes above ``ESS_PER_CHAIN_MIN`` = 100 per chain (Vehtari, Gelman, Simpson,
  Carpenter & Buerkner 2021, "Rank-normalization, folding, and localization: an improved
  R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2), section 4: R-hat
  < 1.01 and ESS > 400 for four chains), as ArviZ defines them
  (``ppgpc.evaluation.chain_diagnostics`` computes them for every entry at once); and no divergent
  transition (NUTS, and the HMC steps of sampled hyperparameters; Betancourt 2017, "A conceptual
  introduction to Hamiltonian Monte Carlo", section 6.2).
* **Optimisers** (L-BFGS and Adam of type-II ML / MAP, CAVI, the stochastic CAVI, SVI):
  each stage converged by its own test (``ppgpc.infer.optimize``: gradient tolerance or
  relative objective change; CAVI and SVI: the relative ELBO change), with its iterations
  and its last gradient norm or relative change.
* **Cholesky jitter** (``ppgpc.gp.linalg.cholesky``): the largest diagonal jitter any
  factorisation of the fitted model needed, relative to the smallest kernel variance. A
  jitter j acts as extra noise of variance j on the latent; from ``JITTER_RELATIVE_MAX`` =
  1e-6 on (an extra standard deviation of 0.1% of the prior's) it can move predictions;
  the routine 1e-10 cannot.
* **Searches** (an estimator's smoothing level, ``epsilon``, ``tau``, ``alpha_eps``): a
  value chosen at the edge of its grid where the held-out NLL still falls from the
  neighbouring value, by more than ``GRID_EDGE_TOLERANCE`` = 0.001 nats per point and by
  more than two standard errors of the paired per-point differences, so the best value may
  lie beyond the grid (the estimators first extend such a grid by a few values).

A driver fit warns for itself (``ppgpc.infer.fit(..., warn=True)``); an estimator runs its
search's and final fits with ``warn=False``, merges their reports and the search's grid
edges (returned by the search) into one, and warns once for the whole fit.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

from ppgpc.evaluation.chain_diagnostics import MIN_DRAWS, chain_diagnostics

__all__ = ["ConvergenceWarning", "ConvergenceReport", "ChainCheck", "OptimizerCheck",
           "RHAT_MAX", "ESS_PER_CHAIN_MIN", "JITTER_RELATIVE_MAX", "chain_check",
           "optimizer_check", "relative_jitter", "grid_edge", "falling_edge",
           "GRID_EDGE_TOLERANCE", "GRID_EDGE_STANDARD_ERRORS", "warn_if_needed"]

RHAT_MAX = 1.01
"""Largest acceptable rank-normalised split R-hat (Vehtari et al. 2021)."""

ESS_PER_CHAIN_MIN = 100
"""Smallest acceptable bulk and tail ESS, per chain (Vehtari et al. 2021: 400 for 4 chains)."""

JITTER_RELATIVE_MAX = 1e-6
"""Largest Cholesky jitter, relative to the kernel variance, that is reported as routine."""


class ConvergenceWarning(_SklearnConvergenceWarning):
    """A fit should not be trusted as it stands: chains that have not mixed, an optimiser
    that stopped before converging, a large Cholesky jitter, or a search that chose the
    edge of its grid. A subclass of scikit-learn's ``ConvergenceWarning``, so
    ``warnings.simplefilter("error", sklearn.exceptions.ConvergenceWarning)`` catches it."""


@dataclasses.dataclass(frozen=True)
class ChainCheck:
    """R-hat, ESS and divergences of the stored draws of an MCMC fit."""

    num_chains: int
    num_draws: int
    """Draws per chain."""
    max_rhat: float
    """Largest rank-normalised split R-hat over every stored entry."""
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    worst: str
    """The entry with the largest R-hat, e.g. ``"f[12, 2]"``."""
    stop_reason: str = ""
    """Why the run stopped: ``"converged"`` (its check passed at a checkpoint of draws),
    ``"max_samples"`` (it reached its cap first), or empty for a run of fixed length."""
    num_warmup: int = 0
    """Warm-up transitions per chain before the draws."""

    @property
    def mixed(self) -> bool:
        """R-hat and ESS pass (divergences aside: more draws do not remove them)."""
        return (self.max_rhat < RHAT_MAX and min(self.min_ess_bulk, self.min_ess_tail)
                >= ESS_PER_CHAIN_MIN * self.num_chains)

    def draws_needed(self) -> int:
        """Draws per chain that would pass R-hat and ESS, sized from what this run reached:
        the ESS grows in proportion to the draws and R-hat - 1 falls about as 1 / draws
        once the chains have mixed; with a margin of a quarter, in hundreds, and at least
        twice the draws when the diagnostics are undefined."""
        ess = min(self.min_ess_bulk, self.min_ess_tail)
        if not (math.isfinite(ess) and ess > 0 and math.isfinite(self.max_rhat)):
            return max(2 * self.num_draws, 1000)
        factor = max(ESS_PER_CHAIN_MIN * self.num_chains / ess,
                     (self.max_rhat - 1.0) / (RHAT_MAX - 1.0), 1.0)
        return int(math.ceil(1.25 * factor * self.num_draws / 100.0) * 100)

    def describe(self) -> str:
        """How long the run was and why it stopped, e.g. ``"4 chains x 300 draws after 500
        warm-up; stopped when the check passed"``."""
        text = f"{self.num_chains} chains x {self.num_draws} draws"
        if self.num_warmup:
            text += f" after {self.num_warmup} warm-up"
        why = {"converged": "stopped when the check passed",
               "max_samples": "stopped at max_samples"}.get(self.stop_reason)
        return text if why is None else f"{text}; {why}"

    def problems(self) -> list[str]:
        if math.isnan(self.max_rhat) and self.num_draws < MIN_DRAWS:
            return [f"R-hat and ESS are undefined with {self.num_draws} draw(s) per chain "
                    f"(at least {MIN_DRAWS})"]
        out = []
        if not self.max_rhat < RHAT_MAX:  # a NaN R-hat is a problem too
            out.append(f"max R-hat {self.max_rhat:.3f} > {RHAT_MAX} over {self.num_chains} "
                       f"chain(s) ({self.worst})")
        least = ESS_PER_CHAIN_MIN * self.num_chains
        ess = min(self.min_ess_bulk, self.min_ess_tail)
        if not ess >= least:
            kind = "bulk" if self.min_ess_bulk <= self.min_ess_tail else "tail"
            out.append(f"min {kind} ESS {ess:.0f} < {least} ({ESS_PER_CHAIN_MIN} per chain)")
        if self.divergences:
            out.append(f"{self.divergences} divergent transition(s)")
        return out


@dataclasses.dataclass(frozen=True)
class OptimizerCheck:
    """One optimisation stage of a fit."""

    stage: str
    """What it optimised, e.g. ``"type-II MAP (lbfgs)"``, ``"CAVI"``, ``"SVI"``."""
    converged: bool
    iterations: int
    stop_reason: str
    """Why it stopped (``ppgpc.infer.optimize.STOP_REASONS``, or ``"max_iter"``)."""
    last_change: float | None = None
    """The gradient norm (L-BFGS, Adam) or relative ELBO change (CAVI, SVI) at the end."""
    measure: str = "gradient norm"

    def problems(self) -> list[str]:
        if self.converged:
            return []
        last = "" if self.last_change is None else f", {self.measure} {self.last_change:.2e}"
        return [f"{self.stage} did not converge ({self.stop_reason} after "
                f"{self.iterations} iterations{last})"]


@dataclasses.dataclass(frozen=True)
class ConvergenceReport:
    """Everything a fit measured about whether to trust it.

    Attributes:
        method: the inference method (``"gibbs"``, ``"map"`` ...).
        chains: R-hat, ESS and divergences of an MCMC fit (None for point fits).
        optimizers: the optimisation stages of the fit, in order.
        max_jitter: the largest Cholesky jitter any factorisation of the fitted model
            needed, relative to the kernel variance (0 when none).
        grid_edges: searched values at the edge of their grid, as phrases.
        for_estimator: the fit was an estimator's, so ``advice`` and ``summary`` name
            method options as its ``inference_options`` (set by the estimator's ``fit``).
        notes: what the fit chose by itself that a reader should know, as phrases (an
            estimator that fitted the collapsed sparse GP past its exact size limit);
            not problems: they leave ``converged`` as it is.
    """

    method: str
    chains: ChainCheck | None = None
    optimizers: tuple[OptimizerCheck, ...] = ()
    max_jitter: float = 0.0
    grid_edges: tuple[str, ...] = ()
    for_estimator: bool = False
    notes: tuple[str, ...] = ()

    # ---------------------------------------------------------------- verdict
    @property
    def problems(self) -> tuple[str, ...]:
        """One phrase per problem found (empty when the fit converged)."""
        out = list(self.chains.problems()) if self.chains is not None else []
        for check in self.optimizers:
            out.extend(check.problems())
        if not self.max_jitter <= JITTER_RELATIVE_MAX:
            out.append(f"a Cholesky factorisation needed jitter {self.max_jitter:.1e} of the "
                       f"kernel variance (> {JITTER_RELATIVE_MAX:.0e})")
        out.extend(self.grid_edges)
        return tuple(out)

    @property
    def converged(self) -> bool:
        """True when no check found a problem."""
        return not self.problems

    def advice(self, *, estimator: bool | None = None) -> str:
        """What to do about the problems found (empty when there are none), naming method
        options as an estimator takes them (``inference_options``) or as ``fit`` does
        (``estimator``; default ``for_estimator``)."""
        estimator = self.for_estimator if estimator is None else estimator

        def options(**values) -> str:
            if estimator:
                return "inference_options={" + ", ".join(
                    f"{k!r}: {v!r}" for k, v in values.items()) + "}"
            return "fit(..., " + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"

        tips = []
        if self.chains is not None and self.chains.problems():
            if self.chains.divergences:
                tips.append(f"raise target_accept ({options(target_accept=0.95)})")
            if not self.chains.mixed:
                more = self.chains.draws_needed()
                if self.chains.stop_reason:  # a windowed run: its cap is what stopped it
                    tips.append(f"let the chains run longer ({options(max_samples=more)})")
                else:
                    tips.append(f"draw more samples "
                                f"({options(num_samples=more, num_chains=4)})")
            if self.method == "gibbs":
                tips.append("or use NUTS (inference='nuts')" if estimator
                            else "or use method='nuts'")
        if any(check.problems() for check in self.optimizers):
            tips.append("raise max_iter " + ("in inference_options" if estimator
                                             else "(a method option of fit)"))
        if not self.max_jitter <= JITTER_RELATIVE_MAX:
            tips.append("look for duplicated inputs, or rescale them")
        if self.grid_edges:
            tips.append("widen the search grid (selection=Selection(grid=...)) or give the "
                        "value itself")
        return "; ".join(tips)

    def summary(self, *, estimator: bool | None = None) -> str:
        """One line: converged, or the problems and what to do (``advice``)."""
        notes = "".join(f" [{note}]" for note in self.notes)
        if self.converged:
            run = "" if self.chains is None or not self.chains.stop_reason \
                else f" ({self.chains.describe()})"
            return f"{self.method}: converged{run}{notes}"
        return (f"{self.method}: {'; '.join(self.problems)}: "
                f"{self.advice(estimator=estimator)}{notes}")

    # ----------------------------------------------------------- composition
    def merged(self, *, optimizers: tuple[OptimizerCheck, ...] = (),
               grid_edges: tuple[str, ...] = (),
               notes: tuple[str, ...] = ()) -> "ConvergenceReport":
        """This report with earlier optimisation stages (e.g. an estimator's own fit of
        the hyperparameters), a search's grid edges and an estimator's notes added."""
        return dataclasses.replace(self, optimizers=tuple(optimizers) + self.optimizers,
                                   grid_edges=self.grid_edges + tuple(grid_edges),
                                   notes=self.notes + tuple(notes))

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        """A JSON-ready dict (a save of ``info.convergence``); ``from_dict`` reads it back."""
        return {"method": self.method, "converged": self.converged,
                "summary": self.summary(), "for_estimator": self.for_estimator,
                "chains": None if self.chains is None else dataclasses.asdict(self.chains),
                "optimizers": [dataclasses.asdict(c) for c in self.optimizers],
                "max_jitter": float(self.max_jitter), "grid_edges": list(self.grid_edges),
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, value: dict) -> "ConvergenceReport":
        """The report ``to_dict`` wrote (``converged`` and ``summary`` are recomputed).

        Raises:
            ValueError: the dict is not a report (names the missing or wrong entry).
        """
        try:
            chains = value["chains"]
            return cls(method=str(value["method"]),
                       chains=None if chains is None else ChainCheck(**chains),
                       optimizers=tuple(OptimizerCheck(**c) for c in value["optimizers"]),
                       max_jitter=float(value["max_jitter"]),
                       grid_edges=tuple(str(e) for e in value["grid_edges"]),
                       # saves from before the field: their summaries are the driver's
                       for_estimator=bool(value.get("for_estimator", False)),
                       notes=tuple(str(n) for n in value.get("notes", ())))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a convergence report: {error!r}") from None


# ------------------------------------------------------------------ the checks
def _entry_name(name: str, shape: tuple, flat: int) -> str:
    if not shape:
        return name
    index = np.unravel_index(flat, shape)
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def chain_check(draws: dict, divergences: int = 0, **run) -> ChainCheck:
    """R-hat and ESS over every entry of ``draws`` (``ppgpc.evaluation.chain_diagnostics``).

    Args:
        draws: arrays (chain, draw, ...) by name (the latent f or v, sampled hypers).
        divergences: divergent transitions of the run.
        **run: ``stop_reason`` and ``num_warmup`` of a windowed run (``ChainCheck``).

    Returns:
        A ``ChainCheck``. Entries that never change (a hyperparameter held fixed) are left
        out; R-hat and ESS are NaN, which is a problem, with fewer than 4 draws per chain
        or when no entry changes at all.
    """
    max_rhat, min_bulk, min_tail, worst = -math.inf, math.inf, math.inf, ""
    num_chains = num_draws = 0
    for name, value in draws.items():
        num_chains, num_draws = (int(n) for n in np.shape(value)[:2])
        rhat, bulk, tail = chain_diagnostics(value)
        checked = ~np.isnan(rhat) if num_draws >= MIN_DRAWS else np.ones(rhat.shape, bool)
        if not checked.any():
            continue
        flat = np.where(checked, np.nan_to_num(rhat, nan=math.inf), -math.inf).reshape(-1)
        i = int(np.argmax(flat))
        if flat[i] > max_rhat:
            max_rhat, worst = float(flat[i]), _entry_name(name, rhat.shape, i)
        min_bulk = min(min_bulk, float(np.min(np.nan_to_num(bulk[checked], nan=-math.inf))))
        min_tail = min(min_tail, float(np.min(np.nan_to_num(tail[checked], nan=-math.inf))))
    undefined = lambda v: math.nan if math.isinf(v) else v  # noqa: E731
    return ChainCheck(num_chains=num_chains, num_draws=num_draws,
                      max_rhat=undefined(max_rhat), min_ess_bulk=undefined(min_bulk),
                      min_ess_tail=undefined(min_tail), divergences=int(divergences),
                      worst=worst, **run)


def optimizer_check(stage: str, *, converged: bool, iterations: int, stop_reason: str,
                    last_change: float | None = None,
                    measure: str = "gradient norm") -> OptimizerCheck:
    """An ``OptimizerCheck`` of plain Python values."""
    last = None if last_change is None or not math.isfinite(float(last_change)) \
        else float(last_change)
    return OptimizerCheck(stage=str(stage), converged=bool(converged),
                          iterations=int(iterations), stop_reason=str(stop_reason),
                          last_change=last, measure=str(measure))


def relative_jitter(jitter: float, hypers: dict) -> float:
    """``jitter`` relative to the smallest kernel variance among ``hypers`` (its mean over
    draws; 1 where the model has no ``kernel_variance`` site)."""
    jitter = float(jitter)
    if jitter <= 0.0:
        return 0.0
    variances = [np.asarray(v, dtype=np.float64) for k, v in hypers.items()
                 if k.startswith("kernel_variance")]
    scale = min((float(np.min(v)) for v in variances if v.size), default=1.0)
    return jitter / scale if scale > 0 else math.inf


GRID_EDGE_TOLERANCE = 1e-3
"""A search whose best value is at the edge of its grid counts as unfinished when its
held-out NLL (nats per point) still falls there, from the neighbouring value, by more than
this and by more than ``GRID_EDGE_STANDARD_ERRORS`` standard errors."""

GRID_EDGE_STANDARD_ERRORS = 2.0
"""How many standard errors of the paired per-point differences the fall must exceed."""


def _edge_gain(losses: dict, end: float, neighbour: float) -> tuple[float, float]:
    """(mean, standard error) of the per-point held-out NLL differences neighbour - end."""
    difference = np.asarray(losses[neighbour], dtype=np.float64) - np.asarray(
        losses[end], dtype=np.float64)
    se = float(np.std(difference, ddof=1) / np.sqrt(difference.size)) \
        if difference.size > 1 else math.inf
    return float(np.mean(difference)), se


def falling_edge(losses: dict, tolerance: float = GRID_EDGE_TOLERANCE) -> str | None:
    """``"low"`` or ``"high"`` when the best value of a search is at that end of its grid
    and the held-out NLL still falls there: the best value may lie beyond the grid.

    Args:
        losses: {grid value: (n,) held-out NLL of each validation point}, the same points
            for every value (at least two values).
        tolerance: the least fall per point that counts (it must also exceed
            ``GRID_EDGE_STANDARD_ERRORS`` standard errors of the paired differences, the
            standard error ArviZ's ``compare`` gives an ELPD difference).

    Returns:
        The end, or None when the best value is inside the grid or the fall is within
        its noise.
    """
    values = sorted(losses)
    if len(values) < 2:
        return None
    best = min(values, key=lambda v: float(np.mean(losses[v])))
    for end, neighbour, edge in ((values[0], values[1], "low"),
                                 (values[-1], values[-2], "high")):
        if best == end:
            gain, se = _edge_gain(losses, end, neighbour)
            if gain > tolerance and gain > GRID_EDGE_STANDARD_ERRORS * se:
                return edge
    return None


def grid_edge(name: str, losses: dict) -> str | None:
    """A phrase for the report when the search over ``name`` whose per-point held-out
    losses are ``losses`` ends at a falling edge of its grid (``falling_edge``), else
    None."""
    edge = falling_edge(losses)
    if edge is None:
        return None
    values = sorted(losses)
    end, neighbour = (values[0], values[1]) if edge == "low" else (values[-1], values[-2])
    gain, se = _edge_gain(losses, end, neighbour)
    word = "smallest" if edge == "low" else "largest"
    return (f"{name} {end:.10g} is the {word} value of its search grid and the held-out NLL "
            f"still falls there ({gain:.4f} per point from {neighbour:.10g}, "
            f"{gain / se:.1f} standard errors)")


# ------------------------------------------------------------------ warnings
def warn_if_needed(report: ConvergenceReport, *, estimator: str | None = None,
                   stacklevel: int = 3) -> None:
    """One ``ConvergenceWarning`` for ``report`` if it found a problem; ``estimator`` names
    the estimator class whose fit it was, whose method options are its
    ``inference_options``."""
    if not report.converged:
        what = "the fit" if estimator is None else f"the {estimator} fit"
        warnings.warn(f"{what} may not be trusted: "
                      f"{report.summary(estimator=estimator is not None)}",
                      ConvergenceWarning, stacklevel=stacklevel)

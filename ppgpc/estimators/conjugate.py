"""What ILR-GP and GPD share: conjugate GP regression on transformed labels, with exact,
MAP, NUTS or collapsed sparse inference, and a smoothing level chosen by held-out NLL.

The smoothing search scores each candidate value by held-out negative log-likelihood,
pooled over the validation points (``Selection``): by the closed-form leave-one-out
predictive of one fit on all the data (``"loo"``, exact posteriors only), by stratified
cross-validation with refits (``"cv"``), or on one stratified hold-out (``"holdout"``).
When the best value lies at an edge of a default grid and the NLL still falls there
(``ppgpc.infer.convergence.falling_edge``: by more than 0.001 nats per point and two
standard errors of the paired per-point differences), the search goes on past that edge,
one value at a time on the grid's scale (``SEARCH_SCALES``), up to ``GRID_EXTENSIONS``
values (a grid the user gave is kept as given); a search that still ends at a falling edge
is reported in the fit's ``ConvergenceReport``.
Past ``SEARCH_ROWS`` rows a leave-one-out search scores its levels on a stratified
subsample, and the fit on all the rows starts from the chosen level's fit there; the final
fit starts from the chosen level's search fit (``ConjugateClassifier._transported_start``:
the levels change the targets' scale and level, which the model's own data-driven start
follows, not the shape of the kernel). With ``progress=True`` each scored value writes a
line to stderr.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, NamedTuple

import jax
import numpy as np

from ppgpc.datasets import stratified_folds, train_validation_split
from ppgpc.estimators.base import DriverCall, GPClassifierBase
from ppgpc.estimators.options import ConjugateInference, Selection, as_selection
from ppgpc.gp.inducing import resolve_num_inducing
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer import convergence
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.models import get_spec
from ppgpc.runtime.progress import Timer, note, time_left
from ppgpc.validation import check_count, check_flag, check_seed

__all__ = ["ConjugateClassifier", "SearchFit", "GRID_EXTENSIONS", "SEARCH_ROWS",
           "HYPER_ROWS", "SEARCH_SCALES"]

GRID_EXTENSIONS = 6
"""Values a smoothing search adds past an edge of its grid at most, one at a time, while its
best value is at that edge and the held-out NLL still falls there
(``ppgpc.infer.convergence.falling_edge``)."""

SEARCH_SCALES = {
    "epsilon": (lambda e: -math.log1p(-e), lambda u: -math.expm1(-u)),
    "tau": (math.log, math.exp),
    "alpha_eps": (math.log, math.exp),
}
"""(forward, inverse) of the scale on which each searched option's grid is evenly spaced:
-log(1 - epsilon), log tau, log alpha_eps; a search extends its grid on that scale."""

_LOO_KEY_TAG = 0x100
"""``fold_in`` tag of the leave-one-out scores' key (``ConjugateClassifier._loo_key``)."""


SEARCH_ROWS = 600
"""Rows of the stratified subsample on which a leave-one-out search scores its smoothing
levels (GPD's alpha_eps, ILR's tau) when the data have more: each level's type-II fit costs
O(N^3) per step, and the level's choice needs the shape of the held-out NLL, not every row.
The fit on all the rows then starts from the chosen level's fit there."""

HYPER_ROWS = 2000
"""Rows of the stratified subsample on which a type-II fit (``"map"``, ``"exact"``) fits the
kernel hyperparameters when the data have more. Each L-BFGS step costs O(N^3), and a few
thousand rows pin a kernel down as well as all of them; the exact posterior is then
conditioned on every row with those hyperparameters (one factorisation of all the rows,
not one per step), and the fit's report says so and carries that fit's convergence."""


class SearchFit(NamedTuple):
    """One type-II fit of a smoothing search: where the next fit starts."""

    options: dict
    """The model options it was fitted with (one smoothing level)."""
    hypers: dict
    """Its point hyperparameters by site name."""
    X: np.ndarray
    """(n, D) the inputs it was fitted on (all the rows, or a search's subsample)."""
    y: np.ndarray
    """(n,) their labels."""
    checks: tuple = ()
    """Its optimisation's ``OptimizerCheck`` (``ppgpc.infer.convergence``)."""


class _Levels:
    """The leave-one-out scorers of a search over one smoothing level ``name`` (GPD's
    alpha_eps, ILR's tau, or epsilon with a fixed noise): a type-II fit at each level from
    the model's own start, or from ``start_from`` (the chosen level's fit of the same search
    on a subsample) carried over to the level. A start carried over from a neighbouring
    level is not used: on small tables with many ARD lengthscales it can lead the fit to
    another local optimum of the marginal likelihood (docs/records/speed.md)."""

    def __init__(self, fit_at: Callable[[float], tuple[Callable, SearchFit]]):
        self.fit_at = fit_at
        """``level -> (leave-one-out scorer, SearchFit)``, the type-II fit at a level
        (``ConjugateClassifier._levels``)."""
        self.fits: dict = {}
        """{level: ``SearchFit``} of the levels fitted."""

    def score(self, value: float):
        """The leave-one-out scorer of a fit at ``value`` (``ConjugateClassifier._loo_scorer``)."""
        value = float(value)
        scorer, self.fits[value] = self.fit_at(value)
        return scorer


class ConjugateClassifier(GPClassifierBase):
    """Base of ``ILRGPClassifier`` and ``DirichletGPClassifier``; subclasses give
    ``_options_for(value)``, the model options at one smoothing level."""

    inference_choices = ConjugateInference
    noun = "class"
    """What a sparse output is, for ``shared_inducing`` errors (a class, an ILR coordinate)."""

    def _levels(self, X, y, num_classes: int, name: str,
                start_from: SearchFit | None = None) -> _Levels:
        """The leave-one-out scorers of a search over ``name`` on (X, y) (``_Levels``)."""

        def fit_at(value: float):
            options = self._level_options(name, value)
            start = (None if start_from is None else
                     self._transported_start(start_from, X, y, num_classes, options))
            return self._loo_scorer(X, y, num_classes, options, start=start)

        return _Levels(fit_at)

    # ------------------------------------------------------------ settings
    def _selection(self) -> Selection:
        return as_selection(self.selection)

    def _collapsed(self) -> bool:
        """Whether the fit is the collapsed sparse one: ``inference="collapsed"``, or a
        type-II fit past ``max_exact_points`` (``_switched``)."""
        return self._inference() is ConjugateInference.COLLAPSED or self._switched()

    def _switched(self) -> bool:
        """Whether this fit went sparse by itself past ``max_exact_points``
        (``sparse_instead_`` holds why)."""
        return bool(getattr(self, "sparse_instead_", None))

    def _size_checked(self, num_points: int) -> None:
        """Past ``max_exact_points``, a type-II fit (``"map"``, ``"exact"``) becomes the
        collapsed sparse one, with a warning that says why and how to force the exact fit,
        and a note in the fit's report (``sparse_instead_``); NUTS is refused as before."""
        self.sparse_instead_ = None
        self._hyper_fit = None  # (note, checks) where a subsample fits the hyperparameters
        limit = self._exact_size_limit()
        switch = self._inference() in (ConjugateInference.MAP, ConjugateInference.EXACT)
        if limit is None or num_points <= limit or not switch:
            return super()._size_checked(num_points)
        self.sparse_instead_ = self._sparse_note(num_points)
        warnings.warn(
            f"{type(self).__name__}: {self.sparse_instead_}; pass "
            f"max_exact_points={num_points} (or None) to fit the exact GP, which costs "
            f"O(N^3) per step and 8 N^2 bytes per matrix "
            f"({8 * num_points ** 2 / 2 ** 30:.1f} GiB here)", UserWarning, stacklevel=3)

    def _sparse_note(self, num_points: int) -> str:
        """The phrase of a switch to the collapsed sparse fit (``_size_checked``)."""
        M = resolve_num_inducing(self.num_inducing, num_points)
        return (f"{num_points} training points exceed max_exact_points="
                f"{self.max_exact_points}: fitted the collapsed sparse GP "
                f"(inference='collapsed', {M} inducing inputs) instead of the exact one, "
                f"its smoothing level chosen by the exact model on a subsample")

    def _report_notes(self) -> tuple[str, ...]:
        notes = (self.sparse_instead_,) if self._switched() else ()
        hyper = getattr(self, "_hyper_fit", None)
        return notes + ((hyper[0],) if hyper is not None else ())

    def _report_optimizers(self) -> tuple:
        """The subsample fit's check where it fitted the hyperparameters (``HYPER_ROWS``)."""
        hyper = getattr(self, "_hyper_fit", None)
        return tuple(hyper[1]) if hyper is not None else ()

    def _check_model_settings(self) -> None:
        self._selection()
        check_flag("shared_inducing", self.shared_inducing)
        if self._collapsed() and self.num_inducing is not None:
            check_count("num_inducing", self.num_inducing)
        if not self.shared_inducing and not self._collapsed():
            raise ValueError(f"shared_inducing=False gives each {self.noun} its own inducing "
                             "inputs; it applies to inference='collapsed', not "
                             f"{str(self._inference())!r}")

    def _exact_size_limit(self) -> int | None:
        return None if self._collapsed() else self.max_exact_points

    def _driver_call(self, method: str, num_points: int, given: dict, exact: bool) -> DriverCall:
        """The collapsed sparse model (``<model>_sparse``, M inducing inputs at N, no exact
        size limit) for ``inference="collapsed"``, unless ``exact`` (the search's type-II
        fits of the exact model)."""
        call = super()._driver_call(method, num_points, given, exact)
        if exact or not self._collapsed():
            return call
        model_options = {"seed": self.seed,
                         "num_inducing": resolve_num_inducing(self.num_inducing, num_points)}
        if not self.shared_inducing:  # inducing inputs per output
            model_options["shared_inducing"] = False
        return call._replace(model=self.model_name + "_sparse", model_options=model_options,
                             max_exact_points=None)

    # ------------------------------------------------------------ the search
    def _validation_splits(self, y):
        """(train, validation) index pairs of the ``selection``'s ``"cv"`` or
        ``"holdout"`` (``"loo"`` here: a collapsed fit, cross-validated)."""
        selection = self._selection()
        if selection.validation in ("cv", "loo"):
            return stratified_folds(y, num_folds=selection.cv_folds, seed=self.seed)
        n = len(y)
        split = train_validation_split(np.arange(n)[:, None], y, seed=self.seed,
                                       val_fraction=selection.validation_fraction)
        return [(split.X_train[:, 0].astype(int), split.X_val[:, 0].astype(int))]

    def _held_out_losses(self, X, y, num_classes, grid, splits, name: str) -> dict:
        """{value: (n,) held-out NLL of each validation point} of a conjugate fit per value
        of ``grid`` on the (train, validation) index pairs ``splits`` (the validation points
        of every split in turn), with the hyperparameter estimate of the search
        (``_grid_method``)."""
        method = self._grid_method()
        losses, search = {}, Timer()
        for i, value in enumerate(grid):
            timer = Timer()
            parts = []
            for train, val in splits:
                result = self._fit_driver(X[train], y[train], num_classes,
                                          self._options_for(value), method=method,
                                          num_draws=1, progress_bar=False)
                p = result.predict_proba(X[val])
                with np.errstate(divide="ignore"):
                    parts.append(-np.log(p[np.arange(len(val)), y[val]]))
            losses[float(value)] = np.concatenate(parts)
            note(f"{name} {value:g} ({i + 1}/{len(grid)}): held-out NLL "
                 f"{np.mean(losses[float(value)]):.4f} ({len(splits)} fit(s), {timer}"
                 f"{time_left(search.seconds, i + 1, len(grid))})", self.progress)
        return losses

    def _search_grid(self, X, y, num_classes, grid, name: str, *,
                     on_training_data: bool = False, extend: bool = True
                     ) -> tuple[float, dict, SearchFit | None, tuple[str, ...]]:
        """(value with the least held-out NLL, {value: held-out NLL}, that value's
        ``SearchFit`` or None where the search refits per split, the grid edge it ended at
        as a phrase for the report, or none) over ``grid``.

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            grid: the candidate values.
            name: the option searched, for progress lines and the convergence report.
            on_training_data: score on the training data itself (one split whose validation
                part is all of it) instead of the ``selection``'s splits.
            extend: go past a falling edge of the grid (``_extend_search``): the default
                grids do, a grid the user gave (``Selection(grid=...)``) is kept as given.
                A search that still ends at a falling edge says so (the last item).
        """
        grid = tuple(grid)
        if not on_training_data and self._uses_loo():
            levels, search = self._levels(X, y, num_classes, name), Timer()

            def score(values):
                losses = {}
                for value in values:
                    timer = Timer()
                    losses[float(value)] = levels.score(value)((1.0,))[0]
                    done = len(levels.fits)
                    note(f"{name} {value:g} ({done}/{max(len(grid), done)}): leave-one-out "
                         f"NLL {np.mean(losses[float(value)]):.4f} ({timer}"
                         f"{time_left(search.seconds, done, len(grid))})", self.progress)
                return losses
            fits = levels.fits
        else:
            splits = ([(np.arange(len(y)), np.arange(len(y)))] if on_training_data
                      else self._validation_splits(y))

            def score(values):
                return self._held_out_losses(X, y, num_classes, values, splits, name)
            fits = {}
        losses = score(grid)
        if extend:
            losses = self._extend_search(losses, score, name, num_classes)
        edge = convergence.grid_edge(name, losses)
        scores = {v: float(np.mean(loss)) for v, loss in losses.items()}
        best = min(scores, key=scores.get)
        return best, scores, fits.get(best), () if edge is None else (edge,)

    # ------------------------------------------------------------ grid edges
    def _search_range(self, name: str, num_classes: int) -> tuple[float, float]:
        """The open interval of valid values of the searched option ``name``; subclasses."""
        return 0.0, math.inf

    def _beyond(self, name: str, values, edge: str, num_classes: int) -> float | None:
        """The value past the ``edge`` (``"low"``/``"high"``) of the grid ``values``,
        continuing the spacing of the last two values on the option's scale
        (``SEARCH_SCALES``); None where that leaves the option's range."""
        forward, inverse = SEARCH_SCALES[name]
        values = sorted(values)
        end, neighbour = (values[0], values[1]) if edge == "low" else (values[-1], values[-2])
        value = float(f"{inverse(2.0 * forward(end) - forward(neighbour)):.12g}")
        low, high = self._search_range(name, num_classes)
        return value if low < value < high and value not in values else None

    def _extend_search(self, losses: dict, score, name: str, num_classes: int) -> dict:
        """``losses`` ({value: (n,) held-out NLL per point}) with up to ``GRID_EXTENSIONS``
        values added past an edge of the grid while the best value is at that edge and the
        NLL still falls there (``convergence.falling_edge``); ``score(values)`` scores new
        values."""
        losses = dict(losses)
        for _ in range(GRID_EXTENSIONS):
            value = self._next_value(name, losses, num_classes)
            if value is None:
                break
            losses.update(score((value,)))
        return losses

    def _next_value(self, name: str, losses: dict, num_classes: int) -> float | None:
        """The value to score next past a falling edge of the grid of ``losses``
        (``convergence.falling_edge``, ``_beyond``); None when the search is done."""
        edge = convergence.falling_edge(losses)
        return None if edge is None else self._beyond(name, losses, edge, num_classes)

    def _uses_loo(self) -> bool:
        """Whether the smoothing level is chosen by closed-form leave-one-out:
        ``validation="loo"`` with an exact posterior (for a fit gone sparse past
        ``max_exact_points``, the exact model's on a subsample, ``_search_rows``);
        ``inference="collapsed"``'s posterior has no closed form and is cross-validated
        instead."""
        return (self._selection().validation == "loo"
                and self._inference() is not ConjugateInference.COLLAPSED)

    def _grid_method(self) -> str:
        """The driver method of the search's fits: type-II MAP when ``inference`` is
        ``"map"`` or ``"nuts"`` (whose hyperparameter posterior includes the priors; MAP is
        its cheap stand-in), type-II ML otherwise."""
        return "map" if self._inference() in (ConjugateInference.MAP,
                                              ConjugateInference.NUTS) else "exact"

    def _loo_key(self):
        """The key of the leave-one-out scores' shared normal draws, from the seed."""
        return jax.random.fold_in(jax.random.PRNGKey(check_seed(self.seed)), _LOO_KEY_TAG)

    def _level_options(self, name: str, value: float) -> dict:
        """The model options at ``value`` of the searched option ``name``."""
        return self._options_for(value)

    def _loo_scorer(self, X, y, num_classes, model_options, start: dict | None = None):
        """One fit on all the data with ``model_options`` (the search's method, started at
        ``start`` when given), as (a function of ``scales`` -> (G, N) leave-one-out NLL of
        each point, the latent scaled by each scale (``ppgpc.infer.loo``): scoring more
        scales needs no refit; the fit's ``SearchFit``)."""
        result, fit = self._point_fit(X, y, num_classes, model_options, start)
        mean, var = loo_latent(result)
        link, key = result.spec.log_link, self._loo_key()
        return (lambda scales: np.asarray(loo_nll(key, link, mean, var, y, tuple(scales),
                                                  pointwise=True)), fit)

    def _point_fit(self, X, y, num_classes, model_options, start: dict | None = None):
        """(driver result, ``SearchFit``) of the search's type-II fit (``_grid_method``) of
        the exact model on ``X``, ``y`` with ``model_options``, started at ``start`` when
        given (the exact model also where the final fit goes sparse past
        ``max_exact_points``)."""
        result = self._fit_driver(X, y, num_classes, model_options,
                                  method=self._grid_method(), exact=True, num_draws=1,
                                  progress_bar=self.progress, initial_hyperparameters=start)
        return result, SearchFit(dict(model_options), result.hyper_draw(), X, y,
                                 result.info.convergence.optimizers)

    def _initial_hypers(self, X, y, num_classes, options: dict) -> dict:
        """The model's own start (``ModelSpec.initial_hypers``) on the data with ``options``."""
        spec = get_spec(self.model_name)
        return spec.initial_hypers(spec.prepare(X, y, num_classes, **options),
                                   make_kernel(self.kernel))

    def _search_rows(self, y, name: str) -> np.ndarray | None:
        """(S,) sorted indices of the stratified subsample of ``SEARCH_ROWS`` rows (at most
        ``max_exact_points`` for a fit gone sparse) on which a leave-one-out search over
        ``name`` scores its levels (a progress line says so), None when there are no more
        rows than that."""
        size = min(SEARCH_ROWS, self.max_exact_points) if self._switched() else SEARCH_ROWS
        rows = self._stratified_rows(y, size)
        if rows is not None:
            note(f"{name}: leave-one-out search on a stratified subsample of {len(rows)} of "
                 f"{len(y)} rows", self.progress)
        return rows

    def _hyper_rows(self, y) -> np.ndarray | None:
        """(S,) sorted indices of the stratified subsample of ``HYPER_ROWS`` rows on which
        the kernel hyperparameters are fitted, None where every row is: no more rows than
        that, a fit that does not fit them by type-II ("exact", "map") on the exact model,
        or hyperparameters the user gave."""
        if (self._method() not in ("exact", "map") or self._collapsed()
                or self._given_options().get("hyperparameters") is not None):
            return None
        return self._stratified_rows(y, HYPER_ROWS)

    def _stratified_rows(self, y, size: int) -> np.ndarray | None:
        """(S,) sorted indices of about ``size`` rows, each class keeping its share of them
        (at least two, or all it has), drawn with the estimator's seed; None when there are
        no more than ``size`` rows."""
        n = len(y)
        if n <= size:
            return None
        rng = np.random.default_rng(check_seed(self.seed))
        rows = []
        for c in np.unique(y):
            members = np.flatnonzero(y == c)
            k = min(len(members), max(2, int(round(len(members) * size / n))))
            rows.append(rng.choice(members, size=k, replace=False))
        return np.sort(np.concatenate(rows))

    def _final_options(self, fit: SearchFit | None, X, y, num_classes, options: dict) -> dict:
        """The final fit's driver options.

        * Past ``HYPER_ROWS`` rows (a type-II fit of the exact model, ``_hyper_rows``): the
          hyperparameters of a type-II fit at the chosen level on the stratified subsample,
          as given values (as they are: the rows change, the level does not): ``fit``
          itself where it is that fit, otherwise a fit that starts from ``fit`` carried over
          to the subsample and level (``_transported_start``; a few steps where ``fit`` is
          the same rows at another ILR epsilon). Its check and a note go into the fit's
          report (``_report_optimizers``, ``_report_notes``).
        * Otherwise, for a type-II final fit ("exact" or "map", also one gone sparse past
          ``max_exact_points``, whose inducing inputs start at the model's own), its start
          carried over from the chosen level's search fit; none without a search fit
          (``inference="collapsed"``, cross-validation) or for NUTS.
        """
        rows = self._hyper_rows(y)
        if rows is not None:
            if fit is None or fit.options != options or not np.array_equal(fit.X, X[rows]):
                start = None if fit is None else self._transported_start(
                    fit, X[rows], y[rows], num_classes, options)
                fit = self._point_fit(X[rows], y[rows], num_classes, options, start)[1]
            kind = "type-II MAP" if self._grid_method() == "map" else "type-II ML"
            self._hyper_fit = (f"kernel hyperparameters by {kind} on a stratified subsample "
                               f"of {fit.X.shape[0]} of {len(y)} rows; the exact posterior "
                               f"conditioned on all of them", fit.checks)
            return {"hyperparameters": dict(fit.hypers)}
        if fit is None or self._method() not in ("exact", "map"):
            return {}
        return {"initial_hyperparameters":
                self._transported_start(fit, X, y, num_classes, options)}

    def _transported_start(self, fit: SearchFit, X, y, num_classes, options: dict) -> dict:
        """``fit``'s hyperparameters moved to the model ``options`` of another smoothing
        level on the data ``X``, ``y`` (the fit's own, or all the rows of a search's
        subsample), by the change in the model's own data-driven start
        (``ModelSpec.initial_hypers``) between the two: a positive site is multiplied
        by the ratio of its starts (the kernel variance follows the targets' square scale),
        any other moved by their difference (GPD's class means follow the targets' level);
        a site whose start does not depend on the level (the lengthscales) stays where the
        fit left it. Under type-II ML, ILR's fit at one epsilon transported to another is
        that level's optimum (the targets and the noise scale together)."""
        old = self._initial_hypers(fit.X, fit.y, num_classes, fit.options)
        new = self._initial_hypers(X, y, num_classes, options)
        start = {}
        for site, value in fit.hypers.items():
            value, a, b = (np.asarray(v, dtype=np.float64) for v in (value, old[site], new[site]))
            if np.all(a > 0) and np.all(b > 0) and np.all(value > 0):
                start[site] = value * (b / a)
            else:
                start[site] = value + (b - a)
        return start

    # ------------------------------------------------------------ saving
    def saved_params(self) -> dict:
        params = super().saved_params()
        if isinstance(params["selection"], Selection):
            params["selection"] = params["selection"].to_dict()
        return params

    @classmethod
    def params_from_saved(cls, params: dict) -> dict:
        params = dict(params)
        if isinstance(params.get("selection"), dict):
            params["selection"] = Selection(**params["selection"])
        return params

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
With ``progress=True`` each scored value writes a line to stderr.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from ppgpc.datasets import stratified_folds, train_validation_split
from ppgpc.estimators.base import GPClassifierBase
from ppgpc.estimators.options import ConjugateInference, Selection, as_selection
from ppgpc.gp.inducing import resolve_num_inducing
from ppgpc.infer import convergence
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.runtime.progress import Timer, note
from ppgpc.validation import check_count, check_flag, check_seed

__all__ = ["ConjugateClassifier", "GRID_EXTENSIONS", "SEARCH_SCALES"]

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


class ConjugateClassifier(GPClassifierBase):
    """Base of ``ILRGPClassifier`` and ``DirichletGPClassifier``; subclasses give
    ``_options_for(value)``, the model options at one smoothing level."""

    inference_choices = ConjugateInference
    noun = "class"
    """What a sparse output is, for ``shared_inducing`` errors (a class, an ILR coordinate)."""

    # ------------------------------------------------------------ settings
    def _selection(self) -> Selection:
        return as_selection(self.selection)

    def _collapsed(self) -> bool:
        """Whether the fit is the collapsed sparse one (``inference="collapsed"``)."""
        return self._inference() is ConjugateInference.COLLAPSED

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

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        if not self._collapsed():
            return super()._fit_driver(X, y, num_classes, model_options, method=method,
                                       **options)
        method = method or self._method()
        opts = {**self._given_options(), **options}
        model_options = {**model_options, "seed": self.seed,
                         "num_inducing": resolve_num_inducing(self.num_inducing, X.shape[0])}
        if not self.shared_inducing:  # inducing inputs per output
            model_options["shared_inducing"] = False
        return self._run_driver(self.model_name + "_sparse", X, y, num_classes,
                                method=method, model_options=model_options,
                                max_exact_points=None, options=opts)

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
        losses = {}
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
                 f"{np.mean(losses[float(value)]):.4f} ({len(splits)} fit(s), {timer})",
                 self.progress)
        return losses

    def _search_grid(self, X, y, num_classes, grid, name: str, *,
                     on_training_data: bool = False, extend: bool = True
                     ) -> tuple[float, dict]:
        """(value with the least held-out NLL, {value: held-out NLL}) over ``grid``.

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            grid: the candidate values.
            name: the option searched, for progress lines and the convergence report.
            on_training_data: score on the training data itself (one split whose validation
                part is all of it) instead of the ``selection``'s splits.
            extend: go past a falling edge of the grid (``_extend_search``): the default
                grids do, a grid the user gave (``Selection(grid=...)``) is kept as given.
                A search that still ends at a falling edge is noted in the fit's report.
        """
        grid = tuple(grid)
        if not on_training_data and self._uses_loo():
            def score(values):
                return self._loo_grid_losses(X, y, num_classes, values, name)
        else:
            splits = ([(np.arange(len(y)), np.arange(len(y)))] if on_training_data
                      else self._validation_splits(y))

            def score(values):
                return self._held_out_losses(X, y, num_classes, values, splits, name)
        losses = score(grid)
        if extend:
            losses = self._extend_search(losses, score, name, num_classes)
        convergence.note_grid_edge(convergence.grid_edge(name, losses))
        scores = {v: float(np.mean(loss)) for v, loss in losses.items()}
        return min(scores, key=scores.get), scores

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
        ``validation="loo"`` with an exact posterior; the collapsed sparse posterior has no
        closed form and is cross-validated instead."""
        return self._selection().validation == "loo" and not self._collapsed()

    def _grid_method(self) -> str:
        """The driver method of the search's fits: type-II MAP when ``inference`` is
        ``"map"`` or ``"nuts"`` (whose hyperparameter posterior includes the priors; MAP is
        its cheap stand-in), type-II ML otherwise."""
        return "map" if self._inference() in (ConjugateInference.MAP,
                                              ConjugateInference.NUTS) else "exact"

    def _loo_key(self):
        """The key of the leave-one-out scores' shared normal draws, from the seed."""
        return jax.random.fold_in(jax.random.PRNGKey(check_seed(self.seed)), _LOO_KEY_TAG)

    def _loo_grid_losses(self, X, y, num_classes, grid, name: str) -> dict:
        """{value: (N,) leave-one-out NLL per point}: one fit on all the data per value (the
        same shapes, so one compilation), scored by the closed-form leave-one-out
        predictive with its hyperparameters held fixed (``ppgpc.infer.loo``)."""
        losses = {}
        for i, value in enumerate(grid):
            timer = Timer()
            scorer = self._loo_scorer(X, y, num_classes, self._options_for(value))
            losses[float(value)] = scorer((1.0,))[0]
            note(f"{name} {value:g} ({i + 1}/{len(grid)}): leave-one-out NLL "
                 f"{np.mean(losses[float(value)]):.4f} ({timer})", self.progress)
        return losses

    def _loo_scorer(self, X, y, num_classes, model_options):
        """One fit on all the data with ``model_options`` (the search's method), as a
        function of ``scales`` -> (G, N) leave-one-out NLL of each point, the latent scaled
        by each scale (``ppgpc.infer.loo``): scoring more scales needs no refit."""
        result = self._fit_driver(X, y, num_classes, model_options,
                                  method=self._grid_method(), num_draws=1,
                                  progress_bar=False)
        mean, var = loo_latent(result)
        link, key = result.spec.log_link, self._loo_key()
        return lambda scales: np.asarray(loo_nll(key, link, mean, var, y, tuple(scales),
                                                 pointwise=True))

    # ------------------------------------------------------------ saving
    def _saved_params(self) -> dict:
        params = super()._saved_params()
        if isinstance(params["selection"], Selection):
            params["selection"] = params["selection"].to_dict()
        return params

    @classmethod
    def _params_from_saved(cls, params: dict) -> dict:
        params = dict(params)
        if isinstance(params.get("selection"), dict):
            params["selection"] = Selection(**params["selection"])
        return params

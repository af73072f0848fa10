"""What ILR-GP and GPD share: conjugate GP regression on transformed labels, with exact,
MAP, NUTS or collapsed sparse inference, and a smoothing level chosen by held-out NLL.

The smoothing search scores each candidate value by held-out negative log-likelihood,
pooled over the validation points (``Selection``): by the closed-form leave-one-out
predictive of one fit on all the data (``"loo"``, exact posteriors only), by stratified
cross-validation with refits (``"cv"``), or on one stratified hold-out (``"holdout"``).
With ``progress=True`` each scored value writes a line to stderr.
"""

from __future__ import annotations

import jax
import numpy as np

from ppgpc import metrics
from ppgpc.datasets import stratified_folds, train_validation_split
from ppgpc.estimators.base import GPClassifierBase
from ppgpc.estimators.options import Selection, as_selection
from ppgpc.sparse import resolve_num_inducing
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.progress import Timer, note
from ppgpc.validation import check_count, check_flag, check_seed

__all__ = ["ConjugateClassifier", "CONJUGATE_INFERENCE"]

CONJUGATE_INFERENCE = {"map": "map", "exact": "exact", "nuts": "nuts", "collapsed": "exact"}
"""``inference`` -> driver method: ``"map"`` type-II MAP and the closed-form posterior,
``"exact"`` type-II ML, ``"nuts"`` NUTS, ``"collapsed"`` Titsias's collapsed sparse bound
(the model's ``_sparse`` variant) by type-II ML."""

_LOO_KEY_TAG = 0x100
"""``fold_in`` tag of the leave-one-out scores' key (``ConjugateClassifier._loo_key``)."""


class ConjugateClassifier(GPClassifierBase):
    """Base of ``ILRGPClassifier`` and ``DirichletGPClassifier``; subclasses give
    ``_options_for(value)``, the model options at one smoothing level."""

    inference_methods = CONJUGATE_INFERENCE
    noun = "class"
    """What a sparse output is, for ``shared_inducing`` errors (a class, an ILR coordinate)."""

    # ------------------------------------------------------------ settings
    def _selection(self) -> Selection:
        return as_selection(self.selection)

    def _check_model_settings(self) -> None:
        self._selection()
        check_flag("shared_inducing", self.shared_inducing)
        if self.inference == "collapsed" and self.num_inducing is not None:
            check_count("num_inducing", self.num_inducing)
        if not self.shared_inducing and self.inference != "collapsed":
            raise ValueError(f"shared_inducing=False gives each {self.noun} its own inducing "
                             "inputs; it applies to inference='collapsed', not "
                             f"{self.inference!r}")

    def _exact_size_limit(self) -> int | None:
        return None if self.inference == "collapsed" else self.max_exact_points

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        if self.inference != "collapsed":
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

    def _held_out_nll(self, X, y, num_classes, grid, splits, name: str) -> dict:
        """{value: pooled held-out NLL} of a conjugate fit per value of ``grid`` on the
        (train, validation) index pairs ``splits``, with the hyperparameter estimate of the
        search (``_grid_method``): sum of validation NLLs / number of validation points."""
        method = self._grid_method()
        scores = {}
        for i, value in enumerate(grid):
            timer = Timer()
            losses = []
            for train, val in splits:
                result = self._fit_driver(X[train], y[train], num_classes,
                                          self._options_for(value), method=method,
                                          num_draws=1, progress_bar=False)
                losses.append(metrics.nll(result.predict_proba(X[val]), y[val]) * len(val))
            scores[float(value)] = float(np.sum(losses) / sum(len(v) for _, v in splits))
            note(f"{name} {value:g} ({i + 1}/{len(grid)}): held-out NLL "
                 f"{scores[float(value)]:.4f} ({len(splits)} fit(s), {timer})", self.progress)
        return scores

    def _search_grid(self, X, y, num_classes, grid, name: str, *,
                     on_training_data: bool = False) -> tuple[float, dict]:
        """(value of ``grid`` with the least held-out NLL, {value: NLL}).

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            grid: the candidate values.
            name: the option searched, for progress lines.
            on_training_data: score on the training data itself (one split whose validation
                part is all of it) instead of the ``selection``'s splits.
        """
        grid = tuple(grid)
        if not on_training_data and self._uses_loo():
            scores = self._loo_grid_scores(X, y, num_classes, grid, name)
        else:
            splits = ([(np.arange(len(y)), np.arange(len(y)))] if on_training_data
                      else self._validation_splits(y))
            scores = self._held_out_nll(X, y, num_classes, grid, splits, name)
        return min(scores, key=scores.get), scores

    def _uses_loo(self) -> bool:
        """Whether the smoothing level is chosen by closed-form leave-one-out:
        ``validation="loo"`` with an exact posterior; the collapsed sparse posterior has no
        closed form and is cross-validated instead."""
        return self._selection().validation == "loo" and self.inference != "collapsed"

    def _grid_method(self) -> str:
        """The driver method of the search's fits: type-II MAP when ``inference`` is
        ``"map"`` or ``"nuts"`` (whose hyperparameter posterior includes the priors; MAP is
        its cheap stand-in), type-II ML otherwise."""
        return "map" if self.inference in ("map", "nuts") else "exact"

    def _loo_key(self):
        """The key of the leave-one-out scores' shared normal draws, from the seed."""
        return jax.random.fold_in(jax.random.PRNGKey(check_seed(self.seed)), _LOO_KEY_TAG)

    def _loo_grid_scores(self, X, y, num_classes, grid, name: str) -> dict:
        """{value: leave-one-out NLL}: one fit on all the data per value (the same shapes,
        so one compilation), scored by the closed-form leave-one-out predictive with its
        hyperparameters held fixed (``ppgpc.infer.loo``)."""
        scores = {}
        for i, value in enumerate(grid):
            timer = Timer()
            scores[float(value)] = float(self._loo_nll_of_fit(X, y, num_classes,
                                                              self._options_for(value))[0])
            note(f"{name} {value:g} ({i + 1}/{len(grid)}): leave-one-out NLL "
                 f"{scores[float(value)]:.4f} ({timer})", self.progress)
        return scores

    def _loo_nll_of_fit(self, X, y, num_classes, model_options, scales=(1.0,)):
        """(G,) leave-one-out NLL of one fit on all the data with ``model_options`` (the
        search's method), its latent scaled by each of ``scales``
        (``ppgpc.infer.loo.loo_nll``)."""
        result = self._fit_driver(X, y, num_classes, model_options,
                                  method=self._grid_method(), num_draws=1,
                                  progress_bar=False)
        mean, var = loo_latent(result)
        return loo_nll(self._loo_key(), result.spec.log_link, mean, var, y, scales)

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

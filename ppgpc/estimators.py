"""scikit-learn-style estimators on top of the inference driver.

Every classifier follows the same conventions:

* they are scikit-learn estimators (``BaseEstimator``, ``ClassifierMixin``): the
  constructor only stores its arguments, so ``get_params``, ``set_params``, ``clone``,
  pipelines, ``cross_val_score`` and ``GridSearchCV`` work, and inputs are checked with
  scikit-learn's own helpers (``validate_data``, ``check_classification_targets``,
  ``check_is_fitted``) before ppgpc's checks of what they leave out;
* ``fit(X, y)`` takes any hashable labels; ``classes_`` holds the sorted unique labels and
  the model sees their indices 0..C-1 (as scikit-learn does); ``n_features_in_`` and, for
  inputs with string column names (a pandas DataFrame), ``feature_names_in_`` are recorded,
  and predicting from columns that differ in name or order is refused;
* ``predict_proba(X)`` returns a NumPy array (n, C) whose rows sum to 1, columns ordered as
  ``classes_``; ``predict`` returns labels from ``classes_``; ``score`` is the accuracy;
* ``to_inference_data(X=None)`` exports the posterior (and predictions at X) to ArviZ;
* inputs are z-scored with the training statistics by default (``standardize=True``;
  ``"robust"``: median and interquartile range, for columns with a few extreme values,
  which a warning at fit time points out; ``"minmax"``: the training range onto [0, 1];
  ``False``: as given);
* every random step derives its key from ``seed``, so fits are reproducible.
"""

from __future__ import annotations

import numbers
import warnings

import jax
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ppgpc import metrics
from ppgpc.datasets import Standardizer, stratified_folds, train_validation_split
from ppgpc.infer import fit as run_inference
from ppgpc.infer import to_inference_data
from ppgpc.infer.driver import check_method_options
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.infer.svi import default_batch_size
from ppgpc.models import get_spec
from ppgpc.persistence import load_estimator, save_estimator
from ppgpc.validation import (
    MAX_EXACT_POINTS,
    check_count,
    check_exact_size,
    check_features,
    check_flag,
    check_labels,
    check_positive,
    check_probability,
    check_seed,
    check_size_limit,
    encode_labels,
)

__all__ = ["GPClassifierBase", "ILRGPClassifier", "DirichletGPClassifier",
           "LogisticSoftmaxGPClassifier", "SoftmaxSVGPClassifier", "ESTIMATORS"]

OUTLIER_SCORE = 20.0
"""A z-scored training value this far from 0 makes ``fit`` warn that the column's scale is
set by a few extreme values (and suggest ``standardize="robust"``)."""


def _warn_of_extreme_values(zscores: Standardizer, X: np.ndarray, method: str) -> None:
    """Warn when training values lie more than ``OUTLIER_SCORE`` standard deviations from
    their column's mean (``zscores``: the z-score Standardizer of X): a few extreme values
    then set the ``method`` scale and squash the rest of the column together."""
    score = zscores.max_abs_score(X)
    columns = np.flatnonzero(score > OUTLIER_SCORE)
    if columns.size:
        worst = columns[np.argmax(score[columns])]
        warnings.warn(
            f"{columns.size} input column(s) {columns.tolist()[:10]} have training values "
            f"up to {score[worst]:.0f} standard deviations from the mean (column {worst}): "
            f"a few extreme values set the {method} scale and squash the other values "
            "together, which can stall the hyperparameter fit; consider "
            "standardize='robust' (median / interquartile range) or removing the outliers",
            UserWarning, stacklevel=4)


def _fit_standardizer(X: np.ndarray, standardize) -> Standardizer | None:
    """The input scaling ``standardize`` asks for, fitted on X: True or ``"zscore"``,
    ``"robust"``, ``"minmax"``, or False / None for none. Z-scores and min-max warn of
    extreme training values (``_warn_of_extreme_values``)."""
    if standardize is False or standardize is None:
        return None
    if standardize == "robust":
        return Standardizer.fit(X, method="robust")
    if standardize is True or standardize == "zscore":
        zscores = Standardizer.fit(X)
        _warn_of_extreme_values(zscores, X, "z-score")
        return zscores
    if standardize == "minmax":
        _warn_of_extreme_values(Standardizer.fit(X), X, "min-max")
        return Standardizer.fit(X, method="minmax")
    raise ValueError("standardize must be True (or 'zscore'), 'robust', 'minmax' or False; "
                     f"got {standardize!r}")


COLLAPSED_NOISE_SCALE = 1e-6
"""A learned noise scale below this (a noise standard deviation under 1/1000 of the default
level) makes ``fit`` warn that the fit has collapsed onto interpolating its targets."""


def _warn_of_collapsed_noise(scale, names: np.ndarray, kind: str = "class(es)") -> None:
    """Warn when a learned noise scale (a float, or one per class for GPD or per ILR
    coordinate for Collapsed-ILR with per-coordinate inducing inputs: ``names`` names them,
    ``kind`` says what they are) fell below ``COLLAPSED_NOISE_SCALE``.

    Type-II maximum likelihood does this on exact GP regression of class labels without
    label noise: the smoothed labels are constant within a class, an interpolating GP fits
    them exactly, and the marginal likelihood keeps rising as the noise goes to zero, so the
    optimiser runs to the boundary (glass, 60 points: 1e-92 for ILR-GP, 1e-24 to 1e-26 for
    three of GPD's six classes). The fit then rests on the Cholesky jitter alone. MAP's
    LogNormal(0, 1) prior holds the scale off zero on small sets (glass and wine, 150
    points: 0.007 to 0.009) but not on larger ones (letter, 3000 points: 5e-19). Titsias's
    bound does not do this: its trace term grows as the noise shrinks.
    """
    if scale is None:
        return
    values = np.atleast_1d(np.asarray(scale, dtype=float))
    low = np.flatnonzero(values < COLLAPSED_NOISE_SCALE)
    if not low.size:
        return
    where = "" if np.ndim(scale) == 0 else f" for {kind} {names[low].tolist()[:10]}"
    warnings.warn(
        f"the learned noise scale fell to {values[low].min():.2g} times the default noise "
        f"level{where}: the GP interpolates the smoothed labels, as maximum likelihood tends "
        "to on exact GP regression of labels without label noise, and the fit rests on the "
        "Cholesky jitter; keep the default noise (learn_noise_scale=False): the "
        "LogNormal(0, 1) prior of inference='map' holds the scale off zero only on small "
        "data sets",
        UserWarning, stacklevel=3)


def _fitted_noise_scale(result):
    """The learned noise scale of a fit (its mean over draws under NUTS): a float for
    ILR-GP, a (C-1,) array for Collapsed-ILR with per-coordinate inducing inputs, a (C,)
    array for GPD; None when the model has no ``noise_scale`` site."""
    scale = result.hypers.get("noise_scale")
    if scale is None:
        return None
    value = np.asarray(scale).mean(axis=(0, 1))
    return float(value) if value.ndim == 0 else value


def _is_fitted_attribute(name: str) -> bool:
    """scikit-learn's convention: fitted state is in attributes named ``something_``."""
    return name.endswith("_") and not name.startswith("_")


_INFERENCE_TO_METHOD = {"exact": "exact", "map": "map", "nuts": "nuts", "collapsed": "exact"}

_LOO_KEY_TAG = 0x100
"""``fold_in`` tag of the leave-one-out scores' key (``GPClassifierBase._loo_key``)."""

_ITERATION_COUNTS = ("svi_steps", "cavi_iterations", "optimizer_iterations",
                     "init_optimizer_iterations")
"""``FitResult.info`` entries that count an optimiser's iterations, in the order ``n_iter_``
reads them: SVI steps, CAVI iterations, L-BFGS / Adam iterations of type-II ML or MAP (of
the final fit, or of the fit that started NUTS)."""


def _iterations(info: dict) -> int:
    """The iterations of the optimiser that fitted a result (``_ITERATION_COUNTS``), 0 where
    none ran (hyperparameters given, or sampled by MCMC)."""
    return next((int(info[k]) for k in _ITERATION_COUNTS if k in info), 0)


def _check_class_labels(y: np.ndarray) -> None:
    """Refuse a continuous target: y must hold class labels (scikit-learn's
    ``check_classification_targets``: "Unknown label type: continuous").

    scikit-learn calls every object array that does not start with a string "unknown"; an
    object array of real numbers (a pandas column of mixed ints and floats, say) is judged
    by its values instead, as a numeric array.
    """
    if y.dtype.kind == "O" and all(isinstance(v, numbers.Real) for v in y.tolist()):
        check_classification_targets(np.asarray(y.tolist()))
    else:
        check_classification_targets(y)


SPARSE_NUM_DRAWS = 256
"""Default predictive draws for ``inference="collapsed"`` (the latent draws at the training
inputs are (draws, N, L) floats, which 1000 draws make gigabytes on the large UCI sets)."""


class GPClassifierBase(ClassifierMixin, BaseEstimator):
    """Shared machinery of the ppgpc estimators; subclasses set the model and its options.

    A scikit-learn classifier: ``get_params`` / ``set_params`` read and write the
    constructor's arguments, which ``fit`` checks (never ``__init__``); every estimator
    pickles (``joblib`` workers need it; to keep a model, ``save`` it instead).

    Attributes every estimator has after fit:
        classes_: (C,) the sorted class labels.
        n_features_in_: D, the number of input columns.
        feature_names_in_: (D,) the column names, when X had string column names (a
            pandas DataFrame); prediction then needs the same names in the same order.
        n_iter_: iterations of the optimiser that the final fit records in
            ``result_.info``: SVI steps, CAVI iterations, or L-BFGS / Adam iterations of
            type-II ML / MAP (for NUTS and Gibbs, of the fit of their hyperparameters); 0
            where it ran none (hyperparameters given or sampled).
        standardizer_: the input scaling fitted on X (None with ``standardize=False``).
        result_: the driver's ``FitResult``.
    """

    model_name: str = ""
    has_noise_scale: bool = False
    """Whether the model can learn a noise scale; ``fit`` then records ``noise_scale_``."""

    def __init__(self, *, kernel="rbf-ard", inference: str = "exact", standardize: bool | str = True,
                 seed: int = 0, max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _store_params(self, arguments: dict) -> None:
        """Store each constructor argument as the attribute of the same name.

        The scikit-learn convention: a constructor only records its arguments (``fit``
        checks them), and ``ppgpc.persistence`` saves and rebuilds an estimator from these
        attributes. Every ``__init__`` calls this first, with its ``locals()``, which then
        hold ``self`` and exactly the constructor's parameters.
        """
        for name, value in arguments.items():
            if name not in ("self", "__class__"):
                setattr(self, name, value)

    # ------------------------------------------------------------------ hooks
    def _model_options(self) -> dict:
        """Options passed to the model's ``prepare`` for the final fit."""
        return {}

    def _select_model_options(self, X, y, num_classes) -> dict:
        """Choose data-dependent model options (e.g. epsilon by validation); default: none."""
        return self._model_options()

    # --------------------------------------------------------------- helpers
    def _unknown_inference(self, choices) -> ValueError:
        """The error for an ``inference`` setting that is not one of ``choices``."""
        return ValueError(f"{type(self).__name__} does not know inference="
                          f"{self.inference!r}; choose from {list(choices)}")

    def _method(self) -> str:
        try:
            return _INFERENCE_TO_METHOD[self.inference]
        except KeyError:
            raise self._unknown_inference(sorted(_INFERENCE_TO_METHOD)) from None

    def _given_options(self) -> dict:
        """A copy of ``inference_options`` (empty when it is None)."""
        return dict(self.inference_options or {})

    def _run_driver(self, model_name: str, X, y, num_classes: int, *, method: str,
                    model_options: dict, max_exact_points: int | None, options: dict):
        """``ppgpc.infer.fit`` of ``model_name`` with this estimator's kernel and seed.

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            options: the method's options (``ppgpc.infer.fit`` keywords).
        """
        return run_inference(
            model_name, X, y, method=method, num_classes=num_classes, kernel=self.kernel,
            model_options=model_options, seed=self.seed,
            max_exact_points=max_exact_points, **options,
        )

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        method = method or self._method()
        opts = self._given_options() if method == self._method() else {}
        opts.update(options)
        model_name, max_points = self.model_name, self.max_exact_points
        if self.inference == "collapsed":  # the model's collapsed sparse variant (Titsias)
            model_name, max_points = model_name + "_sparse", None
            model_options = {**model_options, "num_inducing": int(self.num_inducing),
                             "seed": self.seed}
            if not getattr(self, "shared_inducing", True):  # inducing inputs per output
                model_options["shared_inducing"] = False
            opts.setdefault("num_draws", SPARSE_NUM_DRAWS)
        return self._run_driver(model_name, X, y, num_classes, method=method,
                                model_options=model_options, max_exact_points=max_points,
                                options=opts)

    def _check_fitted(self):
        """scikit-learn's ``NotFittedError`` (a ValueError and AttributeError) before fit."""
        check_is_fitted(self, "result_")

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        """X as a finite float64 array (n, D).

        scikit-learn's ``validate_data`` checks the array (2-D, numeric, not complex, not
        sparse, not empty, at least 2 samples when fitting) and the columns: with
        ``reset`` (fit) it records ``n_features_in_`` and, for string column names,
        ``feature_names_in_``; otherwise it refuses a different number of columns, or names
        that differ from fit's or come in another order. ppgpc's ``check_features`` then
        names the rows with NaN or infinite values and refuses values that overflow the
        kernel.
        """
        X = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=False,
                          ensure_min_samples=2 if reset else 1)
        return check_features(X)

    def _transform(self, X) -> np.ndarray:
        X = self._validate_X(X, reset=False)
        return self.standardizer_.transform(X) if self.standardizer_ is not None else X

    def _validation_splits(self, y):
        """(train, validation) index pairs for choosing a smoothing parameter.

        Uses the subclass's ``validation`` ("cv" or "holdout"), ``cv_folds`` and
        ``validation_fraction`` settings.
        """
        if self.validation in ("cv", "loo"):  # "loo" here: a collapsed fit (_uses_loo)
            return stratified_folds(y, num_folds=self.cv_folds, seed=self.seed)
        if self.validation == "holdout":
            n = len(y)
            split = train_validation_split(np.arange(n)[:, None], y, seed=self.seed,
                                           val_fraction=self.validation_fraction)
            return [(split.X_train[:, 0].astype(int), split.X_val[:, 0].astype(int))]
        raise ValueError(f"validation must be 'loo', 'cv' or 'holdout', got "
                         f"{self.validation!r}")

    def _held_out_nll(self, X, y, num_classes, grid, splits) -> dict:
        """Pooled held-out NLL of a conjugate fit for each value of a smoothing grid.

        The fits use the hyperparameter estimate of the final fit: type-II MAP when
        ``inference`` is ``"map"`` or ``"nuts"`` (whose hyperparameter posterior includes the
        priors; MAP is its cheap stand-in), type-II ML otherwise.

        Args:
            grid: the values; ``self._options_for(value)`` gives the model options.
            splits: (train, validation) index pairs.

        Returns:
            {value: sum of validation NLLs / number of validation points}.
        """
        method = self._grid_method()
        scores = {}
        for value in grid:
            losses = []
            for train, val in splits:
                result = self._fit_driver(X[train], y[train], num_classes,
                                          self._options_for(value), method=method, num_draws=1)
                losses.append(metrics.nll(result.predict_proba(X[val]), y[val]) * len(val))
            scores[float(value)] = float(np.sum(losses) / sum(len(v) for _, v in splits))
        return scores

    def _search_grid(self, X, y, num_classes, grid, grid_name: str, *,
                     on_training_data: bool = False) -> tuple[float, dict]:
        """The value of a smoothing grid with the least held-out NLL (``_held_out_nll``).

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            grid: the candidate values; an empty grid raises ``"<grid_name> is empty"``.
            grid_name: the constructor parameter that gave the grid, for that error.
            on_training_data: score on the training data itself (one split whose validation
                part is all of it) instead of the ``validation`` splits.

        Returns:
            (best value, {value: NLL}).
        """
        grid = tuple(grid)
        if not grid:
            raise ValueError(f"{grid_name} is empty")
        if not on_training_data and self._uses_loo():
            scores = self._loo_grid_scores(X, y, num_classes, grid)
        else:
            splits = ([(np.arange(len(y)), np.arange(len(y)))] if on_training_data
                      else self._validation_splits(y))
            scores = self._held_out_nll(X, y, num_classes, grid, splits)
        return min(scores, key=scores.get), scores

    def _uses_loo(self) -> bool:
        """Whether the smoothing level is chosen by closed-form leave-one-out: with
        ``validation="loo"`` and an exact posterior (``inference`` ``"exact"``, ``"map"`` or
        ``"nuts"``); the collapsed sparse posterior has no closed form and is
        cross-validated (stratified ``cv_folds`` folds) instead."""
        return self.validation == "loo" and self.inference in ("exact", "map", "nuts")

    def _grid_method(self) -> str:
        """The driver method of the smoothing search's fits: type-II MAP when ``inference``
        is ``"map"`` or ``"nuts"`` (whose hyperparameter posterior includes the priors; MAP
        is its cheap stand-in), type-II ML otherwise."""
        return "map" if self.inference in ("map", "nuts") else "exact"

    def _loo_key(self):
        """The key of the leave-one-out scores' shared normal draws, from the seed."""
        return jax.random.fold_in(jax.random.PRNGKey(check_seed(self.seed)), _LOO_KEY_TAG)

    def _loo_grid_scores(self, X, y, num_classes, grid) -> dict:
        """{value: leave-one-out NLL} of a smoothing grid: one fit on all the data per
        value (the same shapes, so one compilation), scored by the closed-form leave-one-out
        predictive with its hyperparameters held fixed (``ppgpc.infer.loo``)."""
        return {float(value): float(self._loo_nll_of_fit(X, y, num_classes,
                                                         self._options_for(value))[0])
                for value in grid}

    def _loo_nll_of_fit(self, X, y, num_classes, model_options, scales=(1.0,)):
        """(G,) leave-one-out NLL of one fit on all the data with ``model_options`` (the
        smoothing search's method), its latent scaled by each of ``scales``
        (``ppgpc.infer.loo.loo_nll``)."""
        result = self._fit_driver(X, y, num_classes, model_options,
                                  method=self._grid_method(), num_draws=1)
        mean, var = loo_latent(result)
        return loo_nll(self._loo_key(), result.spec.log_link, mean, var, y, scales)

    # ------------------------------------------------------------ public API
    def fit(self, X, y):
        """Fit the classifier.

        Args:
            X: (N, D) numeric inputs without NaN (an array, or a DataFrame whose column
                names are then required, in the same order, for prediction).
            y: (N,) class labels of any hashable type; at least two distinct classes. A
                column (N, 1) is raveled with scikit-learn's ``DataConversionWarning``; a
                continuous target is refused.

        Returns:
            self.
        """
        previous = {k: v for k, v in vars(self).items() if _is_fitted_attribute(k)}
        try:
            self._method()  # validate the settings before any work
            check_seed(self.seed)
            X = self._validate_X(X, reset=True)  # records n_features_in_, feature_names_in_
            y = check_labels(column_or_1d(y, warn=True), X.shape[0])
            classes, codes = encode_labels(y)
            _check_class_labels(y)
            self._check_settings()
            # refuse a data set too large for the final fit now, before any validation fits
            limit = self._exact_size_limit()
            if limit is not None:
                check_exact_size(X.shape[0], limit, type(self).__name__,
                                 get_spec(self.model_name).sparse_alternative)
            self.classes_ = classes
            self.standardizer_ = _fit_standardizer(X, self.standardize)
            Xs = X if self.standardizer_ is None else self.standardizer_.transform(X)
            C = len(self.classes_)
            options = self._select_model_options(Xs, codes, C)
            self.result_ = self._fit_driver(Xs, codes, C, options)
            self.n_iter_ = _iterations(self.result_.info)
        except BaseException:
            # a failed fit leaves the previous fit (or none) in place, never a mixture of
            # new labels and scaling with an old posterior
            for k in [k for k in vars(self) if _is_fitted_attribute(k)]:
                delattr(self, k)
            vars(self).update(previous)
            raise
        if self.has_noise_scale:
            self.noise_scale_ = _fitted_noise_scale(self.result_)
            _warn_of_collapsed_noise(self.noise_scale_, *self._noise_scale_names())
        return self

    def _check_settings(self) -> None:
        """Check the constructor settings ``fit`` needs before any work (subclasses add
        theirs): ``max_exact_points`` and ``inference_options`` (before a smoothing search
        runs fits that would not use them)."""
        check_size_limit(self.max_exact_points)
        check_method_options(self._method(), self._given_options())

    def _exact_size_limit(self) -> int | None:
        """The ``max_exact_points`` the final fit applies (None for a sparse inference)."""
        return None if self.inference == "collapsed" else self.max_exact_points

    def _noise_scale_names(self) -> tuple[np.ndarray, str]:
        """What the entries of a per-entry ``noise_scale_`` stand for, for warnings: the
        names and their kind. The base class: one per class."""
        return self.classes_, "class(es)"

    def predict_proba(self, X) -> np.ndarray:
        """(n, C) predictive class probabilities, columns in the order of ``classes_``."""
        self._check_fitted()
        return self.result_.predict_proba(self._transform(X))

    def predict(self, X) -> np.ndarray:
        """(n,) most probable labels, taken from ``classes_``."""
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def _encode_known(self, y, num_samples: int) -> np.ndarray:
        y = check_labels(y, num_samples)
        index = {label: i for i, label in enumerate(self.classes_.tolist())}
        unknown = sorted({v for v in y.tolist() if v not in index}, key=str)
        if unknown:
            raise ValueError(
                f"y contains label(s) not seen during fit: {unknown[:10]}; known classes are "
                f"{self.classes_.tolist()}"
            )
        return np.array([index[v] for v in y.tolist()], dtype=np.int64)

    def score(self, X, y) -> float:
        """Accuracy on (X, y); labels unseen during fit raise a ValueError."""
        self._check_fitted()
        Xs = self._transform(X)
        codes = self._encode_known(y, Xs.shape[0])
        return metrics.accuracy(self.result_.predict_proba(Xs), codes)

    def evaluate(self, X, y, n_bins: int = 10) -> dict:
        """Accuracy, NLL, Brier and ECE (MATH.md section 5) on (X, y)."""
        self._check_fitted()
        Xs = self._transform(X)
        codes = self._encode_known(y, Xs.shape[0])
        return metrics.evaluate(self.result_.predict_proba(Xs), codes, n_bins=n_bins)

    def to_inference_data(self, X=None, y=None, *, thin=1, **kwargs):
        """ArviZ ``InferenceData`` of the fit, with a ``predictions`` group at X if given
        (and the true labels y there, for ``ppgpc.diagnostics``).

        Labels are exported as codes: every ``y`` variable and the ``class`` coordinate
        hold 0..C-1, and ``classes_`` (the original labels) is the ``class_label``
        coordinate along ``class``. Point hyperparameters (type-II ML / MAP) are one value
        each in ``constant_data``, marked by ``attrs["point_estimate"]``.

        ``thin`` keeps every ``thin``-th posterior draw; other keyword arguments
        (``key``, ``feature_names``, ``max_bytes``) go to
        ``ppgpc.infer.arviz_export.to_inference_data``.
        """
        self._check_fitted()
        if X is None and y is not None:
            raise ValueError("y gives the true labels of the predictions at X; pass X too "
                             "(the training labels are exported in observed_data already)")
        if "class_names" in kwargs or "y_pred" in kwargs:
            raise TypeError("an estimator names the classes by classes_ and takes the true "
                            "labels as y; do not pass class_names or y_pred")
        X_pred = None if X is None else self._transform(X)
        codes = None if y is None else self._encode_known(y, X_pred.shape[0])
        return to_inference_data(self.result_, X_pred, class_names=self.classes_, y_pred=codes,
                                 thin=thin, **kwargs)

    def save(self, path):
        """Save the fitted estimator to the folder ``path`` without pickle: netCDF arrays and
        JSON settings (``ppgpc.persistence``). Load it with ``ppgpc.load(path)`` or
        ``<Class>.load(path)``; the loaded estimator predicts bit for bit the same.

        Returns:
            The folder written.
        """
        return save_estimator(self, path, ESTIMATORS)

    @classmethod
    def load(cls, path):
        """Load an estimator saved by ``save`` (a TypeError if it is not a ``cls``)."""
        return load_estimator(path, ESTIMATORS, expected=cls)


class ILRGPClassifier(GPClassifierBase):
    """The ILR-GP classifier (MATH.md section 1): conjugate GP regression on ILR targets.

    Args:
        epsilon: label-smoothing level in (0, 1), or ``"auto"`` to choose it from
            ``epsilon_grid`` (default ``ppgpc.models.ilr_gp.EPSILON_GRID``) by held-out NLL,
            then refit on all the data. The ILR targets and the Proposition 1 noise both
            scale with a(epsilon) = log(1 + C epsilon / (1 - epsilon)), so epsilon acts as an
            inverse temperature of the fitted latent (``ppgpc.infer.loo``). With
            ``validation="loo"`` (the default) ONE fit on all the data scores the whole grid
            by its closed-form leave-one-out predictive, rescaled per level (exact under
            type-II ML; under MAP the kernel-variance prior makes it the rescaled fit's
            score); ``inference="collapsed"`` has no closed form and cross-validates
            instead. ``validation="cv"`` refits on stratified ``cv_folds`` folds for every
            grid value; ``"holdout"`` uses one stratified ``validation_fraction`` split as
            the paper does (noisy with the 15-20 validation points of a small UCI set).
        tau: Proposition 1 tolerance that sets the noise level sigma relative to the
            targets, or ``"auto"`` (the default) to choose it from
            ``ppgpc.models.ilr_gp.TAU_GRID`` jointly with epsilon by leave-one-out NLL (one
            fit per tau; where no leave-one-out runs, ``validation="cv"`` or
            ``"holdout"`` or ``inference="collapsed"``, ``"auto"`` means ``DEFAULT_TAU``,
            as does ``None``). On ten heavily overlapping classes a larger tolerance
            (more noise) is what helps (``docs/defaults.md``).
        noise_std: set sigma directly instead (overrides tau).
        learn_noise_scale: fit a factor s on the noise variance, s sigma^2, with the kernel
            hyperparameters (prior LogNormal(0, 1) under MAP and NUTS); one per ILR
            coordinate with ``inference="collapsed", shared_inducing=False``. The ILR paper
            offers this "more flexible likelihood" for Collapsed-ILR: with a small fixed sigma the
            sparse bound's trace penalty forces long lengthscales and underfits problems
            with many classes (letter). Not for ``inference="uncollapsed"``. With exact
            type-II ML on labels without label noise the scale tends to collapse towards 0
            (the GP then interpolates; ``fit`` warns): keep the default noise there.
            ``inference="map"`` holds the scale off zero only on small data sets.
        kernel: ``"rbf-ard"`` (default), ``"rbf"``, ``"matern52-ard"``, ``"matern52"`` or a
            kernel object (``ppgpc.kernels``).
        inference: ``"map"`` (the default: type-II MAP kernel hyperparameters, the kernel
            priors of ``ppgpc.kernels`` included, and the closed-form posterior; on these
            small data sets maximum likelihood lets ARD lengthscales run away, see
            ``docs/defaults.md``), ``"exact"`` (type-II ML), ``"nuts"`` (NUTS; options in
            ``inference_options``,
            e.g. ``{"form": "latent", "num_samples": 1000}``) or ``"collapsed"``
            (Collapsed-ILR: Titsias's sparse bound, inducing inputs learned with the
            hyperparameters, no size limit) or ``"uncollapsed"`` (Uncollapsed-ILR: the
            sparse variational classifier with the inverse-ILR link and a learned mixing
            matrix, fitted by minibatch SVI, model ``"ilr_gp_uncollapsed"``; it has a
            categorical likelihood, so epsilon and tau do not apply; SVI options such as
            ``batch_size``, ``max_iter``, ``learning_rate`` go in ``inference_options``;
            the expected log-likelihood uses q's marginals with 10 draws per point, as
            ``SoftmaxSVGPClassifier``'s default; that class, with ``link="ilr"``, also
            offers the other forms and a kernel and inducing inputs per latent).
        num_inducing: inducing points M for ``inference="collapsed"`` or
            ``"uncollapsed"`` (k-means++ start; at most N are used).
        shared_inducing: one set of M inducing inputs for all C-1 ILR coordinates
            (default) or M per coordinate (``inference="collapsed"`` or
            ``"uncollapsed"`` only). Per coordinate, Collapsed-ILR sums C-1 single-output
            Titsias bounds, one factorisation each: C-1 times the cost per step, and
            (C-1) M basis functions in all instead of M, which matters with many classes.
        standardize: ``True`` (or ``"zscore"``) z-scores the inputs with the training
            statistics, ``"robust"`` centres them at the median and scales by the
            interquartile range (for columns with a few extreme values), ``"minmax"`` maps
            the training range of each column onto [0, 1], ``False`` uses them as given.
        seed: integer seed for every random step.
        max_exact_points: refuse exact inference above this many points.
        inference_options: options for the driver's method (see ``ppgpc.infer.fit``).

    Attributes (after fit):
        those of ``GPClassifierBase`` (classes_, n_features_in_, feature_names_in_,
        n_iter_, ...), epsilon_, epsilon_scores_ (validation NLL per epsilon when
        ``epsilon="auto"``, at the chosen tau), tau_ (the tolerance used; None with
        ``noise_std``), tau_scores_ (leave-one-out NLL per tau at the chosen epsilon when
        tau was searched), noise_std_ (sigma before any learned scale), noise_scale_ (the
        fitted s, its posterior mean under NUTS; None unless ``learn_noise_scale``),
        result_ (the driver's ``FitResult``).

    Example:
        >>> from ppgpc import ILRGPClassifier
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = ILRGPClassifier(epsilon=0.999).fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)
    """

    model_name = "ilr_gp"
    has_noise_scale = True

    def _noise_scale_names(self) -> tuple[np.ndarray, str]:
        """Collapsed-ILR's per-entry noise scale is one per ILR coordinate, (C-1,)."""
        return np.arange(len(self.classes_) - 1), "ILR coordinate(s)"

    def __init__(self, *, epsilon="auto", tau="auto",
                 noise_std: float | None = None, learn_noise_scale: bool = False,
                 epsilon_grid=None, validation: str = "loo", cv_folds: int = 5,
                 validation_fraction: float = 0.1, kernel="rbf-ard", inference: str = "map",
                 num_inducing: int = 200, shared_inducing: bool = True,
                 standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _method(self) -> str:
        if self.inference == "uncollapsed":
            return "svi"
        return super()._method()

    def _exact_size_limit(self) -> int | None:
        if self.inference == "uncollapsed":
            return None
        return super()._exact_size_limit()

    def _check_settings(self) -> None:
        super()._check_settings()
        if self.epsilon != "auto":
            check_probability("epsilon", self.epsilon, "or 'auto'")
        if self.tau not in ("auto", None):
            check_probability("tau", self.tau, "or 'auto'")
        if self.noise_std is not None:
            check_positive("noise_std", self.noise_std)
        check_flag("learn_noise_scale", self.learn_noise_scale)
        check_flag("shared_inducing", self.shared_inducing)
        if self.inference in ("collapsed", "uncollapsed"):
            check_count("num_inducing", self.num_inducing)

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        if self.inference != "uncollapsed" or (method or "svi") != "svi":
            return super()._fit_driver(X, y, num_classes, model_options, method=method,
                                       **options)
        opts = {"progress_bar": False, **self._given_options(), **options}
        model_options = {"num_inducing": min(int(self.num_inducing), X.shape[0]),
                         "seed": self.seed, "shared_inducing": self.shared_inducing}
        return self._run_driver("ilr_gp_uncollapsed", X, y, num_classes, method="svi",
                                model_options=model_options, max_exact_points=None,
                                options=opts)

    def _fixed_tau(self) -> float:
        """The tolerance of a fit that does not search it: the given ``tau``, or
        ``DEFAULT_TAU`` for ``None`` and for ``"auto"`` where no leave-one-out search runs."""
        from ppgpc.models.ilr_gp import DEFAULT_TAU

        return DEFAULT_TAU if self.tau in (None, "auto") else float(self.tau)

    def _options_for(self, epsilon: float, tau: float | None = None) -> dict:
        options = {"epsilon": float(epsilon),
                   "tau": self._fixed_tau() if tau is None else float(tau)}
        if self.noise_std is not None:
            options["noise_std"] = float(self.noise_std)
        if self.learn_noise_scale:
            options["learn_noise_scale"] = True
        return options

    def _loo_joint_scores(self, X, y, num_classes, epsilons, taus) -> dict:
        """{(epsilon, tau): leave-one-out NLL}, from ONE fit per tau. The ILR targets of
        level epsilon are a(epsilon) = log(1 + C epsilon / (1 - epsilon)) times fixed unit
        targets and the Proposition 1 noise scales with them, so a type-II ML fit at one
        level is the fit at any other with the latent scaled by a(epsilon) / a(reference)
        (``ppgpc.infer.loo``): each tau's fit scores the whole epsilon grid by rescaling its
        leave-one-out predictive. tau sets the noise relative to the targets, so each tau
        needs its own fit. A fixed ``noise_std`` breaks the scaling: then every epsilon is
        fitted (and tau does not apply)."""
        from ppgpc.models.ilr_gp import DEFAULT_EPSILON
        from ppgpc.simplex import target_separation

        if self.noise_std is not None:
            scores = self._loo_grid_scores(X, y, num_classes, epsilons)
            return {(e, taus[0]): v for e, v in scores.items()}
        # a(epsilon') / a(epsilon): the ratio of the targets' separations
        reference = target_separation(num_classes, DEFAULT_EPSILON)
        scales = [target_separation(num_classes, float(e)) / reference for e in epsilons]
        scores = {}
        for tau in taus:
            nll = self._loo_nll_of_fit(X, y, num_classes,
                                       self._options_for(DEFAULT_EPSILON, tau), scales)
            scores.update({(float(e), float(tau)): float(v) for e, v in zip(epsilons, nll)})
        return scores

    def _select_model_options(self, X, y, num_classes) -> dict:
        from ppgpc.models.ilr_gp import EPSILON_GRID, TAU_GRID, prepare

        if not self.shared_inducing and self.inference not in ("collapsed", "uncollapsed"):
            raise ValueError("shared_inducing=False gives each ILR coordinate its own "
                             "inducing inputs; it applies to inference='collapsed' or "
                             f"'uncollapsed', not {self.inference!r}")
        if self.inference == "uncollapsed":  # categorical likelihood: no smoothing, no noise
            if self.learn_noise_scale:
                raise ValueError("learn_noise_scale applies to the Gaussian likelihood of "
                                 "inference='exact', 'map', 'nuts' and 'collapsed'; "
                                 "inference='uncollapsed' has a categorical likelihood")
            self.epsilon_ = self.epsilon_scores_ = self.noise_std_ = None
            self.tau_ = self.tau_scores_ = None
            return {}
        search_tau = self.tau == "auto" and self.noise_std is None and self._uses_loo()
        epsilons = ((EPSILON_GRID if self.epsilon_grid is None else tuple(self.epsilon_grid))
                    if self.epsilon == "auto" else (float(self.epsilon),))
        if not epsilons:
            raise ValueError("epsilon_grid is empty")
        self.epsilon_scores_ = self.tau_scores_ = None
        if self._uses_loo() and (self.epsilon == "auto" or search_tau):
            taus = TAU_GRID if search_tau else (self._fixed_tau(),)
            scores = self._loo_joint_scores(X, y, num_classes, epsilons, taus)
            epsilon, tau = min(scores, key=scores.get)
            if self.epsilon == "auto":
                self.epsilon_scores_ = {e: v for (e, t), v in scores.items() if t == tau}
            if search_tau:
                self.tau_scores_ = {t: v for (e, t), v in scores.items() if e == epsilon}
        elif self.epsilon == "auto":  # cross-validation or holdout, with refits
            epsilon, self.epsilon_scores_ = self._search_grid(X, y, num_classes, epsilons,
                                                              "epsilon_grid")
            tau = self._fixed_tau()
        else:
            epsilon, tau = epsilons[0], self._fixed_tau()
        self.epsilon_ = float(epsilon)
        self.tau_ = None if self.noise_std is not None else float(tau)
        options = self._options_for(self.epsilon_, self.tau_)
        self.noise_std_ = float(np.sqrt(prepare(X[:1], y[:1], num_classes, **options).noise_var))
        return options


class DirichletGPClassifier(GPClassifierBase):
    """The Dirichlet-based GP classifier, GPD (Milios et al. 2018; MATH.md section 2).

    Heteroscedastic GP regression on log-normal approximations of Dirichlet pseudo-counts,
    one latent GP per class with a learned constant mean; class probabilities are
    E[softmax(f*)] by Monte Carlo.

    Args:
        alpha_eps: concentration of the classes a point does not belong to (> 0); ``"auto"``
            chooses it from ``alpha_eps_grid`` by held-out NLL (``validation`` as for
            ``ILRGPClassifier``: by default one fit on all the data per grid value, scored
            by its closed-form leave-one-out predictive; ``"cv"``: stratified
            ``cv_folds``-fold cross-validation with refits; ``"holdout"``: one
            ``validation_fraction`` split), ``"train"`` by training NLL as Milios et al.
            do; either way the model is then refitted on all the data.
        alpha_eps_grid: candidate values (default ``(1e-4, 1e-3, 1e-2, 1e-1)``, the values
            the ILR paper's Table 3 selected from).
        shared_kernel: one kernel for all classes (Milios et al.) or one per class.
        learn_noise_scale: fit a factor per class on the noise variances with the kernel
            hyperparameters (prior LogNormal(0, 1) under MAP and NUTS), the ILR paper's
            "more flexible likelihood" for sparse GPD. With exact type-II ML a class's
            scale can collapse towards 0 (``fit`` warns and names the class): keep the
            default noise there.
        predict_from: ``"latent"`` (default) or ``"noisy"`` (sample the pseudo-observation,
            latent plus likelihood noise; the ILR paper's Table 1 contrast).
        kernel, standardize, seed, max_exact_points, inference_options: as for
            ``ILRGPClassifier``.
        inference: ``"map"`` (the default: type-II MAP and the conjugate posterior, one
            Cholesky per class), ``"exact"`` (type-II ML), ``"nuts"`` or ``"collapsed"``
            (sparse GPD: Titsias's bound with per-class noise, ``num_inducing`` inducing
            inputs learned).
        num_inducing: inducing points M for ``inference="collapsed"`` (k-means++ start).
        shared_inducing: one set of M inducing inputs for all classes (default) or M per
            class (``inference="collapsed"`` only): C single-class Titsias bounds, one
            factorisation each, C times the cost per step and C M basis functions in all,
            which matters with many classes (letter, C = 26).

    Attributes (after fit):
        those of ``GPClassifierBase`` (classes_, n_features_in_, feature_names_in_,
        n_iter_, ...), alpha_eps_, alpha_eps_scores_ (NLL per candidate when
        searched), noise_scale_ ((C,) fitted class scales, None unless
        ``learn_noise_scale``), result_ (the driver's ``FitResult``).

    Example:
        >>> from ppgpc import DirichletGPClassifier
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = DirichletGPClassifier(alpha_eps=0.01).fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)
    """

    model_name = "dirichlet_gp"
    has_noise_scale = True

    def __init__(self, *, alpha_eps="auto", alpha_eps_grid=None, shared_kernel: bool = True,
                 learn_noise_scale: bool = False, predict_from: str = "latent",
                 validation: str = "loo", cv_folds: int = 5,
                 validation_fraction: float = 0.1, kernel="rbf-ard", inference: str = "map",
                 num_inducing: int = 200, shared_inducing: bool = True,
                 standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _check_settings(self) -> None:
        super()._check_settings()
        if self.alpha_eps not in ("auto", "train"):
            try:
                check_positive("alpha_eps", self.alpha_eps)
            except ValueError:
                raise ValueError("alpha_eps must be a finite positive number, 'auto' or "
                                 f"'train', got {self.alpha_eps!r}") from None
        check_flag("shared_kernel", self.shared_kernel)
        check_flag("learn_noise_scale", self.learn_noise_scale)
        check_flag("shared_inducing", self.shared_inducing)
        if self.inference == "collapsed":
            check_count("num_inducing", self.num_inducing)

    def _options_for(self, alpha_eps: float) -> dict:
        return {"alpha_eps": float(alpha_eps), "shared_kernel": self.shared_kernel,
                "predict_from": self.predict_from,
                "learn_noise_scale": self.learn_noise_scale}

    def _select_model_options(self, X, y, num_classes) -> dict:
        from ppgpc.models.dirichlet_gp import ALPHA_EPS_GRID

        if not self.shared_inducing and self.inference != "collapsed":
            raise ValueError("shared_inducing=False gives each class its own inducing "
                             f"inputs; it applies to inference='collapsed', not "
                             f"{self.inference!r}")
        if self.alpha_eps not in ("auto", "train"):
            self.alpha_eps_ = self.alpha_eps
            self.alpha_eps_scores_ = None
            return self._options_for(self.alpha_eps)
        grid = ALPHA_EPS_GRID if self.alpha_eps_grid is None else self.alpha_eps_grid
        best, scores = self._search_grid(X, y, num_classes, grid, "alpha_eps_grid",
                                         on_training_data=self.alpha_eps == "train")
        self.alpha_eps_scores_ = scores
        self.alpha_eps_ = best
        return self._options_for(self.alpha_eps_)


class LogisticSoftmaxGPClassifier(GPClassifierBase):
    """The logistic-softmax GP classifier (MATH.md section 3): p(y = k | f) = sigma(f_k) /
    sum_c sigma(f_c) with one latent GP per class, inferred through its Polya-Gamma
    augmentation.

    Args:
        inference: one of
            ``"gibbs"`` (default): the exact blocked Gibbs sampler (driver method
            ``"gibbs"``); kernel hyperparameters fitted first by type-II MAP on the CAVI
            ELBO, or given in ``inference_options["hyperparameters"]``, or sampled inside
            every sweep with ``{"hyperparameters": "sample"}`` (HMC-within-Gibbs;
            predictions then average over the hyperparameter draws too);
            ``"cavi"``: mean-field coordinate-ascent VI with hyperparameter learning, full
            (Z = X) by default, sparse with ``{"num_inducing": M}``, M < N;
            ``"svi"``: the sparse stochastic CAVI of appendix A.3 (driver method ``"cavi"``
            with ``num_inducing``, default ``SVI_NUM_INDUCING`` = 200 (the full version
            when N <= 200), ``batch_size``, default min(N, 128), and
            ``class_batch_size``, default all classes; 1000 iterations unless
            ``max_iter`` is given), which makes each iteration cheap for large N or C.
            A sparse fit is held as draws of q(v) at the inducing inputs and predicts
            through q's own predictive p(f* | u), so its cost is O(N M^2) and
            ``max_exact_points`` does not apply to it; it applies to Gibbs, NUTS and the
            full CAVI, which form N x N matrices;
            ``"nuts"``: NUTS on the non-augmented latent model, hyperparameters as for
            Gibbs, or sampled with ``{"sample_hyperparameters": True}``.
            Every option predicts by averaging the likelihood over posterior (or
            variational) draws of f, never at a plug-in posterior mean.
        kernel, standardize, seed, max_exact_points: as for ``ILRGPClassifier``.
        inference_options: options of the driver method (``ppgpc.infer.fit``), e.g.
            ``{"num_samples": 1000, "kernel_options": {"collapse_lambda": True}}``.

    Attributes (after fit): those of ``GPClassifierBase`` (classes_, n_features_in_,
    feature_names_in_, n_iter_, result_ ...).

    Example:
        >>> from ppgpc import LogisticSoftmaxGPClassifier
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = LogisticSoftmaxGPClassifier(inference="cavi").fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)
    """

    model_name = "logistic_softmax"
    _methods = ("gibbs", "cavi", "svi", "nuts")
    SVI_BATCH_SIZE = 128
    """Default minibatch size of ``inference="svi"``."""
    SVI_NUM_INDUCING = 200
    """Default number of inducing inputs of ``inference="svi"`` (the ILR paper's M for
    letter, magic, htru2 and eeg)."""

    def __init__(self, *, kernel="rbf-ard", inference: str = "gibbs", standardize: bool | str = True,
                 seed: int = 0, max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _method(self) -> str:
        if self.inference not in self._methods:
            raise self._unknown_inference(self._methods)
        return "cavi" if self.inference == "svi" else self.inference

    def _num_inducing(self) -> int | None:
        """The CAVI's M: ``inference_options["num_inducing"]``, else ``SVI_NUM_INDUCING``
        for ``"svi"``; None is the full version (Z = X)."""
        default = self.SVI_NUM_INDUCING if self.inference == "svi" else None
        return self._given_options().get("num_inducing", default)

    def _exact_size_limit(self) -> int | None:
        """None for the sparse CAVI (an M is set; the driver checks M < N itself)."""
        if self._method() == "cavi" and self._num_inducing() is not None:
            return None
        return super()._exact_size_limit()

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        method = method or self._method()
        given = self._given_options()
        if self.inference == "svi" and method == "cavi":
            options["num_inducing"] = self._num_inducing()
            if "batch_size" not in given:
                options["batch_size"] = min(len(y), self.SVI_BATCH_SIZE)
            if "max_iter" not in given:
                options["max_iter"] = 1000
        if method in ("gibbs", "nuts") and "progress_bar" not in given:
            options["progress_bar"] = False
        if method == "nuts":
            if "form" not in given:
                options["form"] = "latent"
            if given.get("hyperparameters") is None and not given.get("sample_hyperparameters"):
                from ppgpc.kernels import make_kernel
                from ppgpc.models.logistic_softmax import fit_hypers, prepare

                hypers, _ = fit_hypers(prepare(X, y, num_classes), make_kernel(self.kernel))
                options["hyperparameters"] = {k: np.asarray(v) for k, v in hypers.items()}
        return super()._fit_driver(X, y, num_classes, model_options, method=method, **options)


class SoftmaxSVGPClassifier(GPClassifierBase):
    """The sparse variational GP classifier of Hensman et al. (2015) (MATH.md section 4).

    L latent GPs with M whitened inducing values each, a full-covariance Gaussian q(v_c), a
    learned L x L mixing matrix W before the link, and kernel hyperparameters and inducing
    inputs learned on the ELBO by minibatch SVI (Adam, warm-up + cosine learning-rate
    schedule; ``ppgpc.infer.svi``). ``link="softmax"`` is SVGPC (L = C);
    ``link="ilr"`` is Uncollapsed-ILR (L = C - 1, softmax(V W f)), the same model as
    ``ILRGPClassifier(inference="uncollapsed")``.

    Args:
        num_inducing: M <= N (default min(200, N)); k-means++ start.
        batch_size: minibatch size B <= N (default min(256, N)).
        link: ``"softmax"`` or ``"ilr"``.
        likelihood_samples: S, draws per point of the expected log-likelihood estimate
            (default 10, GPyTorch's default).
        ell_estimator: ``"marginal"``: f drawn independently per point from q's
            marginals (local reparameterisation, low-variance gradients); ``"price"``: the
            same draws, with the gradients of the marginal variances from Price's theorem
            (half the expected second derivative, never positive for these links);
            ``"joint"``: one draw of the inducing values shared by the minibatch (``S`` is
            then unused). Default (None): ``"price"`` with ``natural_gradient``, else
            ``"marginal"``.
        shared_kernel: one set of kernel hyperparameters for all latents (default) or one
            per latent.
        shared_inducing: one set of M inducing inputs for all latents (default) or M per
            latent. ``shared_kernel=False, shared_inducing=False`` is the layout of
            GPyTorch's batch-shaped multitask SVGP, on which the ILR paper's SVGPC and
            Uncollapsed-ILR rows were run; it has L times the inducing inputs, and costs
            about 3.3 times as much per step at letter size (0.63 s against 0.19 s on one
            core; ``benchmarks/uci_sparse.py --per-latent``).
        kernel_prior: False (default): the kernel hyperparameters maximise the ELBO (type-II
            ML, as GPyTorch and the ILR paper fit them). True: SVI maximises the ELBO plus
            the kernel's log prior (``kernel.priors``: variance LogNormal(0, 1.5),
            lengthscales LogNormal(log sqrt(D), 1), meant for z-scored inputs; pass
            ``kernel=RBF(lengthscale_prior_scale=s)`` for another width), type-II MAP,
            which keeps ARD lengthscales from running away; the ELBO trace then includes
            the log prior. On letter (per-latent Uncollapsed-ILR, 10000 steps of B = 512)
            it kept the lengthscales at 0.4-26 (type-II ML: up to 1121) and improved
            accuracy / NLL from 0.959 / 0.141 to 0.961 / 0.138 on seed 0's split, from
            0.947 / 0.169 to 0.956 / 0.154 on seed 1's and from 0.958 / 0.136 to
            0.963 / 0.134 on seed 2's; ECE rose from 0.020 to 0.032 and from 0.014 to 0.027
            on the first two (0.031 on seed 2). Seeds 3 and 4 with the prior: 0.962 / 0.137
            / 0.033 and 0.963 / 0.136 / 0.033 (4096 predictive draws), so the five-split
            mean is 0.961 / 0.140 ± 0.008 / 0.031 (the paper: 0.96 / 0.13 ± 0.008 / 0.04).
            Per-latent SVGPC on seed 0's split: 0.956 / 0.147 / 0.018 without the prior,
            0.961 / 0.145 / 0.032 with it; with it on seed 1's, 0.961 / 0.148 / 0.032, on seed 2's
            0.963 / 0.134 / 0.031, seed 3's 0.964 / 0.135 / 0.031 and seed 4's 0.962 / 0.136 /
            0.032: a five-split mean of 0.962 / 0.140 ± 0.006 / 0.032
            (``benchmarks/uci_sparse.py --kernel-prior``).
        variance_prior_on: with ``kernel_prior``, where the variance prior applies:
            ``"kernel"`` (default) on each latent's kernel variance, or ``"mixed"`` on its
            amplitude after the mixing matrix, var_l |W[:, l]|^2. The likelihood sees W and
            the variances only through W diag(sqrt(var)), so under ``"kernel"`` W can carry
            the scale and the variance prior does not bound it: on letter (per-latent, seed
            3's split) the fitted amplitudes var_l |W[:, l]|^2 were 13 to 271 for
            Uncollapsed-ILR (11 to 368 for SVGPC on seed 2's), far outside the prior's
            LogNormal(0, 1.5). ``"mixed"`` puts the prior on that amplitude
            (``ppgpc.models.softmax_svgp.mixed_amplitudes``). It was chosen against by
            validation NLL on letter (per-latent Uncollapsed-ILR, seed 0's split, 10% held
            out, 10000 steps of B = 512): best held-out NLL 0.1347 against 0.1328 for
            ``"kernel"`` (worse at every 100-step check), test 0.958 / 0.149 / 0.036
            against 0.959 / 0.146 / 0.035; the data held the median amplitude at 50
            (57 under ``"kernel"``). So the default stays ``"kernel"``
            (``benchmarks/uci_sparse.py --variance-prior-on mixed``).
        initial_lengthscale, initial_variance: where SVI starts the kernel: None and 1
            (default) start every lengthscale at sqrt(D), the prior median, and the variance
            at 1; GPyTorch starts both at softplus(0) = 0.693. On letter (per-latent
            Uncollapsed-ILR with ``kernel_prior``, seed 3's split) GPyTorch's start ended at
            a lower objective, ELBO / N -0.3650 against -0.3627, with test figures
            0.960 / 0.136 / 0.032 against 0.962 / 0.137 / 0.033, so the default stays
            (``benchmarks/uci_sparse.py --initial-lengthscale 0.693 --initial-variance
            0.693``).
        inference: ``"svi"`` (default) or ``"nuts"``: NUTS on the full, non-sparse GP with
            the same link (W = I) for small N, with kernel hyperparameters from an SVI fit
            unless given in ``inference_options["hyperparameters"]`` (or sampled, with
            ``{"sample_hyperparameters": True}``); it shows how far the variational
            posterior is from the exact one.
        max_iter, learning_rate: SVI steps and peak learning rate. Default (None): 500
            steps at 0.1 when a step sees every training point (B = N, the default for
            N <= 256), 5000 steps at 0.01 for minibatches (B < N). A full-batch gradient
            is noisy only through the likelihood draws, so it takes larger, fewer steps
            (``FULL_BATCH_STEPS``, ``MINIBATCH_STEPS``; docs/defaults.md).
        natural_gradient: None (default: Adam moves q(v) with everything else), or a step
            size gamma in (0, 1]: q(v) then takes natural-gradient steps of that size and
            Adam moves the hyperparameters, inducing inputs and W only (Salimbeni et al.
            2018; ``ppgpc.infer.natgrad``). It pays when q(v) is what limits convergence:
            few steps, or a small learning rate (on toy blobs, 200 steps at 0.01 end at an
            ELBO of -21 against Adam's -34). It did not pay on letter (per-latent
            Uncollapsed-ILR, 4000 steps of B = 256, gamma 0.1): ELBO / N -0.292 against
            Adam's -0.288, test NLL 0.170 against 0.159, at 1.6 times the cost per step
            (``benchmarks/uci_sparse.py --natural-gradient``). Refused steps (an
            indefinite precision) are counted in ``result_.info
            ["natural_gradient_refused"]`` and warned of.
        validation_fraction: None (default: fit on all the data, keep the last iterate), or a
            fraction in (0, 0.5]: a stratified, seeded share of the training points is held
            out, SVI fits on the rest, scores the held-out NLL after every ``window`` steps
            and keeps the iterate with the lowest one (the ILR paper selects its SVI settings
            by validation NLL). The trace is in ``result_.info["validation_nll"]`` (at the
            steps ``info["validation_steps"]``), with ``best_step`` and
            ``best_validation_nll``. ``inference_options={"validation_patience": k}`` also
            stops after k windows without a new best, and ``{"restore_best": False}`` keeps
            the last iterate while still recording the trace. The standardisation uses all
            the training points. It is a monitor more than a cure: on letter (per-latent
            Uncollapsed-ILR, 10000 steps of B = 512, seeds 0 and 1) the held-out NLL kept
            falling until steps 8400 and 8500, and fitting on 90% gave test NLLs of 0.152
            and 0.180 against 0.141 and 0.169 on all the points.
        progress_bar: show the SVI (or NUTS) progress bar.
        kernel, standardize, seed: as for ``ILRGPClassifier``.
        max_exact_points: size limit for ``inference="nuts"`` (SVI has none).
        inference_options: further options of the driver method (``ppgpc.infer.fit``), e.g.
            ``{"tol": None, "num_draws": 1000, "schedule": "constant"}``.

    Attributes (after fit): those of ``GPClassifierBase`` (classes_, n_features_in_,
    feature_names_in_, n_iter_, result_: the driver's ``FitResult``;
    ``result_.info`` has the ELBO, steps and seconds per epoch, ``result_.sample_stats
    ["elbo"]`` the ELBO trace).

    Example:
        >>> from ppgpc import SoftmaxSVGPClassifier
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = SoftmaxSVGPClassifier(num_inducing=20, batch_size=64).fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)
    """

    _methods = ("svi", "nuts")

    FULL_BATCH_STEPS = (500, 0.1)
    """Default (max_iter, learning_rate) when every step sees all training points."""
    MINIBATCH_STEPS = (5000, 0.01)
    """Default (max_iter, learning_rate) with minibatches (B < N)."""

    def __init__(self, *, num_inducing: int | None = None, batch_size: int | None = None,
                 link: str = "softmax", likelihood_samples: int = 10,
                 ell_estimator: str | None = None, shared_kernel: bool = True,
                 shared_inducing: bool = True, kernel_prior: bool = False,
                 variance_prior_on: str = "kernel",
                 initial_lengthscale: float | None = None, initial_variance: float = 1.0,
                 kernel="rbf-ard", inference: str = "svi", max_iter: int | None = None,
                 learning_rate: float | None = None,
                 natural_gradient: float | None = None,
                 validation_fraction: float | None = None,
                 progress_bar: bool = False, standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self._store_params(locals())

    @property
    def model_name(self) -> str:
        return "softmax_svgp" if self.link == "softmax" else "ilr_gp_uncollapsed"

    def _exact_size_limit(self) -> int | None:
        return self.max_exact_points if self.inference == "nuts" else None

    def _check_settings(self) -> None:
        super()._check_settings()
        for name in ("shared_kernel", "shared_inducing", "kernel_prior", "progress_bar"):
            check_flag(name, getattr(self, name))
        for name in ("num_inducing", "batch_size"):
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name))
        if self.max_iter is not None:
            check_count("max_iter", self.max_iter)
        if self.learning_rate is not None:
            check_positive("learning_rate", self.learning_rate)
        check_count("likelihood_samples", self.likelihood_samples)

    def _method(self) -> str:
        from ppgpc.models.softmax_svgp import LINKS

        if self.link not in LINKS:
            raise ValueError(f"unknown link {self.link!r}; choose from {list(LINKS)}")
        if self.inference not in self._methods:
            raise self._unknown_inference(self._methods)
        return self.inference

    def _svi(self, X, y, num_classes, **options):
        # inference_options belong to the chosen method: with inference="nuts" they are NUTS
        # options, and the preliminary SVI fit (for the hyperparameters) must not get them
        given = self._given_options() if self.inference == "svi" else {}
        X, y, held_out = self._hold_out_validation(X, y, given)
        if held_out is not None:
            options = {**options, "validation_data": held_out}
        batch_size = given.get("batch_size", self.batch_size)
        if batch_size is None:
            batch_size = default_batch_size(len(y))
        steps, rate = (self.FULL_BATCH_STEPS if batch_size >= len(y)
                       else self.MINIBATCH_STEPS)
        opts = {"batch_size": self.batch_size,
                "max_iter": steps if self.max_iter is None else self.max_iter,
                "learning_rate": rate if self.learning_rate is None else self.learning_rate,
                "natural_gradient": self.natural_gradient, "progress_bar": self.progress_bar,
                **given, **options}
        return self._run_driver(self.model_name, X, y, num_classes, method="svi",
                                model_options={"num_inducing": self.num_inducing,
                                               "seed": self.seed,
                                               "ell_estimator": self._ell_estimator(),
                                               "likelihood_samples": self.likelihood_samples,
                                               "shared_kernel": self.shared_kernel,
                                               "shared_inducing": self.shared_inducing,
                                               "kernel_prior": self.kernel_prior,
                                               "variance_prior_on": self.variance_prior_on,
                                               "initial_lengthscale":
                                                   self.initial_lengthscale,
                                               "initial_variance": self.initial_variance},
                                max_exact_points=None, options=opts)

    def _hold_out_validation(self, X, y, given: dict):
        """(X_fit, y_fit, (X_val, y_val) or None): the stratified, seeded hold-out of
        ``validation_fraction`` (``train_validation_split``)."""
        fraction = self.validation_fraction
        if fraction is None:
            return X, y, None
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 < fraction <= 0.5:
            raise ValueError("validation_fraction must be None or a fraction in (0, 0.5], "
                             f"got {fraction!r}")
        if given.get("validation_data") is not None:
            raise ValueError("give validation_fraction or inference_options['validation_data'],"
                             " not both")
        split = train_validation_split(X, y, seed=self.seed, val_fraction=float(fraction))
        if split.X_train.shape[0] < 2:
            raise ValueError(f"validation_fraction={fraction} leaves {split.X_train.shape[0]} "
                             "training point(s); use a smaller fraction or None")
        return split.X_train, split.y_train, (split.X_val, split.y_val)

    def _ell_estimator(self) -> str:
        """The ``ell_estimator`` given, else ``"price"`` under natural gradients (which need
        its negative curvature) and ``"marginal"`` otherwise."""
        if self.ell_estimator is None:
            return "marginal" if self.natural_gradient is None else "price"
        if self.natural_gradient is not None and self.ell_estimator != "price":
            warnings.warn(f"natural_gradient with ell_estimator={self.ell_estimator!r}: the "
                          "reparameterisation gradients of q's variances can have either "
                          "sign, and minibatch noise can then make q's precision indefinite "
                          "or nearly singular; ell_estimator='price' (the default under "
                          "natural gradients) cannot", UserWarning, stacklevel=4)
        return self.ell_estimator

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        method = method or self._method()
        if method == "svi":
            return self._svi(X, y, num_classes, **options)
        opts = {"form": "latent", "progress_bar": self.progress_bar,
                **self._given_options(), **options}
        if not self.shared_kernel:
            raise ValueError("inference='nuts' runs the full GP with one kernel for all "
                             "latents; use shared_kernel=True with it")
        if opts.get("hyperparameters") is None and not opts.get("sample_hyperparameters"):
            svi = self._svi(X, y, num_classes, num_draws=1)
            opts["hyperparameters"] = {k: np.asarray(v[0, 0]) for k, v in svi.hypers.items()
                                       if k.startswith("kernel_")}
        return self._run_driver(self.model_name, X, y, num_classes, method=method,
                                model_options={"num_inducing": 1, "seed": self.seed},
                                max_exact_points=self.max_exact_points, options=opts)


ESTIMATORS = {cls.__name__: cls for cls in (ILRGPClassifier, LogisticSoftmaxGPClassifier,
                                            DirichletGPClassifier, SoftmaxSVGPClassifier)}
"""ppgpc's estimator classes by name: the classes a save may name (``ppgpc.persistence``)."""

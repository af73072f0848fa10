"""``GPClassifierBase``: what every ppgpc estimator shares.

Every classifier follows the same conventions:

* they are scikit-learn estimators (``BaseEstimator``, ``ClassifierMixin``): the
  constructor only stores its arguments, so ``get_params``, ``set_params``, ``clone``,
  pipelines, ``cross_val_score`` and ``GridSearchCV`` work, and inputs are checked with
  scikit-learn's own helpers (``validate_data``, ``check_classification_targets``,
  ``check_is_fitted``) before ppgpc's checks of what they leave out;
* the same shared options, in this order: ``kernel``, ``inference``, ``standardize``,
  ``seed``, ``max_exact_points``, ``progress``, ``inference_options``; the other options
  define the model;
* ``fit(X, y)`` takes any hashable labels; ``classes_`` holds the sorted unique labels and
  the model sees their indices 0..C-1 (as scikit-learn does); ``n_features_in_`` and, for
  inputs with string column names (a pandas DataFrame), ``feature_names_in_`` are recorded,
  and predicting from columns that differ in name or order is refused;
* ``predict_proba(X)`` returns a NumPy array (n, C) whose rows sum to 1, columns ordered as
  ``classes_``; ``predict`` returns labels from ``classes_``; ``score`` is the accuracy;
* ``to_inference_data(X=None)`` exports the posterior (and predictions at X) to ArviZ;
* every random step derives its key from ``seed``, so fits are reproducible.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ppgpc.estimators._common import (check_class_labels, check_frame_columns,
                                      fit_standardizer, fitted_noise_scale,
                                      is_fitted_attribute, warn_of_collapsed_noise,
                                      warn_of_small_classes)
from ppgpc.estimators.options import Inference, hold_out
from ppgpc.evaluation import metrics
from ppgpc.infer import convergence, driver
from ppgpc.infer.convergence import ConvergenceReport
from ppgpc.infer.methods import check_method_options
from ppgpc.io.persistence import load_estimator, save_estimator
from ppgpc.models import get_spec
from ppgpc.runtime.progress import note
from ppgpc.runtime.threads import blas_limited
from ppgpc.validation import (MAX_EXACT_POINTS, check_exact_size, check_features, check_flag,
                              check_labels, check_seed, check_size_limit, encode_labels)

__all__ = ["GPClassifierBase", "Selected", "SHARED_OPTIONS", "SHARED_DOC", "EXAMPLE_DOC",
           "shared_doc", "saveable_estimators"]

SHARED_OPTIONS = ("kernel", "inference", "standardize", "seed", "max_exact_points", "progress",
                  "inference_options")
"""The options every estimator has, in the order of their signatures."""

SHARED_DOC = """\
        kernel: ``"rbf-ard"`` (default), ``"rbf"``, ``"matern52-ard"``, ``"matern52"`` or a
            kernel object of ``ppgpc.gp.kernels``.
        standardize: ``True`` (or ``"zscore"``) z-scores the inputs with the training
            statistics; ``"robust"`` uses the median and interquartile range (for columns
            with a few extreme values, which ``fit`` warns of); ``"minmax"`` maps the
            training range onto [0, 1]; ``False`` uses the inputs as given.
        seed: integer seed; every random step derives its key from it.
        max_exact_points: refuse inference that forms N x N matrices above this many
            points (None: no limit); sparse and minibatch inference ignore it.
        progress: show progress on stderr for every loop of the fit (optimisers, samplers,
            the smoothing search); False writes nothing to stderr.
        inference_options: options of the inference method (``ppgpc.fit``'s method
            options, checked before any work), e.g. ``{"num_draws": 500}``."""
"""The docstring lines of the shared options, appended to each estimator's ``Args``."""


EXAMPLE_DOC = """\
    Example:
        >>> from ppgpc import {name}
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = {name}({arguments}, progress=False).fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)"""
"""The docstring example every estimator shares: fit on the wine data with the estimator's
example arguments, then predict two points' class probabilities."""


def shared_doc(*, example: str):
    """Class decorator factory that completes an estimator's docstring: the line
    ``{SHARED_DOC}`` becomes ``SHARED_DOC`` and the line ``{EXAMPLE}`` becomes
    ``EXAMPLE_DOC`` for this class, constructed with the arguments ``example``.

    Args:
        example: the constructor arguments of the example, e.g. ``"epsilon=0.999"``
            (``progress=False`` is added).

    Raises:
        ValueError: the docstring lacks one of the two lines.
    """
    def decorate(cls):
        missing = [line for line in ("{SHARED_DOC}", "{EXAMPLE}") if line not in cls.__doc__]
        if missing:
            raise ValueError(f"the docstring of {cls.__name__} has no {' or '.join(missing)} line")
        filled = EXAMPLE_DOC.format(name=cls.__name__, arguments=example)
        cls.__doc__ = cls.__doc__.replace("{SHARED_DOC}", SHARED_DOC).replace("{EXAMPLE}", filled)
        return cls
    return decorate


class Selected(NamedTuple):
    """What an estimator's search chose for its final fit (``_select_model_options``)."""

    options: dict
    """The model options of the final fit (e.g. ``epsilon``, ``alpha_eps``)."""
    final: dict
    """The final fit's own driver options (a warm start, fixed hyperparameters)."""
    grid_edges: tuple[str, ...] = ()
    """Phrases of the searches that ended at a falling edge of their grid
    (``ppgpc.infer.convergence.grid_edge``), for the fit's report."""


class DriverCall(NamedTuple):
    """How an estimator's fit reaches ``ppgpc.infer.fit`` (``GPClassifierBase._driver_call``).
    """

    model: str
    """The driver's model name."""
    model_options: dict
    """Added to the model's ``prepare`` options."""
    options: dict
    """Method options the ``inference_options`` may override (defaults)."""
    fixed: dict
    """Method options the estimator sets over the ``inference_options``."""
    max_exact_points: int | None
    """The exact size limit (None: a sparse fit)."""


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
            ``result_.info`` (``FitInfo.iterations``): SVI steps, CAVI iterations, or
            L-BFGS / Adam iterations of type-II ML / MAP (for NUTS and Gibbs, of the fit of
            their hyperparameters); 0 where it ran none (hyperparameters given or sampled).
        standardizer_: the input scaling fitted on X (None with ``standardize=False``).
        hyperparameters_: the fitted hyperparameters by name (a property).
        result_: the driver's ``FitResult``, fitted on the scaled inputs and carrying the
            scaling (``input_scaling``): its prediction methods take raw X, as the
            estimator's do; its ``data`` holds the scaled training inputs.
    """

    model_name: str = ""
    has_noise_scale: bool = False
    """Whether the model can learn a noise scale; ``fit`` then records ``noise_scale_``."""
    inference_choices: type[Inference] = Inference
    """The ``inference`` settings (an ``Inference`` subclass), the default first."""

    def __init__(self, *, kernel="rbf-ard", inference: str = "exact",
                 standardize: bool | str = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS, progress: bool = True,
                 inference_options: dict | None = None):
        self._store_params(locals())

    def _store_params(self, arguments: dict) -> None:
        """Store each constructor argument as the attribute of the same name.

        The scikit-learn convention: a constructor only records its arguments (``fit``
        checks them), and ``ppgpc.io.persistence`` saves and rebuilds an estimator from these
        attributes. Every ``__init__`` calls this first, with its ``locals()``, which then
        hold ``self`` and exactly the constructor's parameters.
        """
        for name, value in arguments.items():
            if name not in ("self", "__class__"):
                setattr(self, name, value)

    # ------------------------------------------------------------------ hooks
    def _select_model_options(self, X, y, num_classes) -> Selected:
        """The model options of the final fit, chosen from the data where the estimator
        searches them (epsilon, alpha_eps), the final fit's own driver options (such as a
        warm start from the search's fits) and the searches that ended at a falling edge of
        their grid (``Selected``); default: none of them."""
        return Selected({}, {})

    def _check_model_settings(self) -> None:
        """Check the model-defining options (subclasses)."""

    # --------------------------------------------------------------- helpers
    removed_inference: dict = {}
    """``inference`` settings of earlier versions, each with what replaces it."""

    def _inference(self) -> Inference:
        """``inference`` parsed (a member of ``inference_choices``); an unknown setting names
        the choices, a removed one what replaces it."""
        try:
            return self.inference_choices(self.inference)
        except ValueError:
            if isinstance(self.inference, str) and self.inference in self.removed_inference:
                raise ValueError(f"{type(self).__name__} does not know inference="
                                 f"{self.inference!r}; "
                                 f"{self.removed_inference[self.inference]}") from None
            raise ValueError(f"{type(self).__name__} does not know inference="
                             f"{self.inference!r}; choose from "
                             f"{[str(m) for m in self.inference_choices]}") from None

    def _method(self) -> str:
        """The driver method of ``inference``."""
        return self._inference().method

    def _given_options(self) -> dict:
        """A copy of ``inference_options`` (empty when it is None)."""
        if self.inference_options is None:
            return {}
        if not isinstance(self.inference_options, dict):
            raise ValueError("inference_options must be a dict or None, got "
                             f"{self.inference_options!r}")
        return dict(self.inference_options)

    def _driver_call(self, method: str, num_points: int, given: dict,
                     exact: bool) -> "DriverCall":
        """How this estimator's fit by ``method`` on ``num_points`` training points (after
        any held-out share) reaches ``ppgpc.infer.fit``: which model, with which added model
        and method options (``given``: the ``inference_options`` that apply, for a check
        that needs N). ``exact``: the search's type-II fits of the exact model. The base
        class: its own model as it is."""
        return DriverCall(self.model_name, {}, {}, {}, self.max_exact_points)

    def _fit_driver(self, X, y, num_classes, model_options, method=None, *,
                    exact: bool = False, **options):
        """The final fit (or, with ``method`` and ``options``, one fit of a search): the one
        call of ``ppgpc.infer.fit``, with this estimator's kernel and seed.
        ``inference_options`` apply to the fits of the estimator's own method; their
        ``validation_fraction`` holds out a stratified share of the points, which the
        driver scores (``ppgpc.infer.fit``'s ``validation_data``); the method's
        ``progress_bar`` is ``progress`` unless ``options`` set it.

        Args:
            X: (N, D) standardised inputs; y: (N,) integer labels in 0..C-1.
            model_options: the model's ``prepare`` options.
            method: the driver method (None: the estimator's).
            exact: the exact model, where ``inference="collapsed"`` goes sparse.
            options: method options that win over every other.
        """
        method = method or self._method()
        given = self._given_options() if method == self._method() else {}
        X, y, held_out = hold_out(X, y, given.pop("validation_fraction", None), self.seed)
        call = self._driver_call(method, len(y), given, exact)
        options = {"progress_bar": bool(self.progress), **call.options, **given, **call.fixed,
                   **options}
        # the estimator warns once for its whole fit, from the merged report
        return driver.fit(
            call.model, X, y, method=method, num_classes=num_classes, kernel=self.kernel,
            model_options={**model_options, **call.model_options}, seed=self.seed,
            max_exact_points=call.max_exact_points, validation_data=held_out, warn=False,
            **options)

    def _check_fitted(self):
        """scikit-learn's ``NotFittedError`` (a ValueError and AttributeError) before fit."""
        check_is_fitted(self, "result_")

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        """X as a finite float64 array (n, D).

        scikit-learn's ``validate_data`` checks the array (2-D, numeric, not complex, not
        sparse, not empty, at least 2 samples when fitting) and the columns: with
        ``reset`` (fit) it records ``n_features_in_`` and, for string column names,
        ``feature_names_in_``; otherwise it refuses a different number of columns, or names
        that differ from fit's or come in another order. Before it, a table's columns of
        strings or categories, and at prediction columns missing, new or reordered, get an
        error that names them (``check_frame_columns``). ppgpc's ``check_features`` then
        names the rows with NaN or infinite values and refuses values that overflow the
        kernel.
        """
        check_frame_columns(X, None if reset else getattr(self, "feature_names_in_", None))
        X = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=False,
                          ensure_min_samples=2 if reset else 1)
        return check_features(X)

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
        previous = {k: v for k, v in vars(self).items() if is_fitted_attribute(k)}
        try:
            inference = self._inference()  # validate the settings before any work
            check_seed(self.seed)
            X = self._validate_X(X, reset=True)  # records n_features_in_, feature_names_in_
            y = check_labels(column_or_1d(y, warn=True), X.shape[0])
            classes, codes = encode_labels(y)
            check_class_labels(y)
            warn_of_small_classes(classes, codes)
            self._check_settings()
            # refuse a data set too large for the final fit now, before any validation fits
            # (or, for an estimator that has one, choose its sparse inference instead)
            self._size_checked(X.shape[0])
            self.classes_ = classes
            self.standardizer_ = fit_standardizer(X, self.standardize)
            Xs = X if self.standardizer_ is None else self.standardizer_.transform(X)
            C = len(self.classes_)
            # a line at once: the first fit at a data shape compiles for seconds before the
            # loops' own progress starts
            note(f"{type(self).__name__}: fitting {X.shape[0]} points, {X.shape[1]} inputs, "
                 f"{C} classes (inference {str(inference)!r}) ...", self.progress)
            # one warning for the whole fit; one BLAS thread (``ppgpc.runtime.threads``)
            with blas_limited():
                options, final, grid_edges = self._select_model_options(Xs, codes, C)
                # the fit ran on the scaled inputs; its predictions take raw X as the
                # estimator's do
                self.result_ = dataclasses.replace(
                    self._fit_driver(Xs, codes, C, options, **final),
                    input_scaling=self.standardizer_)
            self.result_ = self._with_report(self.result_, grid_edges)
            self.n_iter_ = self.result_.info.iterations
        except BaseException:
            # a failed fit leaves the previous fit (or none) in place, never a mixture of
            # new labels and scaling with an old posterior
            for k in [k for k in vars(self) if is_fitted_attribute(k)]:
                delattr(self, k)
            vars(self).update(previous)
            raise
        if self.has_noise_scale:
            self.noise_scale_ = fitted_noise_scale(self.result_)
            warn_of_collapsed_noise(self.noise_scale_, *self._noise_scale_names())
        convergence.warn_if_needed(self.result_.info.convergence, estimator=type(self).__name__)
        return self

    def _with_report(self, result, grid_edges):
        """``result`` with the estimator's whole report: the driver's merged with the
        stages before the final fit, the search's grid edges and the estimator's notes."""
        report = dataclasses.replace(result.info.convergence.merged(
            optimizers=self._report_optimizers(), grid_edges=grid_edges,
            notes=self._report_notes()), for_estimator=True)
        return dataclasses.replace(result, info=dataclasses.replace(result.info,
                                                                    convergence=report))

    @property
    def convergence_(self) -> ConvergenceReport | None:
        """Whether to trust the fit (``ppgpc.infer.convergence.ConvergenceReport``): R-hat,
        ESS and divergences of MCMC draws, each optimisation stage's convergence, the
        largest Cholesky jitter, and searched values at the edge of their grid. ``fit``
        raises one ``ppgpc.ConvergenceWarning`` when it finds a problem. None for a model
        saved before ppgpc kept the report."""
        self._check_fitted()
        return self.result_.info.convergence

    def _check_settings(self) -> None:
        """Check the constructor settings ``fit`` needs before any work: the shared ones,
        the model's (``_check_model_settings``) and ``inference_options`` (before a
        smoothing search runs fits that would not use them)."""
        check_size_limit(self.max_exact_points)
        check_flag("progress", self.progress)
        given = self._given_options()
        if "progress_bar" in given:
            raise ValueError("progress is the estimator option progress=True/False, not "
                             "inference_options['progress_bar']")
        self._check_model_settings()
        check_method_options(self._method(), self._method_options(given))

    def _method_options(self, given: dict) -> dict:
        """The driver options that ``inference_options`` amount to (for the check before
        fitting); subclasses remove keys they handle themselves."""
        return given

    def _exact_size_limit(self) -> int | None:
        """The ``max_exact_points`` the final fit applies (None for a sparse inference)."""
        return self.max_exact_points

    def _size_checked(self, num_points: int) -> None:
        """Refuse ``num_points`` training points above the exact size limit
        (``_exact_size_limit``), naming the sparse alternative; estimators that can go
        sparse by themselves decide here instead."""
        limit = self._exact_size_limit()
        if limit is not None:
            check_exact_size(num_points, limit, type(self).__name__,
                             get_spec(self.model_name).sparse_alternative)

    def _report_optimizers(self) -> tuple:
        """Optimisation stages of the fit that ran before the final driver call and decided
        its result (``OptimizerCheck``s, e.g. hyperparameters fitted on a subsample); none
        by default."""
        return ()

    def _report_notes(self) -> tuple[str, ...]:
        """Phrases for the fit's ``ConvergenceReport.notes`` (what the fit chose by
        itself); none by default."""
        return ()

    def _noise_scale_names(self) -> tuple[np.ndarray, str]:
        """What the entries of a per-entry ``noise_scale_`` stand for, for warnings: the
        names and their kind. The base class: one per class."""
        return self.classes_, "class(es)"

    @blas_limited
    def predict_proba(self, X) -> np.ndarray:
        """(n, C) predictive class probabilities, columns in the order of ``classes_``."""
        self._check_fitted()
        return self.result_.predict_proba(self._validate_X(X, reset=False))

    @blas_limited
    def predict_proba_draws(self, X) -> np.ndarray:
        """(S, n, C) class probabilities p(y = c | f_s) at X, one row of probabilities per
        posterior draw s (S = chains x draws), columns in the order of ``classes_``: the
        uncertainty that ``predict_proba``, their mean (within Monte Carlo error), averages
        away. X is raw input, scaled as ``predict_proba`` scales it."""
        self._check_fitted()
        draws = np.asarray(self.result_.predict_proba_draws(self._validate_X(X, reset=False)))
        return draws.reshape(-1, *draws.shape[2:])

    @property
    def hyperparameters_(self) -> dict:
        """The fitted hyperparameters by name, as NumPy arrays: point estimates (type-II ML
        or MAP, CAVI, SVI) or, where the fit sampled them, their posterior means.

        Lengthscales are in the scaled input space the model was fitted in
        (``standardizer_``); with column names (a pandas DataFrame) each feature's
        lengthscale is its own entry, ``"kernel_lengthscale[<column>]"``. The full
        posterior of sampled hyperparameters is in the ArviZ export:
        ``az.summary(est.to_inference_data(), var_names=["kernel_lengthscale"])``.
        """
        self._check_fitted()
        names = getattr(self, "feature_names_in_", None)
        out = {}
        for name, value in self.result_.hypers.items():
            value = np.asarray(value, dtype=np.float64)
            value = np.asarray(value[0, 0] if self.result_.point_hypers
                               else value.mean(axis=(0, 1)))
            if (name.endswith("lengthscale") and names is not None and value.ndim >= 1
                    and value.shape[-1] == len(names)):
                out.update({f"{name}[{column}]": np.asarray(value[..., j])
                            for j, column in enumerate(names)})
            else:
                out[name] = value
        return out

    def predict(self, X) -> np.ndarray:
        """(n,) most probable labels, taken from ``classes_``."""
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def encode_classes(self, y, num_samples: int | None = None) -> np.ndarray:
        """(n,) int64 indices into ``classes_`` of the labels ``y`` (of ``num_samples``
        rows when given); a label not seen in fit raises a ValueError naming it."""
        num_samples = len(y) if num_samples is None else num_samples
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
        X = self._validate_X(X, reset=False)
        codes = self.encode_classes(y, X.shape[0])
        return metrics.accuracy(self.result_.predict_proba(X), codes)

    def evaluate(self, X, y, n_bins: int = 10) -> dict:
        """Accuracy, NLL, Brier and ECE (``docs/math.md``) on (X, y)."""
        self._check_fitted()
        X = self._validate_X(X, reset=False)
        codes = self.encode_classes(y, X.shape[0])
        return metrics.evaluate(self.result_.predict_proba(X), codes, n_bins=n_bins)

    @blas_limited
    def to_inference_data(self, X=None, y=None, *, thin=1, **kwargs):
        """ArviZ ``InferenceData`` of the fit, with a ``predictions`` group at X if given
        (and the true labels y there, for ``ppgpc.evaluation.exports``).

        Labels are exported as codes: every ``y`` variable and the ``class`` coordinate
        hold 0..C-1, and ``classes_`` (the original labels) is the ``class_label``
        coordinate along ``class``. Point hyperparameters (type-II ML / MAP) are one value
        each in ``constant_data``, marked by ``attrs["point_estimate"]``.

        Groups: ``posterior`` (``f`` at the training inputs, sampled hyperparameters),
        ``constant_data`` (training X, point hyperparameters), ``log_likelihood`` and
        ``posterior_predictive`` (per draw at the training inputs), ``observed_data``,
        ``sample_stats``; with X, ``predictions`` (``p`` and a sampled ``y`` per draw, for at
        most ``PREDICTION_DRAWS`` = 200 draws: pass ``prediction_draws=None`` for all, and
        ``prediction_latent=True`` for the latent ``f`` there) and
        ``predictions_constant_data`` (X, ``p_mean``, which is ``predict_proba(X)``, and y).

        The ``feature`` coordinate holds the column names of fit (``feature_names_in_``)
        when X had them, 0..D-1 otherwise. ``thin`` keeps every ``thin``-th posterior draw;
        other keyword arguments (``key``, ``feature_names``, ``max_bytes``,
        ``prediction_draws``, ``prediction_latent``) go to
        ``ppgpc.infer.arviz_export.to_inference_data``.
        """
        self._check_fitted()
        if X is None and y is not None:
            raise ValueError("y gives the true labels of the predictions at X; pass X too "
                             "(the training labels are exported in observed_data already)")
        if "class_names" in kwargs or "y_pred" in kwargs:
            raise TypeError("an estimator names the classes by classes_ and takes the true "
                            "labels as y; do not pass class_names or y_pred")
        X_pred = None if X is None else self._validate_X(X, reset=False)
        codes = None if y is None else self.encode_classes(y, X_pred.shape[0])
        from ppgpc.infer.arviz_export import to_inference_data  # imports ArviZ: on first use

        names = getattr(self, "feature_names_in_", None)
        if names is not None and kwargs.get("feature_names") is None:
            kwargs["feature_names"] = [str(n) for n in names]

        return to_inference_data(self.result_, X_pred, class_names=self.classes_, y_pred=codes,
                                 thin=thin, **kwargs)

    def save(self, path):
        """Save the fitted estimator to the folder ``path`` without pickle: netCDF arrays and
        JSON settings (``ppgpc.io.persistence``). Load it with ``ppgpc.load(path)`` or
        ``<Class>.load(path)``; the loaded estimator predicts bit for bit the same.

        Returns:
            The folder written.
        """
        return save_estimator(self, path, saveable_estimators())

    @classmethod
    def load(cls, path):
        """Load an estimator saved by ``save`` (a TypeError if it is not a ``cls``)."""
        return load_estimator(path, saveable_estimators(), expected=cls)

    # ------------------------------------------------------------ saving
    def saved_params(self) -> dict:
        """The constructor parameters as a save stores them (JSON-ready: a ``Selection``
        as a dict; ``ppgpc.io.persistence``)."""
        return {name: getattr(self, name) for name in self._param_names()}

    @classmethod
    def params_from_saved(cls, params: dict) -> dict:
        """The constructor parameters of a save written by this version
        (``saved_params`` undone)."""
        return dict(params)

    @classmethod
    def _param_names(cls) -> list[str]:
        return sorted(cls._get_param_names())


def saveable_estimators() -> dict:
    """ppgpc's own estimator classes by name, the classes a save may name: the subclasses of
    ``GPClassifierBase`` defined in ``ppgpc.estimators`` under a name of
    ``ppgpc.catalog.CLASSIFIERS`` (a subclass a user or a benchmark derives is not among
    them, so a save never names a class a load would refuse). Found through the class
    hierarchy, so this module need not import the modules above it.
    """
    from ppgpc.catalog import CLASSIFIERS

    names = {c.estimator for c in CLASSIFIERS}
    found, todo = {}, [GPClassifierBase]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__name__ in names and cls.__module__.startswith("ppgpc.estimators."):
            found[cls.__name__] = cls
    return found

"""scikit-learn-style estimators on top of the inference driver.

Every classifier follows the same conventions:

* ``fit(X, y)`` takes any hashable labels; ``classes_`` holds the sorted unique labels and
  the model sees their indices 0..C-1 (as scikit-learn does);
* ``predict_proba(X)`` returns a NumPy array (n, C) whose rows sum to 1, columns ordered as
  ``classes_``; ``predict`` returns labels from ``classes_``; ``score`` is the accuracy;
* ``to_inference_data(X=None)`` exports the posterior (and predictions at X) to ArviZ;
* inputs are z-scored with the training statistics by default (``standardize=True``);
* every random step derives its key from ``seed``, so fits are reproducible.
"""

from __future__ import annotations

import numpy as np

from ppgpc import metrics
from ppgpc.datasets import Standardizer, train_validation_split
from ppgpc.infer import fit as run_inference
from ppgpc.validation import (
    MAX_EXACT_POINTS,
    check_features,
    check_labels,
    encode_labels,
)

__all__ = ["GPClassifierBase", "ILRGPClassifier"]

_INFERENCE_TO_METHOD = {"exact": "exact", "map": "map", "nuts": "nuts"}


class GPClassifierBase:
    """Shared machinery of the ppgpc estimators; subclasses set the model and its options."""

    model_name: str = ""

    def __init__(self, *, kernel="rbf-ard", inference: str = "exact", standardize: bool = True,
                 seed: int = 0, max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        self.kernel = kernel
        self.inference = inference
        self.standardize = standardize
        self.seed = seed
        self.max_exact_points = max_exact_points
        self.inference_options = inference_options

    # ------------------------------------------------------------------ hooks
    def _model_options(self) -> dict:
        """Options passed to the model's ``prepare`` for the final fit."""
        return {}

    def _select_model_options(self, X, y, num_classes) -> dict:
        """Choose data-dependent model options (e.g. epsilon by validation); default: none."""
        return self._model_options()

    # --------------------------------------------------------------- helpers
    def _method(self) -> str:
        try:
            return _INFERENCE_TO_METHOD[self.inference]
        except KeyError:
            raise ValueError(
                f"{type(self).__name__} does not know inference={self.inference!r}; choose "
                f"from {sorted(_INFERENCE_TO_METHOD)}"
            ) from None

    def _fit_driver(self, X, y, num_classes, model_options, method=None, **options):
        method = method or self._method()
        opts = dict(self.inference_options or {}) if method == self._method() else {}
        opts.update(options)
        return run_inference(
            self.model_name, X, y, method=method, num_classes=num_classes, kernel=self.kernel,
            model_options=model_options, seed=self.seed,
            max_exact_points=self.max_exact_points, **opts,
        )

    def _check_fitted(self):
        if not hasattr(self, "result_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit(X, y)")

    def _transform(self, X) -> np.ndarray:
        X = check_features(X, num_features=self.n_features_in_)
        return self.standardizer_.transform(X) if self.standardizer_ is not None else X

    # ------------------------------------------------------------ public API
    def fit(self, X, y):
        """Fit the classifier.

        Args:
            X: (N, D) numeric inputs without NaN.
            y: (N,) labels of any hashable type; at least two distinct classes.

        Returns:
            self.
        """
        self._method()  # validate before any work
        X = check_features(X)
        y = check_labels(y, X.shape[0])
        self.classes_, codes = encode_labels(y)
        self.n_features_in_ = X.shape[1]
        self.standardizer_ = Standardizer.fit(X) if self.standardize else None
        Xs = self.standardizer_.transform(X) if self.standardize else X
        C = len(self.classes_)
        options = self._select_model_options(Xs, codes, C)
        self.result_ = self._fit_driver(Xs, codes, C, options)
        return self

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
        codes = self._encode_known(y, np.asarray(X).shape[0] if np.ndim(X) else 0)
        return metrics.accuracy(self.predict_proba(X), codes)

    def evaluate(self, X, y, n_bins: int = 10) -> dict:
        """Accuracy, NLL, Brier and ECE (MATH.md section 5) on (X, y)."""
        self._check_fitted()
        codes = self._encode_known(y, np.asarray(X).shape[0])
        return metrics.evaluate(self.predict_proba(X), codes, n_bins=n_bins)

    def to_inference_data(self, X=None):
        """ArviZ ``InferenceData`` of the fit, with a ``predictions`` group at X if given."""
        self._check_fitted()
        X_pred = None if X is None else self._transform(X)
        return self.result_.to_inference_data(X_pred, class_names=self.classes_)


class ILRGPClassifier(GPClassifierBase):
    """The ILR-GP classifier (MATH.md section 1): conjugate GP regression on ILR targets.

    Args:
        epsilon: label-smoothing level in (0, 1), or ``"auto"`` to choose it from
            ``epsilon_grid`` by validation NLL on a stratified ``validation_fraction`` of the
            training data (the paper's protocol), then refit on all of it.
        tau: Proposition 1 tolerance that sets the noise level sigma.
        noise_std: set sigma directly instead (overrides tau).
        kernel: ``"rbf-ard"`` (default), ``"rbf"`` or a kernel object.
        inference: ``"exact"`` (type-II ML hyperparameters and the closed-form posterior),
            ``"map"`` (type-II MAP) or ``"nuts"`` (NUTS; options in ``inference_options``,
            e.g. ``{"form": "latent", "num_samples": 1000}``).
        standardize: z-score the inputs with the training statistics.
        seed: integer seed for every random step.
        max_exact_points: refuse exact inference above this many points.
        inference_options: options for the driver's method (see ``ppgpc.infer.fit``).

    Attributes (after fit):
        classes_, n_features_in_, epsilon_, epsilon_scores_ (validation NLL per epsilon when
        ``epsilon="auto"``), noise_std_, result_ (the driver's ``FitResult``).

    Example:
        >>> from ppgpc import ILRGPClassifier
        >>> from ppgpc.datasets import load
        >>> X, y = load("wine")
        >>> clf = ILRGPClassifier(epsilon=0.999).fit(X, y)
        >>> clf.predict_proba(X[:2]).shape
        (2, 3)
    """

    model_name = "ilr_gp"

    def __init__(self, *, epsilon="auto", tau: float | None = None,
                 noise_std: float | None = None, epsilon_grid=None,
                 validation_fraction: float = 0.1, kernel="rbf-ard", inference: str = "exact",
                 standardize: bool = True, seed: int = 0,
                 max_exact_points: int | None = MAX_EXACT_POINTS,
                 inference_options: dict | None = None):
        super().__init__(kernel=kernel, inference=inference, standardize=standardize, seed=seed,
                         max_exact_points=max_exact_points, inference_options=inference_options)
        self.epsilon = epsilon
        self.tau = tau
        self.noise_std = noise_std
        self.epsilon_grid = epsilon_grid
        self.validation_fraction = validation_fraction

    def _options_for(self, epsilon: float) -> dict:
        from ppgpc.models.ilr_gp import DEFAULT_TAU

        options = {"epsilon": float(epsilon), "tau": DEFAULT_TAU if self.tau is None else self.tau}
        if self.noise_std is not None:
            options["noise_std"] = float(self.noise_std)
        return options

    def _select_model_options(self, X, y, num_classes) -> dict:
        from ppgpc.models.ilr_gp import EPSILON_GRID, prepare

        if self.epsilon != "auto":
            self.epsilon_ = float(self.epsilon)
            self.epsilon_scores_ = None
        else:
            grid = tuple(EPSILON_GRID if self.epsilon_grid is None else self.epsilon_grid)
            if not grid:
                raise ValueError("epsilon_grid is empty")
            split = train_validation_split(X, y, seed=self.seed,
                                           val_fraction=self.validation_fraction)
            scores = {}
            for eps in grid:
                result = self._fit_driver(split.X_train, split.y_train, num_classes,
                                          self._options_for(eps), method="exact", num_draws=1)
                probs = result.predict_proba(split.X_val)
                scores[float(eps)] = metrics.nll(probs, split.y_val)
            self.epsilon_scores_ = scores
            self.epsilon_ = min(scores, key=scores.get)
        options = self._options_for(self.epsilon_)
        self.noise_std_ = float(np.sqrt(prepare(X[:1], y[:1], num_classes, **options).noise_var))
        return options

"""Input checks that turn bad input into errors naming the problem.

Every public entry point (driver, estimators, CLI) calls these before any JAX code runs, so
a user sees "X has 3 rows with NaN" rather than a traceback from inside a Cholesky.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_features",
    "check_labels",
    "check_integer_labels",
    "encode_labels",
    "check_exact_size",
    "check_positive",
    "MAX_EXACT_POINTS",
]

MAX_EXACT_POINTS = 10_000
"""Largest N for exact GP inference by default: the N x N Cholesky needs 8 N^2 bytes
(800 MB at N = 10 000) and O(N^3) time per hyperparameter step."""


def check_features(X, *, name: str = "X", num_features: int | None = None) -> np.ndarray:
    """A finite float64 array of shape (n, D).

    Raises:
        ValueError: not 2-D (a 1-D array gets a hint to reshape), empty, non-numeric,
            NaN/inf entries (with how many rows), or D differs from ``num_features``.
    """
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric array: {err}") from None
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got a 1-D array of shape "
            f"{arr.shape}; use X.reshape(-1, 1) for a single feature or X.reshape(1, -1) "
            "for a single sample"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        kinds = "NaN" if np.isnan(arr).any() else "infinite values"
        raise ValueError(
            f"{name} contains {kinds} in {rows.size} row(s) (first: {rows[:5].tolist()}); "
            "remove or impute them before fitting"
        )
    if num_features is not None and arr.shape[1] != num_features:
        raise ValueError(
            f"{name} has {arr.shape[1]} features but the model was fitted with {num_features}"
        )
    return arr


def check_labels(y, num_samples: int, *, name: str = "y") -> np.ndarray:
    """A 1-D label array of length ``num_samples`` with no missing values."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {arr.shape}")
    if arr.shape[0] != num_samples:
        raise ValueError(
            f"X and {name} disagree on the number of samples: {num_samples} versus {arr.shape[0]}"
        )
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN labels ({int(np.isnan(arr).sum())} of them)")
    if arr.dtype.kind == "O" and any(v is None for v in arr):
        raise ValueError(f"{name} contains missing (None) labels")
    return arr


def encode_labels(y) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique classes and integer codes 0..C-1, as scikit-learn's ``classes_``.

    Raises:
        ValueError: fewer than two classes.
    """
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(
            f"y has a single class ({classes.tolist()}); a classifier needs at least 2"
        )
    return classes, codes.astype(np.int64)


def check_integer_labels(y, num_samples: int, num_classes: int | None) -> tuple[np.ndarray, int]:
    """Integer labels in 0..C-1 for the driver, and C (taken from the labels if not given).

    Raises:
        ValueError: non-integer labels, negative labels, labels >= num_classes.
    """
    arr = check_labels(y, num_samples)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(
                "the driver takes integer labels 0..C-1; encode other labels first "
                "(ppgpc.validation.encode_labels) or use an estimator such as ILRGPClassifier"
            )
    if arr.min() < 0:
        raise ValueError(f"labels must be non-negative, got {arr.min()}")
    if num_classes is None:
        num_classes = int(arr.max()) + 1
    if arr.max() >= num_classes:
        raise ValueError(f"label {arr.max()} is out of range for num_classes={num_classes}")
    if num_classes < 2:
        raise ValueError("a classifier needs at least 2 classes")
    return arr.astype(np.int64), int(num_classes)


def check_exact_size(num_samples: int, limit: int | None, model_name: str) -> None:
    """Refuse exact inference above ``limit`` points, naming the memory it would need."""
    if limit is not None and num_samples > limit:
        gib = 8 * num_samples**2 / 2**30
        raise ValueError(
            f"{num_samples} training points is too many for exact inference with "
            f"{model_name} (each N x N matrix takes {gib:.1f} GiB and a fit costs O(N^3)); "
            f"the limit is {limit}. Use a sparse model, subsample the data, or raise the "
            "limit with max_exact_points=..."
        )


def check_positive(name: str, value) -> float:
    """``value`` as a float, if it is a finite positive real number (not a bool); otherwise a
    ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and positive, got {value!r}")
    return float(value)

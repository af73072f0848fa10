"""Feature scaling fitted on training inputs and applied to any inputs: z-scores (the
default), robust (median and IQR) or min-max (``Standardizer``, ``standardize``).
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import numpy as np

__all__ = ["SCALING_METHODS", "Standardizer", "standardize"]


def _as_features(X, name: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {X.shape}")
    return X


_NORMAL_IQR = 1.3489795003921634
"""Interquartile range of the standard normal distribution, 2 Phi^{-1}(0.75)."""


SCALING_METHODS = ("zscore", "robust", "minmax")
"""The per-feature scalings ``Standardizer.fit`` offers (``method=``)."""


class Standardizer(NamedTuple):
    """Per-feature affine scaling ``(x - mean) / scale`` with statistics from training data.

    The statistics depend on the method it was fitted with: mean and standard deviation
    (z-scores, the default), median and interquartile range / 1.349 (``"robust"``), or
    minimum and range (``"minmax"``, training values mapped onto [0, 1]). Build it with
    :meth:`fit`; store it with :meth:`to_dict` (JSON-friendly, no pickle).

    It is ours, not scikit-learn's ``StandardScaler``: saved models store exactly these two
    arrays for all three methods, and only an exactly constant column (max == min) gets
    scale 1 and its own value as offset (so it transforms to exactly 0), where
    ``StandardScaler`` also sets scale 1 on columns whose variance is within rounding of 0.

    Example:
        >>> s = Standardizer.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
        >>> s.mean, s.scale
        (array([1., 5.]), array([1., 1.]))
        >>> s.transform(np.array([[4.0, 6.0]]))
        array([[3., 1.]])
    """

    mean: np.ndarray
    """Per-feature offset, float64, (d,): the training mean (median with
    ``method="robust"``, minimum with ``method="minmax"``)."""
    scale: np.ndarray
    """Per-feature scale, float64, (d,): the training standard deviation (ddof=0; IQR / 1.349
    with ``method="robust"``, max - min with ``method="minmax"``); 1 where a column is
    constant in the training data."""

    @classmethod
    def fit(cls, X, method: str = "zscore") -> "Standardizer":
        """Fit offset and scale on training features.

        Args:
            X: Training features, shape (n, d), n >= 1, all finite.
            method: ``"zscore"`` (mean and standard deviation), ``"robust"`` (centre at the
                median and scale by the interquartile range / 1.349, the standard deviation
                of a normal distribution with that IQR, so that a few extreme values cannot
                squash the rest of a column together; columns whose IQR is 0 fall back to
                the standard deviation) or ``"minmax"`` (the training minimum to 0 and
                maximum to 1, the ILR paper's other preprocessing).

        Returns:
            The fitted Standardizer. Constant columns (max == min) get scale 1 and their
            value as offset, so they transform to exactly 0 instead of dividing by zero.

        Raises:
            ValueError: X is not 2-D, has no rows, or has NaN/inf entries; unknown method.
        """
        if method not in SCALING_METHODS:
            raise ValueError(f"unknown scaling method {method!r}; choose one of "
                             f"{SCALING_METHODS}")
        X = _as_features(X)
        if X.shape[0] == 0:
            raise ValueError(f"cannot fit a Standardizer on zero rows (X shape {X.shape})")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        constant = X.max(axis=0) == X.min(axis=0)
        centre, spread = X.mean(axis=0), X.std(axis=0)
        if method == "robust":
            q25, q50, q75 = np.percentile(X, [25.0, 50.0, 75.0], axis=0)
            centre = q50
            spread = np.where(q75 > q25, (q75 - q25) / _NORMAL_IQR, spread)
        elif method == "minmax":
            centre, spread = X.min(axis=0), X.max(axis=0) - X.min(axis=0)
        mean = np.where(constant, X[0], centre)
        scale = np.where(constant, 1.0, spread)
        return cls(mean=mean, scale=scale)

    def max_abs_score(self, X) -> np.ndarray:
        """(d,) largest |transformed value| per column of X: a large one (tens) means a few
        extreme values dominate the column's scale."""
        return np.max(np.abs(self.transform(X)), axis=0, initial=0.0)

    @property
    def n_features(self) -> int:
        """Number of features d."""
        return self.mean.shape[0]

    def transform(self, X) -> np.ndarray:
        """Scale features: ``(X - mean) / scale``.

        Args:
            X: Features, shape (m, d).

        Returns:
            Standardized features, float64, shape (m, d).
        """
        X = _as_features(X)
        if X.shape[1] != self.n_features:
            raise ValueError(
                f"X has {X.shape[1]} features (shape {X.shape}), the Standardizer was fit "
                f"on {self.n_features}"
            )
        return (X - self.mean) / self.scale

    def inverse_transform(self, Z) -> np.ndarray:
        """Undo :meth:`transform`: ``Z * scale + mean``; shape (m, d) -> (m, d)."""
        Z = _as_features(Z, "Z")
        if Z.shape[1] != self.n_features:
            raise ValueError(
                f"Z has {Z.shape[1]} features (shape {Z.shape}), the Standardizer was fit "
                f"on {self.n_features}"
            )
        return Z * self.scale + self.mean

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-friendly form ``{"mean": [...], "scale": [...]}`` (exact float round-trip)."""
        return {"mean": self.mean.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Standardizer":
        """Rebuild a Standardizer from :meth:`to_dict` output.

        Raises:
            ValueError: Missing keys, mismatched lengths, or non-positive/non-finite scale.
        """
        missing = {"mean", "scale"} - set(data)
        if missing:
            raise ValueError(f"Standardizer dict lacks keys {sorted(missing)}; got {sorted(data)}")
        mean = np.asarray(data["mean"], dtype=np.float64)
        scale = np.asarray(data["scale"], dtype=np.float64)
        if mean.ndim != 1 or mean.shape != scale.shape:
            raise ValueError(
                f"mean and scale must be 1-D of equal length, got shapes {mean.shape} and "
                f"{scale.shape}"
            )
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise ValueError("mean must be finite and scale finite and positive")
        return cls(mean=mean, scale=scale)


def standardize(X_train, *others) -> tuple[np.ndarray, ...]:
    """z-score ``X_train`` and any other sets with the training mean and scale only.

    Args:
        X_train: Training features, shape (n, d); the only source of the statistics.
        *others: Further feature arrays (validation, test), each shape (m_i, d).

    Returns:
        ``(Z_train, *Z_others)``, float64, same shapes as the inputs. To keep the fitted
        statistics (e.g. to save a model), use :meth:`Standardizer.fit` instead.

    Example:
        >>> Z_train, Z_test = standardize(np.array([[1.0], [3.0]]), np.array([[5.0]]))
        >>> Z_train.ravel(), Z_test.ravel()
        (array([-1.,  1.]), array([3.]))
    """
    scaler = Standardizer.fit(X_train)
    return tuple(scaler.transform(X) for X in (X_train, *others))

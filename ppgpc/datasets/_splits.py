"""Train/validation/test splits following the ILR paper's protocol, and z-scoring.

Protocol: hold out ``n_test`` points as the test set (50 for the small UCI datasets), then
``val_fraction`` (10%) of the remainder as a validation set; the rest is the training set.
All randomness comes from ``np.random.default_rng(seed)``; no global RNG is touched.

Stratification (the default) is a deliberate choice of ppgpc, not something the paper
states: each held-out set takes from every class in proportion to its size, and every
class keeps at least one training point. With a plain random split a rare class, such as
class 6 of glass (9 of 214 points), could be missing from training entirely.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping, NamedTuple

import numpy as np

__all__ = [
    "Split",
    "SplitIndices",
    "Standardizer",
    "TrainValidationSplit",
    "paper_split",
    "paper_split_indices",
    "standardize",
    "train_validation_split",
    "stratified_folds",
]


# --------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------


class SplitIndices(NamedTuple):
    """Row indices of a train/validation/test split, each sorted ascending."""

    train: np.ndarray
    """Indices of the training rows, int64, shape (n_train,)."""
    val: np.ndarray
    """Indices of the validation rows, int64, shape (n_val,)."""
    test: np.ndarray
    """Indices of the test rows, int64, shape (n_test,)."""


class Split(NamedTuple):
    """A train/validation/test split of ``(X, y)``; rows keep their original order."""

    X_train: np.ndarray
    """Training features, shape (n_train, d)."""
    y_train: np.ndarray
    """Training labels, shape (n_train,)."""
    X_val: np.ndarray
    """Validation features, shape (n_val, d)."""
    y_val: np.ndarray
    """Validation labels, shape (n_val,)."""
    X_test: np.ndarray
    """Test features, shape (n_test, d)."""
    y_test: np.ndarray
    """Test labels, shape (n_test,)."""


class TrainValidationSplit(NamedTuple):
    """A train/validation split of ``(X, y)``; rows keep their original order."""

    X_train: np.ndarray
    """Training features, shape (n_train, d)."""
    y_train: np.ndarray
    """Training labels, shape (n_train,)."""
    X_val: np.ndarray
    """Validation features, shape (n_val, d)."""
    y_val: np.ndarray
    """Validation labels, shape (n_val,)."""


# --------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------


def _check_xy(X, y) -> tuple[np.ndarray, np.ndarray]:
    """X as a 2-D array and y as a 1-D array of the same length, or a ValueError."""
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got shape {X.shape}")
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n,), got shape {y.shape}")
    if X.shape[0] != y.shape[0]:
        raise ValueError(
            f"X and y have different numbers of rows: X {X.shape}, y {y.shape}"
        )
    return X, y


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed)


def _check_fraction(val_fraction) -> float:
    if not isinstance(val_fraction, numbers.Real) or not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction!r}")
    return float(val_fraction)


def _n_val(n_rest: int, val_fraction: float) -> int:
    """Validation size: ``val_fraction * n_rest`` rounded to nearest (halves up), at least 1."""
    return max(1, int(np.floor(val_fraction * n_rest + 0.5)))


# --------------------------------------------------------------------------------------
# Core: hold out k of n rows
# --------------------------------------------------------------------------------------


def _stratified_quota(counts: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """How many rows of each class to hold out: k in total, proportional, one kept per class.

    Largest-remainder allocation of ``k * counts / counts.sum()``, capped at
    ``counts - 1`` so that every class keeps a row; ties are broken at random.

    Args:
        counts: Rows per class, shape (c,), all >= 1.
        k: Rows to hold out, ``0 <= k <= counts.sum() - c``.
        rng: Source of the tie-breaking randomness.

    Returns:
        Held-out rows per class, int64, shape (c,), summing to k.
    """
    cap = counts - 1
    exact = k * counts / counts.sum()
    quota = np.minimum(np.floor(exact).astype(np.int64), cap)
    tie_break = rng.random(counts.size)
    while quota.sum() < k:
        open_ = np.flatnonzero(quota < cap)
        # Largest remainder first; random order among equal remainders.
        order = open_[np.lexsort((tie_break[open_], -(exact - quota)[open_]))]
        take = order[: k - quota.sum()]
        quota[take] += 1
    return quota


def _hold_out(
    y: np.ndarray, k: int, rng: np.random.Generator, stratify: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(len(y))`` into (kept, held) index arrays with ``len(held) == k``.

    Stratified: per-class quotas from :func:`_stratified_quota`, rows drawn uniformly
    within each class. Otherwise a uniform random subset of size k.

    Returns:
        kept, held: sorted int64 index arrays, shapes (n - k,) and (k,).
    """
    n = y.shape[0]
    if stratify:
        classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
        if k > n - classes.size:
            raise ValueError(
                f"cannot hold out {k} of {n} rows and keep at least one row of each of the "
                f"{classes.size} classes; use a smaller held-out size or stratify=False"
            )
        quota = _stratified_quota(counts, k, rng)
        held = np.concatenate(
            [rng.permutation(np.flatnonzero(codes == j))[:q] for j, q in enumerate(quota)]
        )
    else:
        held = rng.permutation(n)[:k]
    mask = np.zeros(n, dtype=bool)
    mask[held] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


# --------------------------------------------------------------------------------------
# Public split functions
# --------------------------------------------------------------------------------------


def paper_split_indices(
    y, *, seed: int, n_test: int = 50, val_fraction: float = 0.1, stratify: bool = True
) -> SplitIndices:
    """Row indices of the ILR paper's split: ``n_test`` test rows, then a validation share.

    Stage 1 holds out ``n_test`` rows as the test set; stage 2 holds out
    ``round(val_fraction * (n - n_test))`` (at least 1) of the remaining rows as the
    validation set; the rest is the training set. With ``stratify=True`` both stages
    allocate held-out rows to classes in proportion to their sizes and leave at least one
    row of every class behind, so every class appears in training.

    Args:
        y: Labels, shape (n,).
        seed: Seed for ``np.random.default_rng``; the same seed gives the same split.
        n_test: Test-set size, ``1 <= n_test < n`` (the paper: 50 for small datasets,
            4000–5000 for large ones; see ``DATASETS[name].paper_n_test``).
        val_fraction: Share of the non-test rows used for validation, in (0, 1).
        stratify: Stratify by class (default) or draw a plain random permutation.

    Returns:
        The sorted train, validation and test indices; disjoint, covering ``range(n)``.

    Raises:
        ValueError: Bad ``y`` shape, ``n_test`` out of range, ``val_fraction`` outside
            (0, 1), or held-out sizes that would leave a class without training rows.
        TypeError: ``seed`` is not a non-negative int.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n,), got shape {y.shape}")
    return _split_indices(y, seed, n_test, val_fraction, stratify)


def _split_indices(y, seed, n_test, val_fraction, stratify) -> SplitIndices:
    n = y.shape[0]
    rng = np.random.default_rng(_check_seed(seed))
    val_fraction = _check_fraction(val_fraction)
    if isinstance(n_test, bool) or not isinstance(n_test, numbers.Integral):
        raise TypeError(f"n_test must be an int, got {n_test!r}")
    if not 1 <= n_test < n:
        raise ValueError(f"n_test must satisfy 1 <= n_test < n = {n}, got n_test={n_test}")
    rest, test = _hold_out(y, int(n_test), rng, stratify)
    n_val = _n_val(rest.size, val_fraction)
    if n_val >= rest.size:
        raise ValueError(
            f"no training rows left: {rest.size} non-test rows, {n_val} for validation"
        )
    train_in_rest, val_in_rest = _hold_out(y[rest], n_val, rng, stratify)
    return SplitIndices(train=rest[train_in_rest], val=rest[val_in_rest], test=test)


def paper_split(
    X, y, *, seed: int, n_test: int = 50, val_fraction: float = 0.1, stratify: bool = True
) -> Split:
    """Split ``(X, y)`` into train/validation/test sets following the ILR paper.

    ``n_test`` test points, then ``val_fraction`` of the remainder (rounded to nearest)
    as validation, the rest for training; see :func:`paper_split_indices` for details.
    Stratified by default so that rare classes are never missing from training (e.g.
    glass class 6, 9 of 214 rows); ``stratify=False`` draws a plain random permutation.

    Args:
        X: Features, shape (n, d).
        y: Labels, shape (n,).
        seed: Seed for ``np.random.default_rng``.
        n_test: Test-set size, ``1 <= n_test < n``.
        val_fraction: Share of the non-test rows used for validation, in (0, 1).
        stratify: Stratify by class (default).

    Returns:
        The six arrays; rows within each set keep their order in ``X``.

    Raises:
        ValueError: Mismatched or mis-shaped inputs, ``n_test >= n``, ``val_fraction``
            outside (0, 1), or a split that would leave a class without training rows.
        TypeError: ``seed`` is not a non-negative int.

    Example:
        >>> X, y = np.arange(200.0).reshape(100, 2), np.repeat([0, 1], 50)
        >>> s = paper_split(X, y, seed=0)
        >>> len(s.y_train), len(s.y_val), len(s.y_test)
        (45, 5, 50)
    """
    X, y = _check_xy(X, y)
    idx = _split_indices(y, seed, n_test, val_fraction, stratify)
    return Split(X[idx.train], y[idx.train], X[idx.val], y[idx.val], X[idx.test], y[idx.test])


def train_validation_split(
    X, y, *, seed: int, val_fraction: float = 0.1, stratify: bool = True
) -> TrainValidationSplit:
    """Split off a validation set only: ``round(val_fraction * n)`` rows (at least 1).

    Uses the same stratified allocation as :func:`paper_split` (every class keeps at
    least one training row), e.g. to carve a validation set out of a given training set.

    Args:
        X: Features, shape (n, d).
        y: Labels, shape (n,).
        seed: Seed for ``np.random.default_rng``.
        val_fraction: Share of the rows used for validation, in (0, 1).
        stratify: Stratify by class (default) or draw a plain random permutation.

    Returns:
        The four arrays; rows within each set keep their order in ``X``.

    Raises:
        ValueError: Mismatched or mis-shaped inputs, ``val_fraction`` outside (0, 1), or
            too few rows to keep a training row of every class.
        TypeError: ``seed`` is not a non-negative int.
    """
    X, y = _check_xy(X, y)
    rng = np.random.default_rng(_check_seed(seed))
    n = y.shape[0]
    n_val = _n_val(n, _check_fraction(val_fraction))
    if n_val >= n:
        raise ValueError(f"no training rows left: {n} rows, {n_val} for validation")
    train, val = _hold_out(y, n_val, rng, stratify)
    return TrainValidationSplit(X[train], y[train], X[val], y[val])


# --------------------------------------------------------------------------------------
# z-scoring
# --------------------------------------------------------------------------------------


def stratified_folds(y, *, num_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified k-fold cross-validation indices.

    Each class's rows are shuffled with ``np.random.default_rng(seed)`` and dealt round-robin
    to the folds (starting at a random fold per class), so every fold gets each class in
    proportion, to within one row.

    Args:
        y: Labels, shape (n,).
        num_folds: k >= 2, at most n.
        seed: Seed for ``np.random.default_rng``.

    Returns:
        k pairs ``(train_indices, validation_indices)``, sorted; the validation sets
        partition 0..n-1.
    """
    y = np.asarray(y)
    n = y.shape[0]
    if not isinstance(num_folds, numbers.Integral) or not 2 <= num_folds <= n:
        raise ValueError(f"num_folds must be an integer in [2, {n}], got {num_folds!r}")
    rng = np.random.default_rng(_check_seed(seed))
    fold = np.empty(n, dtype=np.int64)
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        fold[rows] = (np.arange(rows.size) + rng.integers(num_folds)) % num_folds
    return [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(num_folds)]


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

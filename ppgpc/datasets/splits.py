"""Train/validation/test splits following the ILR paper's protocol, and stratified folds.

Protocol: hold out ``n_test`` points as the test set (50 for the small UCI datasets), then
``val_fraction`` (10%) of the remainder as a validation set; the rest is the training set.
The splits draw from ``np.random.default_rng(seed)``, the folds from scikit-learn's
``random_state=seed``; no global RNG is touched.

Stratification (the default) is a deliberate choice of ppgpc, not something the paper
states: each held-out set takes from every class in proportion to its size, and every
class keeps at least one training point. With a plain random split a rare class, such as
class 6 of glass (9 of 214 points), could be missing from training entirely.

The held-out splits (``paper_split``, ``paper_split_indices``, ``train_validation_split``)
are written here rather than taken from scikit-learn's ``train_test_split(stratify=y)``:
they follow the paper's protocol (a fixed number of test points, then a rounded share for
validation), they promise every class a training row, which ``train_test_split`` does not
(it needs two rows of each class and may leave a rare one out of training), and recorded
results depend on the rows they choose. ``stratified_folds`` is scikit-learn's
``StratifiedKFold``: no protocol asks for folds of our own.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

__all__ = [
    "Split",
    "SplitIndices",
    "TrainValidationSplit",
    "paper_split",
    "paper_split_indices",
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
# Cross-validation folds
# --------------------------------------------------------------------------------------


def stratified_folds(y, *, num_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified k-fold cross-validation indices: scikit-learn's ``StratifiedKFold``.

    ``StratifiedKFold(n_splits=num_folds, shuffle=True, random_state=seed)``: each fold
    gets each class in proportion, to within one row. A class with fewer rows than folds
    is missing from some validation folds (scikit-learn's warning about it is not passed
    on); ``num_folds`` is refused only if no class has that many rows.

    Args:
        y: Labels, shape (n,).
        num_folds: k >= 2, at most n, and at most the size of the largest class.
        seed: Seed of the shuffle (``random_state``).

    Returns:
        k pairs ``(train_indices, validation_indices)``, sorted; the validation sets
        partition 0..n-1.

    Raises:
        ValueError: ``y`` is not 1-D, or ``num_folds`` is not an integer in [2, n] or
            exceeds the size of every class.
        TypeError: ``seed`` is not a non-negative int.
    """
    import warnings

    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n,), got shape {y.shape}")
    n = y.shape[0]
    if not isinstance(num_folds, numbers.Integral) or not 2 <= num_folds <= n:
        raise ValueError(f"num_folds must be an integer in [2, {n}], got {num_folds!r}")
    seed = _check_seed(seed)
    # Integer codes: scikit-learn refuses labels it reads as continuous (e.g. floats).
    codes = np.unique(y, return_inverse=True)[1].reshape(-1)
    largest = int(np.bincount(codes).max())
    if num_folds > largest:
        raise ValueError(f"cannot make {num_folds} stratified folds: the largest class has "
                         f"{largest} rows; use at most {largest} folds")
    # RandomState takes 32-bit seeds; a larger one goes through a SeedSequence.
    state = seed if seed < 2 ** 32 else np.random.RandomState(np.random.MT19937(seed))
    folds = StratifiedKFold(n_splits=int(num_folds), shuffle=True, random_state=state)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class",
                                category=UserWarning)
        return list(folds.split(np.zeros((n, 1)), codes))

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
    "check_nonnegative",
    "check_count",
    "check_probability",
    "check_seed",
    "check_flag",
    "check_options",
    "check_size_limit",
    "MAX_EXACT_POINTS",
    "MAX_ABS_INPUT",
]

MAX_EXACT_POINTS = 10_000
"""Largest N for exact GP inference by default: the N x N Cholesky needs 8 N^2 bytes
(800 MB at N = 10 000) and O(N^3) time per hyperparameter step."""

MAX_ABS_INPUT = 1e150
"""Largest input magnitude accepted: squared distances (and the variances a z-score needs)
of values beyond about 1e154 overflow float64 to inf, and the kernel then gives NaN."""


def check_features(X, *, name: str = "X", num_features: int | None = None) -> np.ndarray:
    """A finite float64 array of shape (n, D).

    Raises:
        ValueError: not 2-D (a 1-D array gets a hint to reshape), empty, non-numeric or
            complex, NaN/inf entries (with how many rows), values beyond ``MAX_ABS_INPUT``
            in magnitude, or D differs from ``num_features``.
    """
    if np.iscomplexobj(X):
        raise ValueError(f"{name} is complex; the GP models take real inputs")
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
            "remove or impute them"
        )
    largest = float(np.abs(arr).max())
    if largest > MAX_ABS_INPUT:
        raise ValueError(
            f"{name} has values up to {largest:.3g} in magnitude; beyond {MAX_ABS_INPUT:.0e} "
            "their squared distances overflow float64 and the kernel would give NaN. "
            "Rescale the inputs (e.g. divide a column by a power of ten)"
        )
    if num_features is not None and arr.shape[1] != num_features:
        raise ValueError(
            f"{name} has {arr.shape[1]} features but the model was fitted with {num_features}"
        )
    return arr


def _is_missing(value) -> bool:
    """Whether a label is missing: None, or a value not equal to itself (NaN, NaT, and
    pandas' NA, whose comparison gives NA, which has no truth value)."""
    if value is None:
        return True
    try:
        return not bool(value == value)
    except TypeError:  # pandas.NA: "boolean value of NA is ambiguous"
        return True


def _missing_labels(arr: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(n,) flags of the missing entries of a 1-D label array and what they are (reprs)."""
    if arr.dtype.kind in "fc":
        flags = np.isnan(arr)
    elif arr.dtype.kind in "mM":
        flags = np.isnat(arr)
    elif arr.dtype.kind == "O":
        flags = np.fromiter((_is_missing(v) for v in arr), dtype=bool, count=arr.shape[0])
    else:
        flags = np.zeros(arr.shape[0], dtype=bool)
    return flags, [repr(v) for v in arr[flags].tolist()]


def check_labels(y, num_samples: int, *, name: str = "y") -> np.ndarray:
    """A 1-D label array of length ``num_samples`` with no missing or infinite values.

    Raises:
        ValueError: not 1-D, a length other than ``num_samples``, missing labels (None,
            NaN, NaT or pandas' NA, e.g. from a pandas column with gaps: each would
            otherwise become a class of its own, or make the labels unsortable), or
            infinite labels.
    """
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_samples,), got shape {arr.shape}")
    if arr.shape[0] != num_samples:
        raise ValueError(
            f"X and {name} disagree on the number of samples: {num_samples} versus {arr.shape[0]}"
        )
    flags, kinds = _missing_labels(arr)
    if flags.any():
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
        raise ValueError(
            f"{name} has {len(kinds)} missing label(s) ({counts}; first at index "
            f"{int(np.flatnonzero(flags)[0])}); drop those samples or give them a label"
        )
    if arr.dtype.kind in "fc" and np.isinf(arr).any():
        raise ValueError(f"{name} contains infinite labels "
                         f"({int(np.isinf(arr).sum())} of them)")
    return arr


def encode_labels(y) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique classes and integer codes 0..C-1, as scikit-learn's ``classes_``.

    Raises:
        ValueError: fewer than two classes, or labels of types that cannot be ordered
            together (e.g. strings mixed with numbers).
    """
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:
        kinds = sorted({type(v).__name__ for v in np.asarray(y, dtype=object).tolist()})
        raise ValueError(f"y mixes label types that cannot be sorted together ({kinds}); "
                         "give every label the same type") from None
    if classes.size < 2:
        raise ValueError(
            f"y has a single class ({classes.tolist()}); a classifier needs at least 2"
        )
    return classes, codes.astype(np.int64)


def check_integer_labels(y, num_samples: int, num_classes: int | None) -> tuple[np.ndarray, int]:
    """Integer labels in 0..C-1 for the driver, and C (taken from the labels if not given).

    When ``num_classes`` is not given it is the largest label + 1, and every class
    0..C-1 must then have a label: a class without one would silently get its own column of
    probabilities (labels {2, 5, 9} would give ten).

    Raises:
        ValueError: non-integer labels, negative labels, labels >= num_classes, or (with
            ``num_classes`` inferred) classes without labels.
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
        empty = np.setdiff1d(np.arange(num_classes), arr)
        if empty.size:
            raise ValueError(
                f"the labels leave class(es) {empty.tolist()[:10]} of 0..{num_classes - 1} "
                "without a training point; the driver takes labels 0..C-1, so encode them "
                "first (ppgpc.validation.encode_labels), or pass num_classes if the empty "
                "classes are intended"
            )
    else:
        num_classes = check_count("num_classes", num_classes)
    if arr.max() >= num_classes:
        raise ValueError(f"label {arr.max()} is out of range for num_classes={num_classes}")
    if num_classes < 2:
        raise ValueError("a classifier needs at least 2 classes")
    return arr.astype(np.int64), int(num_classes)


def check_size_limit(limit) -> int | None:
    """``max_exact_points``: None (no limit) or a positive integer."""
    if limit is None:
        return None
    return check_count("max_exact_points", limit)


def check_exact_size(num_samples: int, limit: int | None, model_name: str,
                     sparse_alternative: str | None = None) -> None:
    """Refuse exact inference above ``limit`` points, naming the memory it would need and
    what to do instead (``sparse_alternative``, a clause such as "use the sparse model:
    ...", from the model spec's ``sparse_alternative``)."""
    limit = check_size_limit(limit)
    if limit is not None and num_samples > limit:
        gib = 8 * num_samples**2 / 2**30
        instead = sparse_alternative or "use a sparse model or subsample the data"
        raise ValueError(
            f"{num_samples} training points is too many for exact inference with "
            f"{model_name} (each N x N matrix takes {gib:.1f} GiB and a fit costs O(N^3)); "
            f"the limit is {limit}. Instead, {instead}; or raise the limit with "
            "max_exact_points=..."
        )


def check_positive(name: str, value) -> float:
    """``value`` as a float, if it is a finite positive real number (not a bool); otherwise a
    ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and positive, got {value!r}")
    return float(value)


def check_nonnegative(name: str, value) -> float:
    """``value`` as a float, if it is a finite real number >= 0 (not a bool); otherwise a
    ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return float(value)


def check_count(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int, if it is an integer (not a bool) of at least ``minimum``;
    otherwise a ``ValueError`` naming ``name``. Integer-valued floats are refused too: a
    count of 2.5 is a mistake, not a request for 2."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(seed) -> int:
    """A non-negative integer seed (JAX's PRNG keys and NumPy's generators need one)."""
    return check_count("seed", seed, minimum=0)


def check_flag(name: str, value) -> bool:
    """``value`` if it is True or False (or a NumPy bool), else a ``ValueError`` naming
    ``name``: ``bool("no")`` is True, so truthiness would silently turn options on."""
    if value is True or value is False or isinstance(value, np.bool_):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def check_probability(name: str, value, alternatives: str = "", *,
                      kind: str = "a number") -> float:
    """``value`` as a float in the open interval (0, 1), else a ``ValueError`` naming
    ``name``, what it is (``kind``, e.g. "a level") and ``alternatives``, what else the
    setting accepts (e.g. "or 'auto'")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
        also = f" {alternatives}" if alternatives else ""
        raise ValueError(f"{name} must be {kind} in (0, 1){also}, got {value!r}")
    return float(value)


def _check_non_negative(name: str, value) -> int:
    return check_count(name, value, minimum=0)


def check_options(options: dict, *, counts=(), non_negative=(), positive=(), flags=(),
                  optional=()) -> dict:
    """A copy of ``options`` with the named entries checked and normalised, so a method's
    settings are refused at the entry point, before any JAX code (a negative ``num_draws``
    would otherwise end in a reshape error, a zero ``num_chains`` in a vmap error).

    Args:
        options: settings by name; every name below must be in it.
        counts: integers >= 1 (``check_count``).
        non_negative: integers >= 0 (e.g. ``num_warmup``).
        positive: finite positive numbers (``check_positive``, e.g. a learning rate).
        flags: True or False (``check_flag``).
        optional: names among the above for which None is accepted (and kept).

    Raises:
        ValueError: naming the first entry that is not what it should be.
    """
    out = dict(options)
    checks = ((counts, check_count), (non_negative, _check_non_negative),
              (positive, check_positive), (flags, check_flag))
    for names, check in checks:
        for name in names:
            if out[name] is None and name in optional:
                continue
            out[name] = check(name, out[name])
    return out

"""Helpers the estimators share: input scaling, the warnings of a fit, label checks and
the iteration count of a result. Pure functions; no estimator state."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from ppgpc.datasets import Standardizer

__all__ = ["fit_standardizer", "warn_of_collapsed_noise", "fitted_noise_scale",
           "is_fitted_attribute", "check_class_labels", "check_frame_columns",
           "warn_of_small_classes", "OUTLIER_SCORE", "COLLAPSED_NOISE_SCALE"]

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


def check_frame_columns(X, expected=None) -> None:
    """Errors that name the column, for a table (anything with ``columns`` and ``dtypes``,
    e.g. a pandas DataFrame) or an array or nested list of strings, before scikit-learn
    converts it to numbers.

    Args:
        X: the inputs; without ``columns`` and ``dtypes``, only its cells are checked
            (``_check_array_cells``).
        expected: the column names of fit (``feature_names_in_``), checked at prediction;
            None at fit or when fit had no names.

    Raises:
        ValueError: a column of strings, categories or other non-numbers (named, with a
            value and how to leave it out or encode it); at prediction, columns missing,
            unexpected or in another order (the expected order listed).
    """
    columns, dtypes = getattr(X, "columns", None), getattr(X, "dtypes", None)
    if columns is None or dtypes is None:
        _check_array_cells(X)
        return
    names = [str(c) for c in columns]
    if expected is not None:
        expected = [str(c) for c in expected]
        if names != expected:
            missing = [c for c in expected if c not in names]
            extra = [c for c in names if c not in expected]
            what = (f"lacks {missing}" if missing else f"has columns not seen in fit {extra}"
                    if extra else "has the columns in another order")
            raise ValueError(f"X {what}; the model was fitted on the columns {expected}, in "
                             "that order (select them as X[columns])")
    for i, (name, dtype) in enumerate(zip(names, dtypes)):
        if dtype.kind in "biuf":
            continue
        values = list(X.iloc[:, i])
        odd = next((v for v in values if not isinstance(v, numbers.Number)), None)
        if str(dtype) != "category" and dtype.kind == "O" and odd is None:
            continue  # Python numbers in an object column: scikit-learn converts them
        kind = "categories" if str(dtype) == "category" else (
            "strings" if isinstance(odd, str) else f"values of type {dtype}")
        shown = f" (e.g. {odd!r})" if odd is not None else ""
        raise ValueError(f"X's column {name!r} holds {kind}{shown}, not numbers; drop it "
                         f"(X.drop(columns=[{name!r}])) or encode it as numbers, e.g. one 0/1 "
                         "column per category (pandas.get_dummies)")


def _check_array_cells(X) -> None:
    """An array (or nested list) of strings or other objects: the first cell that is not a
    number, named by its column and row, before scikit-learn's conversion says only
    "could not convert string to float"."""
    if isinstance(X, np.ndarray) and X.dtype.kind in "biufc":
        return
    try:
        arr = np.asarray(X, dtype=object)
    except (TypeError, ValueError):
        return  # ragged: scikit-learn's own error names the shape
    if arr.ndim != 2:
        return
    try:
        arr.astype(np.float64)
    except (TypeError, ValueError):
        pass
    else:
        if isinstance(X, np.ndarray) and X.dtype.kind in "US":
            raise ValueError(f"X is an array of strings (dtype {X.dtype}) that read as "
                             "numbers; convert it first: X.astype(float)")
        return
    for j in range(arr.shape[1]):
        for i, value in enumerate(arr[:, j]):
            try:
                float(value)
                continue
            except (TypeError, ValueError):
                pass
            if not isinstance(value, (str, bytes)):
                return  # another object: scikit-learn's error names its type
            raise ValueError(f"X's column {j} holds a string ({value!r} in row {i}), not a "
                             "number; drop the column or encode it as numbers, e.g. one 0/1 "
                             "column per category")


def warn_of_small_classes(classes: np.ndarray, codes: np.ndarray) -> None:
    """Warn, naming them, of classes with fewer than two training rows: the fit has nothing
    to check their probabilities against (a split of a small table can make such a class,
    so it is not an error)."""
    counts = np.bincount(codes, minlength=len(classes))
    small = [(classes[i].item() if isinstance(classes[i], np.generic) else classes[i],
              int(counts[i])) for i in np.flatnonzero(counts < 2)]
    if small:
        listed = ", ".join(f"{label!r} ({count} row)" for label, count in small)
        warnings.warn(f"class(es) with a single training row: {listed}; their predicted "
                      "probabilities rest on that one point, and no held-out score checks "
                      "them", UserWarning, stacklevel=3)


def fit_standardizer(X: np.ndarray, standardize) -> Standardizer | None:
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


def warn_of_collapsed_noise(scale, names: np.ndarray, kind: str = "class(es)") -> None:
    """Warn when a learned noise scale (a float, or one per class for GPD or per ILR
    coordinate for Collapsed-ILR with per-coordinate inducing inputs: ``names`` names them,
    ``kind`` says what they are) fell below ``COLLAPSED_NOISE_SCALE``.

    Type-II maximum likelihood does this on exact GP regression of class labels without
    label noise: the smoothed labels are constant within a class, an interpolating GP fits
    them exactly, and the marginal likelihood keeps rising as the noise goes to zero, so the
    optimiser runs to the boundary. The fit then rests on the Cholesky jitter alone. MAP's
    LogNormal(0, 1) prior holds the scale off zero on small sets but not on larger ones
    (docs/records/defaults.md, "Collapsing noise"). Titsias's bound does not do this: its trace
    term grows as the noise shrinks.
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


def fitted_noise_scale(result):
    """The learned noise scale of a fit (its mean over draws under NUTS): a float for
    ILR-GP, a (C-1,) array for Collapsed-ILR with per-coordinate inducing inputs, a (C,)
    array for GPD; None when the model has no ``noise_scale`` site."""
    scale = result.hypers.get("noise_scale")
    if scale is None:
        return None
    value = np.asarray(scale).mean(axis=(0, 1))
    return float(value) if value.ndim == 0 else value


def is_fitted_attribute(name: str) -> bool:
    """scikit-learn's convention: fitted state is in attributes named ``something_``."""
    return name.endswith("_") and not name.startswith("_")


def check_class_labels(y: np.ndarray) -> None:
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

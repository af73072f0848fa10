"""Predictive metrics for probabilistic classifiers (docs/math.md section 7).

Every function takes class probabilities ``probs`` of shape ``(n, C)`` (each row on the
simplex) and integer labels ``y`` of shape ``(n,)`` with values in ``0..C-1``. NumPy and
JAX arrays are both accepted; results are Python floats or NumPy arrays.

Expected calibration error (ECE) comes in several flavours and the papers we reproduce
disagree on which one they report, so every ECE output names its kind:

* ``"binary"``: the score is ``p(y = 1 | x)`` and the observed frequency in a bin is the
  fraction of points with label 1 (docs/math.md section 7 for ``C == 2``; the ILR-GP paper).
* ``"top-label"``: the score is the confidence ``max_c p(c | x)`` and the observed
  frequency is the top-label accuracy (docs/math.md section 7 for ``C > 2``; Milios et al.).
* ``"classwise"``: the mean over classes ``c`` of the ECE of the one-vs-rest score
  ``p(c | x)`` against the indicator ``y == c`` (Kull et al. 2019; Galy-Fajou et al.).
* ``"auto"`` resolves to ``"binary"`` when ``C == 2`` and to ``"top-label"`` otherwise.

Binning convention (shared by :func:`ece` and :func:`reliability_table`): ``B``
equal-width bins ``[0, 1/B], (1/B, 2/B], ..., ((B-1)/B, 1]``, closed on the right. A score
``s`` goes to bin ``min(ceil(s * B) - 1, B - 1)`` clipped at 0, so ``s = 0`` falls in the
first bin and a score equal to an edge ``k / B`` falls in the bin below that edge. Edges
are the floats ``k / B``, so e.g. ``s = 0.3`` with ``B = 10`` lands in ``(0.2, 0.3]``
(no round-off surprises from computing ``0.3 * 10``). Empty bins contribute 0 to the ECE.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.metrics import evaluate
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    >>> y = np.array([0, 1, 1, 1])
    >>> evaluate(probs, y)["accuracy"]
    0.75
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ECE_KINDS", "ReliabilityTable", "accuracy", "brier", "ece", "evaluate", "nll",
           "reliability_table", "table_ece"]

ECE_KINDS: tuple[str, ...] = ("auto", "binary", "top-label", "classwise")
"""Accepted values of the ``kind`` argument of :func:`ece` and :func:`reliability_table`."""

_ROW_SUM_TOL = 1e-6


class ReliabilityTable(NamedTuple):
    """Per-bin summary behind an ECE value and a reliability diagram.

    All array fields have shape ``(n_bins,)``. For the table ``t`` of ``n`` points,
    ``ece == sum(t.count / n * abs(t.accuracy - t.confidence))`` over the non-empty bins.
    """

    bin_lower: np.ndarray
    """Lower bin edges ``k / B`` for ``k = 0..B-1`` (excluded, except 0 for the first bin)."""
    bin_upper: np.ndarray
    """Upper bin edges ``(k + 1) / B`` (included)."""
    count: np.ndarray
    """Number of scores falling in each bin (int)."""
    confidence: np.ndarray
    """Mean score in each bin; NaN for empty bins."""
    accuracy: np.ndarray
    """Observed frequency of the event in each bin (label 1, correct top label, or
    ``y == c``, depending on ``kind``); NaN for empty bins."""
    kind: str
    """Resolved ECE kind: ``"binary"``, ``"top-label"`` or ``"classwise"``."""


# --------------------------------------------------------------------------- validation


def _validate(probs: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Convert inputs to NumPy and check them.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``, values in ``0..C-1``.

    Returns:
        ``(probs, y)`` as float64 ``(n, C)`` and int64 ``(n,)`` NumPy arrays.

    Raises:
        ValueError: On wrong shapes, non-finite or negative probabilities, rows not
            summing to 1 within 1e-6, or non-integer / out-of-range labels.
    """
    p = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(y)
    if p.ndim != 2:
        raise ValueError(f"probs must have shape (n, C); got shape {p.shape}.")
    n, n_classes = p.shape
    if n == 0:
        raise ValueError("probs is empty: need at least one point.")
    if n_classes < 2:
        raise ValueError(f"probs must have at least 2 classes (columns); got shape {p.shape}.")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"y must have shape (n,) = ({n},) to match probs of shape {p.shape}; "
                         f"got shape {labels.shape}.")
    _check_rows(p)
    return p, _check_labels(labels, n_classes)


def _check_rows(p: np.ndarray) -> None:
    """Every row of ``p`` (n, C) finite, non-negative and summing to 1 within
    ``_ROW_SUM_TOL``."""
    n = p.shape[0]
    for rows, what in ((~np.isfinite(p).all(axis=1), "NaN or inf"),
                       ((p < 0).any(axis=1), "negative entries")):
        if rows.any():
            raise ValueError(f"probs contains {what} in {int(rows.sum())} of {n} rows "
                             f"(first at row {int(np.argmax(rows))}).")
    row_err = np.abs(p.sum(axis=1) - 1.0)
    off_rows = row_err > _ROW_SUM_TOL
    if off_rows.any():
        raise ValueError(
            f"rows of probs must sum to 1 within {_ROW_SUM_TOL:g}; {int(off_rows.sum())} of "
            f"{n} rows do not (worst |sum - 1| = {row_err.max():.3g} at row "
            f"{int(np.argmax(row_err))}).")


def _check_labels(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """``labels`` (n,) as int64 after checking them: integers (or whole floats, not
    bools) in ``0..C-1``."""
    n = labels.shape[0]
    floating = np.issubdtype(labels.dtype, np.floating)
    if labels.dtype == bool or not (np.issubdtype(labels.dtype, np.integer) or floating):
        raise ValueError(f"y must hold integer class labels; got dtype {labels.dtype}.")
    if floating:
        non_integral = ~np.isfinite(labels) | (labels != np.round(labels))
        if non_integral.any():
            raise ValueError(f"y must hold integer class labels; {int(non_integral.sum())} of "
                             f"{n} entries are not whole numbers.")
    labels = labels.astype(np.int64)
    out_of_range = (labels < 0) | (labels >= n_classes)
    if out_of_range.any():
        raise ValueError(
            f"labels must lie in 0..{n_classes - 1} for C = {n_classes} classes; "
            f"{int(out_of_range.sum())} of {n} labels do not "
            f"(e.g. {int(labels[np.argmax(out_of_range)])}).")
    return labels


def _resolve_kind(kind: str, n_classes: int) -> str:
    """Map ``kind`` (one of :data:`ECE_KINDS`) to a concrete kind for ``C`` classes."""
    if kind not in ECE_KINDS:
        raise ValueError(f"kind must be one of {ECE_KINDS}; got {kind!r}.")
    if kind == "auto":
        return "binary" if n_classes == 2 else "top-label"
    if kind == "binary" and n_classes != 2:
        raise ValueError(f"kind='binary' needs C == 2 classes; probs has C = {n_classes}.")
    return kind


def _check_n_bins(n_bins: int) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer; got {n_bins!r}.")
    return int(n_bins)


# ------------------------------------------------------------------------ point metrics


def accuracy(probs: ArrayLike, y: ArrayLike) -> float:
    """Fraction of points whose most probable class is the true label.

    Ties between classes go to the lowest class index (``argmax`` convention).

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.

    Returns:
        Accuracy in ``[0, 1]``.
    """
    p, labels = _validate(probs, y)
    return float(np.mean(np.argmax(p, axis=1) == labels))


def nll(probs: ArrayLike, y: ArrayLike) -> float:
    """Mean negative log predictive probability of the true label.

    ``NLL = -(1/n) sum_i log p_i[y_i]``. Probabilities are not clipped: if some point
    gives its true class probability exactly 0, the NLL is ``+inf`` (the model is
    infinitely surprised), which is the honest value of a log score.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.

    Returns:
        NLL in ``[0, inf]`` (nats).
    """
    p, labels = _validate(probs, y)
    p_true = p[np.arange(p.shape[0]), labels]  # (n,)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(p_true)))


def brier(probs: ArrayLike, y: ArrayLike) -> float:
    """Multi-class Brier score.

    ``Brier = (1/n) sum_i sum_c (p_ic - 1[y_i = c])^2``, in ``[0, 2]``.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.

    Returns:
        Brier score.
    """
    p, labels = _validate(probs, y)
    onehot = np.eye(p.shape[1])[labels]  # (n, C)
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


# ---------------------------------------------------------------------------- binning


def _bin_edges(n_bins: int) -> np.ndarray:
    """Edges ``k / B`` for ``k = 0..B``, shape ``(B + 1,)``."""
    return np.arange(n_bins + 1) / n_bins


def _bin_index(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin of each score under the right-closed convention, shape ``(m,)``.

    Equals ``clip(ceil(s * B) - 1, 0, B - 1)`` in exact arithmetic; computed by comparing
    with the float edges ``k / B`` so that a score equal to an edge goes to the lower bin.
    """
    interior = _bin_edges(n_bins)[1:-1]  # (B - 1,)
    return np.searchsorted(interior, scores, side="left")


def _binned_table(
    scores: np.ndarray, hits: np.ndarray, n_bins: int, kind: str
) -> ReliabilityTable:
    """Reliability table of ``scores`` (m,) in [0, 1] against 0/1 outcomes ``hits`` (m,)."""
    idx = _bin_index(scores, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    score_sum = np.bincount(idx, weights=scores, minlength=n_bins)
    hit_sum = np.bincount(idx, weights=hits.astype(np.float64), minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.where(count > 0, score_sum / count, np.nan)
        observed = np.where(count > 0, hit_sum / count, np.nan)
    edges = _bin_edges(n_bins)
    return ReliabilityTable(edges[:-1], edges[1:], count, confidence, observed, kind)


def table_ece(table: ReliabilityTable) -> float:
    """``sum_b |B_b|/n |acc_b - conf_b|`` over the non-empty bins of ``table``."""
    filled = table.count > 0
    weights = table.count[filled] / table.count.sum()
    return float(np.sum(weights * np.abs(table.accuracy[filled] - table.confidence[filled])))


def _scores_and_hits(p: np.ndarray, labels: np.ndarray, kind: str, class_index: int):
    """Score (n,) and 0/1 outcome (n,) for a concrete, non-``auto`` kind."""
    if kind == "binary":
        return p[:, 1], labels == 1
    if kind == "top-label":
        return p.max(axis=1), np.argmax(p, axis=1) == labels
    return p[:, class_index], labels == class_index  # classwise, one-vs-rest


# ------------------------------------------------------------------------ calibration


def reliability_table(
    probs: ArrayLike,
    y: ArrayLike,
    n_bins: int = 10,
    kind: str = "auto",
    *,
    class_index: int | None = None,
) -> ReliabilityTable:
    """Per-bin confidence, observed frequency and count; the same binning as :func:`ece`.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.
        n_bins: Number ``B`` of equal-width bins on ``[0, 1]``.
        kind: ``"auto"``, ``"binary"``, ``"top-label"`` or ``"classwise"`` (see the
            module docstring). ``"classwise"`` needs ``class_index`` and gives the
            one-vs-rest table of that class; the class-wise ECE is the mean over classes
            of the ECE of these tables.
        class_index: Class ``c`` for ``kind="classwise"``; must be ``None`` otherwise.

    Returns:
        A :class:`ReliabilityTable` with ``(n_bins,)`` fields and the resolved kind.

    Raises:
        ValueError: On invalid inputs, an unknown kind, ``kind="binary"`` with
            ``C != 2``, or a missing / unexpected ``class_index``.

    Example:
        >>> import numpy as np
        >>> t = reliability_table(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 1]),
        ...                       n_bins=2)
        >>> t.count.tolist(), t.confidence.tolist()
        ([1, 1], [0.2, 0.7])
    """
    p, labels = _validate(probs, y)
    n_bins = _check_n_bins(n_bins)
    resolved = _resolve_kind(kind, p.shape[1])
    if resolved == "classwise":
        if class_index is None or not 0 <= int(class_index) < p.shape[1]:
            raise ValueError(
                f"kind='classwise' needs class_index in 0..{p.shape[1] - 1}; "
                f"got {class_index!r}."
            )
        class_index = int(class_index)
    elif class_index is not None:
        raise ValueError(f"class_index is only used with kind='classwise'; kind={kind!r}.")
    scores, hits = _scores_and_hits(p, labels, resolved, class_index)
    return _binned_table(scores, hits, n_bins, resolved)


def ece(probs: ArrayLike, y: ArrayLike, n_bins: int = 10, kind: str = "auto") -> float:
    """Expected calibration error with ``B`` equal-width bins.

    ``ECE = sum_b |B_b| / n * |acc(B_b) - conf(B_b)|``, where ``conf`` is the mean score
    and ``acc`` the observed frequency in bin ``b``; for ``kind="classwise"`` it is the
    mean over classes of the one-vs-rest ECE. The kind and the right-closed binning
    convention are described in the module docstring.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.
        n_bins: Number ``B`` of bins.
        kind: ``"auto"`` (binary for ``C == 2``, top-label otherwise), ``"binary"``,
            ``"top-label"`` or ``"classwise"``.

    Returns:
        ECE in ``[0, 1]``.

    Raises:
        ValueError: On invalid inputs, an unknown kind or ``kind="binary"`` with
            ``C != 2``.

    Example:
        >>> import numpy as np
        >>> ece(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 1]), n_bins=2)
        0.25
    """
    p, labels = _validate(probs, y)
    if _resolve_kind(kind, p.shape[1]) == "classwise":
        per_class = [
            table_ece(reliability_table(p, labels, n_bins, "classwise", class_index=c))
            for c in range(p.shape[1])
        ]
        return float(np.mean(per_class))
    return table_ece(reliability_table(p, labels, n_bins, kind))


def evaluate(probs: ArrayLike, y: ArrayLike, n_bins: int = 10) -> dict[str, float | str]:
    """All metrics of docs/math.md section 7 in one dictionary.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.
        n_bins: Number of ECE bins.

    Returns:
        ``{"accuracy", "nll", "brier", "ece", "ece_kind", "classwise_ece"}`` where
        ``ece`` uses ``kind="auto"`` and ``ece_kind`` names the kind it resolved to
        (``"binary"`` or ``"top-label"``).
    """
    p, labels = _validate(probs, y)
    return {
        "accuracy": accuracy(p, labels),
        "nll": nll(p, labels),
        "brier": brier(p, labels),
        "ece": ece(p, labels, n_bins, "auto"),
        "ece_kind": _resolve_kind("auto", p.shape[1]),
        "classwise_ece": ece(p, labels, n_bins, "classwise"),
    }

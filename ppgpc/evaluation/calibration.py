"""Calibration tests with p-values, and reliability bins with consistency bands.

A classifier is calibrated when ``P(y = c | p(x) = p) = p_c`` for every class: among the
points given probabilities ``p``, the labels are distributed as ``p``. ``ppgpc.evaluation.metrics``
measures the gap with binned ECEs; this module asks whether the gap is more than chance.

Squared kernel calibration error (Widmann, Lindsten and Zachariah 2019, "Calibration tests
in multi-class classification: a unifying framework"). With ``e_y`` the one-hot vector of
label ``y`` and the matrix-valued kernel ``k(p, p') = kappa(p, p') I_C``,
``kappa(p, p') = exp(-||p - p'|| / nu)`` (Euclidean norm), the SKCE is

    SKCE = E[(e_Y - P)^T k(P, P') (e_Y' - P')],

zero for a calibrated model and positive otherwise (the kernel is characteristic). Writing
``h_ij = kappa(p_i, p_j) (e_{y_i} - p_i)^T (e_{y_j} - p_j)``, the estimators are

* quadratic (unbiased U-statistic): ``SKCE_uq = (n choose 2)^{-1} sum_{i < j} h_ij``,
  ``O(n^2 C)`` time and ``O(n^2)`` memory;
* linear: ``SKCE_ul = (1 / m) sum_{i=1..m} h_{2i-1, 2i}``, ``m = floor(n / 2)``, ``O(n C)``.

Both have mean exactly 0 under calibration, since ``E[e_y - p | p] = 0`` and distinct points
are independent; they can be negative. The bandwidth ``nu`` is by default the median of
``||p_i - p_j||`` over the pairs the estimator averages (the median heuristic that Widmann
et al. use: all pairs for the quadratic estimator, the disjoint pairs for the linear one,
which keeps it linear in n); it depends on the probabilities only, never on the labels,
which the resampling test needs.

P-values. ``method="resample"`` (consistency resampling, Broecker and Smith 2007): under
calibration ``y_i ~ Categorical(p_i)``, so the statistic is recomputed on ``B`` label
vectors drawn that way (the probabilities, and so the kernel, held fixed) and
``p = (1 + #{T*_b >= T}) / (B + 1)``, a valid p-value for any n and B
(``P(p <= a) <= a`` under calibration; ties in the statistic only make it conservative).
``method="asymptotic"`` (the linear estimator only; Widmann et al.'s Lemma 3):
``sqrt(m) SKCE_ul / sd(h)`` is asymptotically standard normal under calibration, and
``p = 1 - Phi(z)``.

Reliability bands. :func:`reliability_bands` bins the scores of ``ppgpc.evaluation.metrics``'s ECE
kinds (binary p(y = 1), top-label confidence, or one class's one-vs-rest probability) in
equal-mass bins: the points sorted by score are cut into ``B`` groups whose sizes differ by
at most one, with ``B`` lowered until every bin holds at least ``min_count`` points, so no
bin's frequency rests on one point. Under calibration the event of each score (label 1,
top label correct, label c) is Bernoulli(score), so drawing the events that way ``B``
times gives each bin's null distribution of observed frequencies; its central ``level``
interval is the consistency band (Broecker and Smith 2007, with the forecasts held fixed),
and the observed frequency's place in that distribution is the bin's two-sided p-value.
:func:`confidence_ppc` bins the same way and returns the same :class:`BandedBins` type.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.calibration import skce_test
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet(np.ones(3), size=200)
    >>> y = (rng.uniform(size=(200, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    >>> result = skce_test(p, y, n_resamples=200, seed=1)
    >>> bool(0 < result.p_value <= 1)
    True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.distance import pdist
from scipy.special import ndtr

from ppgpc.evaluation.metrics import _resolve_kind, _scores_and_hits, _validate
from ppgpc.validation import check_count, check_positive, check_probability, check_seed

__all__ = ["SKCE_ESTIMATORS", "SKCETest", "BandedBins", "ReliabilityBands", "median_bandwidth",
           "skce", "skce_test", "reliability_bands", "ConfidencePPC", "confidence_ppc"]

SKCE_ESTIMATORS: tuple[str, ...] = ("quadratic", "linear")
"""Accepted values of ``estimator``."""

_CHUNK = 64  # resampled label vectors handled together in the quadratic test


class SKCETest(NamedTuple):
    """The result of :func:`skce_test`."""

    statistic: float
    """The SKCE estimate on the observed labels."""
    p_value: float
    """P-value of the null hypothesis "the probabilities are calibrated"."""
    bandwidth: float
    """Kernel bandwidth nu used."""
    estimator: str
    """``"quadratic"`` or ``"linear"``."""
    method: str
    """``"resample"`` or ``"asymptotic"``."""
    n_resamples: int
    """Label vectors drawn under calibration (0 for the asymptotic test)."""


class BandedBins(NamedTuple):
    """Equal-mass bins of a score, each with its observed event frequency and the band that
    frequency should fall in: the central ``level`` interval of the frequencies in ``R``
    replications. Per-bin fields are ``(B,)`` arrays.

    :func:`reliability_bands` (as ``ReliabilityBands``) replicates the events under
    calibration; :func:`confidence_ppc` (as ``ConfidencePPC``) replicates the labels from
    the posterior predictive."""

    score_lower: np.ndarray
    """Smallest score in each bin."""
    score_upper: np.ndarray
    """Largest score in each bin."""
    count: np.ndarray
    """Points in each bin (int, each at least ``min_count`` when n allows)."""
    confidence: np.ndarray
    """Mean score in each bin."""
    accuracy: np.ndarray
    """Observed frequency of the event in each bin (label 1, top label correct, label c)."""
    band_lower: np.ndarray
    """Lower end of the band, the ``(1 - level) / 2`` quantile of ``replicated``."""
    band_upper: np.ndarray
    """Upper end of the band, the ``(1 + level) / 2`` quantile of ``replicated``."""
    level: float
    """Probability of the band under the replications' distribution."""
    replicated: np.ndarray
    """(R, B) frequency of the event in each bin in each of R replications."""
    p_value: np.ndarray
    """Two-sided p-value of each bin's observed frequency against ``replicated``,
    ``min(1, 2 min(P(T_rep <= T), P(T_rep >= T)))``."""
    kind: str
    """The score binned: ``"binary"``, ``"top-label"`` or ``"classwise"``."""


ReliabilityBands = BandedBins
"""The result of :func:`reliability_bands`: a :class:`BandedBins` whose replications are
event vectors drawn under calibration (R = ``n_resamples``), so its bands are consistency
bands."""

ConfidencePPC = BandedBins
"""The result of :func:`confidence_ppc`: a :class:`BandedBins` of kind ``"top-label"``
whose replications are the S replicated label vectors (the event: the label equals the
predicted one), so its bands and p-values are a posterior predictive check."""


def _check_estimator(estimator: str) -> str:
    if estimator not in SKCE_ESTIMATORS:
        raise ValueError(f"estimator must be one of {SKCE_ESTIMATORS}; got {estimator!r}")
    return estimator


def median_bandwidth(probs: ArrayLike, estimator: str = "quadratic") -> float:
    """Median of the Euclidean distances ``||p_i - p_j||`` over the pairs the estimator
    averages: all pairs ``i < j`` (quadratic), or the disjoint pairs ``(2i - 1, 2i)``
    (linear, which keeps its cost linear in n).

    Args:
        probs: (n, C) probabilities, n >= 2.
        estimator: ``"quadratic"`` or ``"linear"``.

    Raises:
        ValueError: fewer than two points, or a median of 0 (more than half of those pairs
            of rows are identical): pass a bandwidth instead.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] < 2:
        raise ValueError(f"the median bandwidth needs probs of shape (n >= 2, C); got {p.shape}")
    if _check_estimator(estimator) == "linear":
        m = p.shape[0] // 2
        distances = np.linalg.norm(p[0:2 * m:2] - p[1:2 * m:2], axis=1)
    else:
        distances = pdist(p)
    nu = float(np.median(distances))
    if nu <= 0:
        raise ValueError("the median distance between probability vectors is 0 (most rows "
                         "are identical); pass bandwidth=... explicitly")
    return nu


def _bandwidth(p: np.ndarray, bandwidth, estimator: str) -> float:
    if bandwidth is None:
        return median_bandwidth(p, estimator)
    return check_positive("bandwidth", bandwidth)


def _residuals(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(n, C) ``e_{y_i} - p_i``."""
    e = -p.copy()
    e[np.arange(p.shape[0]), labels] += 1.0
    return e


def _quadratic(K: np.ndarray, E: np.ndarray) -> np.ndarray:
    """``SKCE_uq`` for residuals E (..., n, C) and the (n, n) kernel K with unit diagonal:
    ``(sum_{i != j} K_ij E_i . E_j) / (n (n - 1))``."""
    n = K.shape[0]
    total = np.einsum("...ic,...ic->...", E, K @ E)
    return (total - np.einsum("...ic,...ic->...", E, E)) / (n * (n - 1))


def _linear_terms(p: np.ndarray, E: np.ndarray, nu: float) -> np.ndarray:
    """(..., m) ``h_{2i-1, 2i}`` for residuals E (..., n, C), m = floor(n / 2)."""
    m = p.shape[0] // 2
    kappa = np.exp(-np.linalg.norm(p[0:2 * m:2] - p[1:2 * m:2], axis=1) / nu)  # (m,)
    return kappa * np.einsum("...ic,...ic->...i", E[..., 0:2 * m:2, :], E[..., 1:2 * m:2, :])


def _kernel_matrix(p: np.ndarray, nu: float) -> np.ndarray:
    """(n, n) ``exp(-||p_i - p_j|| / nu)``."""
    sq = np.sum(p**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * p @ p.T, 0.0)
    K = np.exp(-np.sqrt(d2) / nu)
    np.fill_diagonal(K, 1.0)
    return K


def skce(probs: ArrayLike, y: ArrayLike, *, estimator: str = "quadratic",
         bandwidth: float | None = None) -> float:
    """Unbiased estimate of the squared kernel calibration error (module docstring).

    Args:
        probs: (n, C) probabilities; y: (n,) labels 0..C-1 (n >= 2).
        estimator: ``"quadratic"`` (U-statistic over all pairs) or ``"linear"`` (disjoint
            consecutive pairs).
        bandwidth: kernel bandwidth nu > 0; ``None`` for the median heuristic.

    Returns:
        The estimate (mean 0 under calibration; may be negative).
    """
    p, labels = _validate(probs, y)
    estimator = _check_estimator(estimator)
    if p.shape[0] < 2:
        raise ValueError(f"the SKCE needs at least 2 points; got {p.shape[0]}")
    nu = _bandwidth(p, bandwidth, estimator)
    E = _residuals(p, labels)
    if estimator == "linear":
        return float(_linear_terms(p, E, nu).mean())
    return float(_quadratic(_kernel_matrix(p, nu), E))


def _resampled_residuals(p: np.ndarray, rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, n, C) ``e_{y*} - p`` with ``y*_i ~ Categorical(p_i)`` independently."""
    cdf = np.cumsum(p, axis=1)
    labels = (rng.uniform(size=(count, p.shape[0], 1)) > cdf[None, :, :-1]).sum(axis=2)
    return np.eye(p.shape[1])[labels] - p[None]


def skce_test(probs: ArrayLike, y: ArrayLike, *, estimator: str = "quadratic",
              method: str = "resample", n_resamples: int = 1000,
              bandwidth: float | None = None, seed: int = 0) -> SKCETest:
    """Test "the probabilities are calibrated" with the SKCE (module docstring).

    Args:
        probs: (n, C) probabilities; y: (n,) labels 0..C-1.
        estimator: ``"quadratic"`` or ``"linear"``.
        method: ``"resample"`` (consistency resampling, any estimator) or
            ``"asymptotic"`` (normal limit of the linear estimator).
        n_resamples: label vectors B drawn under calibration (``"resample"``).
        bandwidth: nu > 0, or ``None`` for the median heuristic.
        seed: root seed of the resampling generator.

    Returns:
        An :class:`SKCETest`. Cost of ``"resample"``: ``O(B n^2 C)`` for the quadratic
        estimator, ``O(B n C)`` for the linear one.

    Raises:
        ValueError: bad inputs, an unknown estimator or method, or ``"asymptotic"`` with
            the quadratic estimator (whose null limit is not normal).
    """
    p, labels = _validate(probs, y)
    estimator = _check_estimator(estimator)
    if method not in ("resample", "asymptotic"):
        raise ValueError(f"method must be 'resample' or 'asymptotic'; got {method!r}")
    if method == "asymptotic" and estimator != "linear":
        raise ValueError("method='asymptotic' is the normal test of the linear estimator; "
                         "use estimator='linear', or method='resample'")
    n = p.shape[0]
    if n < (4 if estimator == "linear" else 2):
        raise ValueError(f"too few points for the SKCE test: n = {n}")
    nu = _bandwidth(p, bandwidth, estimator)
    E = _residuals(p, labels)
    if method == "asymptotic":
        h = _linear_terms(p, E, nu)
        sd = h.std(ddof=1)
        if sd == 0:
            raise ValueError("the linear SKCE terms are all equal, so the normal test is "
                             "undefined; use method='resample'")
        statistic = float(h.mean())
        z = np.sqrt(h.size) * statistic / sd
        return SKCETest(statistic, float(1.0 - ndtr(z)), nu, estimator, method, 0)

    B = check_count("n_resamples", n_resamples)
    rng = np.random.default_rng(check_seed(seed))
    if estimator == "linear":
        statistic = float(_linear_terms(p, E, nu).mean())
        null = _linear_terms(p, _resampled_residuals(p, rng, B), nu).mean(axis=-1)
    else:
        K = _kernel_matrix(p, nu)
        statistic = float(_quadratic(K, E))
        null = np.concatenate([
            _quadratic(K, _resampled_residuals(p, rng, min(_CHUNK, B - start)))
            for start in range(0, B, _CHUNK)])
    p_value = (1.0 + np.sum(null >= statistic)) / (B + 1.0)
    return SKCETest(statistic, float(p_value), nu, estimator, method, B)


# ------------------------------------------------------------------ reliability bands
def _equal_mass_bins(scores: np.ndarray, n_bins: int, min_count: int) -> np.ndarray:
    """(n,) bin index 0..B-1: points sorted by score (ties by position) cut into
    ``B = max(1, min(n_bins, n // min_count))`` groups of sizes differing by at most one."""
    n = scores.shape[0]
    B = max(1, min(n_bins, n // min_count))
    order = np.argsort(scores, kind="stable")
    index = np.empty(n, dtype=np.int64)
    index[order] = (np.arange(n) * B) // n
    return index


def _banded_bins(scores: np.ndarray, hits: np.ndarray, replicated_hits: np.ndarray,
                 n_bins: int, min_count: int, level: float, kind: str) -> BandedBins:
    """Equal-mass bins of ``scores`` (at most ``n_bins``, each of at least ``min_count``
    points when n allows), each bin's observed event frequency ``T_b = mean_{i in b} hits_i``
    and its frequencies ``T_b^(r)`` in the replications, their central ``level`` band
    (inverted-CDF quantiles) and two-sided p-values.

    Args:
        scores: (n,) the score binned; hits: (n,) the observed 0/1 events.
        replicated_hits: (R, n) the 0/1 events of R replications.
    """
    index = _equal_mass_bins(scores, n_bins, min_count)
    nb = int(index.max()) + 1
    member = np.eye(nb)[index]                                          # (n, B) bin indicator
    count = np.bincount(index, minlength=nb)
    confidence = scores @ member / count
    accuracy = hits.astype(np.float64) @ member / count
    replicated = replicated_hits.astype(np.float64) @ member / count    # (R, B)
    lower = np.quantile(replicated, (1.0 - level) / 2.0, axis=0, method="inverted_cdf")
    upper = np.quantile(replicated, (1.0 + level) / 2.0, axis=0, method="inverted_cdf")
    below = np.mean(replicated <= accuracy, axis=0)
    above = np.mean(replicated >= accuracy, axis=0)
    p_value = np.minimum(1.0, 2.0 * np.minimum(below, above))
    score_lower = np.array([scores[index == b].min() for b in range(nb)])
    score_upper = np.array([scores[index == b].max() for b in range(nb)])
    return BandedBins(score_lower, score_upper, count, confidence, accuracy, lower, upper,
                      level, replicated, p_value, kind)


def reliability_bands(probs: ArrayLike, y: ArrayLike, *, n_bins: int = 10,
                      kind: str = "auto", class_index: int | None = None,
                      min_count: int = 10, level: float = 0.95, n_resamples: int = 1000,
                      seed: int = 0) -> ReliabilityBands:
    """Equal-mass reliability bins with Broecker-Smith consistency bands.

    Args:
        probs: (n, C) probabilities; y: (n,) labels 0..C-1.
        n_bins: the most bins B.
        kind: ``"auto"``, ``"binary"``, ``"top-label"`` or ``"classwise"`` (with
            ``class_index``), as in ``ppgpc.evaluation.metrics.reliability_table``.
        class_index: the class c of ``kind="classwise"``.
        min_count: the fewest points per bin; B is lowered to ``n // min_count`` if needed
            (one bin of all n points when n < min_count).
        level: probability of each bin's band under calibration, in (0, 1).
        n_resamples: event vectors drawn under calibration.
        seed: root seed of the resampling generator.

    Returns:
        A :class:`ReliabilityBands` (``replicated``: the (n_resamples, B) resampled
        frequencies). The band of a bin is ``[Q((1 - level) / 2), Q((1 + level) / 2)]`` of
        the resampled frequencies, with ``Q`` the inverted-CDF quantile, so an observed
        frequency falls outside it with probability at most ``1 - level`` under
        calibration (up to resampling error); likewise ``P(p_value <= a) <= a``.
    """
    p, labels = _validate(probs, y)
    n_bins, min_count, level = _band_settings(n_bins, min_count, level)
    B = check_count("n_resamples", n_resamples)
    resolved = _resolve_kind(kind, p.shape[1])
    if resolved == "classwise":
        if (isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer))
                or not 0 <= class_index < p.shape[1]):
            raise ValueError(f"kind='classwise' needs class_index in 0..{p.shape[1] - 1}; "
                             f"got {class_index!r}")
        class_index = int(class_index)
    elif class_index is not None:
        raise ValueError(f"class_index is only used with kind='classwise'; kind={kind!r}")
    scores, hits = _scores_and_hits(p, labels, resolved, class_index)
    rng = np.random.default_rng(check_seed(seed))
    null_hits = rng.uniform(size=(B, scores.shape[0])) < scores         # events ~ Bernoulli(score)
    return _banded_bins(scores, hits, null_hits, n_bins, min_count, level, resolved)


def confidence_ppc(probs: ArrayLike, y: ArrayLike, y_rep: ArrayLike, *, n_bins: int = 10,
                   min_count: int = 10, level: float = 0.95) -> ConfidencePPC:
    """Posterior predictive check of the predicted labels' accuracy, bin by confidence.

    The points are cut into equal-mass bins of their top-label confidence
    ``max_c probs_ic`` (as :func:`reliability_bands`). In bin b the test statistic is the
    fraction of points whose label equals the predicted one, ``yhat_i = argmax_c probs_ic``:

        T_b(y) = (1 / n_b) sum_{i in b} 1[y_i = yhat_i].

    Each of the S replicated label vectors ``y_rep^(s)`` (one per posterior draw, drawn from
    the posterior predictive p(y_rep | f^(s))) gives ``T_b(y_rep^(s))``; the band is the
    central ``level`` interval of those, and the observed ``T_b(y)`` falls outside it when
    the model's confidence does not match how often its labels are right. Unlike class
    frequencies, which any model with a class intercept reproduces, this fails for an
    over- or under-confident model. The predictions and bins are held fixed across
    replications, so the band also carries the posterior's uncertainty in p, not only
    the Bernoulli noise of a consistency band.

    Args:
        probs: (n, C) predictive probabilities (e.g. the posterior mean) defining yhat and
            the confidences.
        y: (n,) observed labels 0..C-1.
        y_rep: (S, n) replicated labels 0..C-1 (any leading shape is flattened to S, e.g.
            (chain, draw, n)).
        n_bins: the most bins B; min_count: the fewest points per bin (as
            :func:`reliability_bands`).
        level: probability of each band under the model, in (0, 1).

    Returns:
        A :class:`ConfidencePPC` (``replicated``: the (S, B) fractions ``T_b(y_rep^(s))``).

    Raises:
        ValueError: bad probabilities or labels, a ``y_rep`` whose last axis is not n or
            whose values are not labels 0..C-1, or bad ``n_bins``/``min_count``/``level``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> p = rng.dirichlet(np.ones(3), size=100)
        >>> draw = lambda: (rng.uniform(size=(100, 1)) > np.cumsum(p, axis=1)[:, :-1]).sum(1)
        >>> ppc = confidence_ppc(p, draw(), np.stack([draw() for _ in range(200)]))
        >>> ppc.replicated.shape[0]
        200
    """
    p, labels = _validate(probs, y)
    rep = _replicated_labels(y_rep, p.shape)
    n_bins, min_count, level = _band_settings(n_bins, min_count, level)
    scores, hits = _scores_and_hits(p, labels, "top-label", None)
    return _banded_bins(scores, hits, rep == np.argmax(p, axis=1), n_bins, min_count, level,
                        "top-label")


def _replicated_labels(y_rep: ArrayLike, shape: tuple) -> np.ndarray:
    """``y_rep`` (..., n) as (S, n) integer labels in 0..C-1, for ``probs`` of ``shape``
    (n, C)."""
    n, C = shape
    rep = np.asarray(y_rep)
    if rep.ndim < 2 or rep.shape[-1] != n:
        raise ValueError(f"y_rep must have shape (S, n) = (S, {n}) (or (chain, draw, n)) to "
                         f"match probs of shape {shape}; got shape {rep.shape}")
    rep = rep.reshape(-1, n)
    if not np.issubdtype(rep.dtype, np.integer) or rep.min() < 0 or rep.max() >= C:
        raise ValueError(f"y_rep must hold integer labels in 0..{C - 1}")
    return rep


def _band_settings(n_bins, min_count, level) -> tuple[int, int, float]:
    """The checked bin settings of the reliability bands: counts and a level in (0, 1)."""
    return (check_count("n_bins", n_bins), check_count("min_count", min_count),
            check_probability("level", level, kind="a probability"))

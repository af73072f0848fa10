"""Tests of ppgpc.evaluation.calibration: the SKCE against its definition and its exact conditional
mean, uniform p-values under calibration (Kolmogorov-Smirnov), power against a
miscalibrated source, and the consistency bands' null coverage and width.

Data calibrated by construction: p ~ Dirichlet, y ~ Categorical(p). Miscalibrated: the
labels come from q ~ Dirichlet but the reported probabilities are q^T renormalised
(T > 1 overconfident, T < 1 underconfident).
"""

import numpy as np
import pytest
from scipy import stats

from ppgpc.evaluation.calibration import (
    BandedBins,
    ConfidencePPC,
    ReliabilityBands,
    confidence_ppc,
    SKCETest,
    median_bandwidth,
    reliability_bands,
    skce,
    skce_test,
)

Z = 4.0  # standard errors allowed for a Monte Carlo mean
KS_LEVEL = 0.01  # the Kolmogorov-Smirnov test of uniform p-values rejects below this


def _categorical(rng, q):
    return (rng.uniform(size=(q.shape[0], 1)) > np.cumsum(q, axis=1)[:, :-1]).sum(axis=1)


def _draw(seed, n, C=4, temper=1.0):
    """(reported probabilities (n, C), labels (n,)); calibrated when temper == 1."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(C), size=n)
    y = _categorical(rng, q)
    p = q**temper
    return p / p.sum(axis=1, keepdims=True), y


# ------------------------------------------------------------------ the estimators
def test_skce_matches_the_definition_pair_by_pair():
    p, y = _draw(seed=1, n=13, C=3, temper=2.0)
    nu = 0.3
    e = np.eye(3)[y] - p
    kernel = [[np.exp(-np.linalg.norm(p[i] - p[j]) / nu) * np.eye(3) for j in range(13)]
              for i in range(13)]
    pairs = [e[i] @ kernel[i][j] @ e[j] for i in range(13) for j in range(i + 1, 13)]
    assert skce(p, y, bandwidth=nu) == pytest.approx(np.mean(pairs), rel=1e-12)
    linear = [e[i] @ kernel[i][i + 1] @ e[i + 1] for i in range(0, 12, 2)]  # 6 pairs, 13th out
    assert skce(p, y, estimator="linear", bandwidth=nu) == pytest.approx(np.mean(linear),
                                                                         rel=1e-12)


def test_median_bandwidth_is_the_median_pairwise_distance():
    p, _ = _draw(seed=2, n=9)
    distances = [np.linalg.norm(p[i] - p[j]) for i in range(9) for j in range(i + 1, 9)]
    assert median_bandwidth(p) == pytest.approx(np.median(distances), rel=1e-12)
    p, y = _draw(seed=3, n=50)
    assert skce(p, y) == skce(p, y, bandwidth=median_bandwidth(p))
    consecutive = [np.linalg.norm(p[i] - p[i + 1]) for i in range(0, 50, 2)]
    assert median_bandwidth(p, "linear") == pytest.approx(np.median(consecutive), rel=1e-12)
    assert skce(p, y, estimator="linear") == skce(p, y, estimator="linear",
                                                  bandwidth=np.median(consecutive))
    with pytest.raises(ValueError, match="pass bandwidth"):
        median_bandwidth(np.tile([[0.2, 0.8]], (5, 1)))


@pytest.mark.parametrize("estimator", ["quadratic", "linear"])
def test_skce_is_unbiased_given_the_probabilities(estimator):
    # With the probabilities p_i fixed and y_i ~ q_i, E[h_ij | p] = kappa_ij (q_i - p_i).(q_j
    # - p_j), so the estimator's mean is the same average of these exact terms: 0 when
    # q = p, positive otherwise.
    rng = np.random.default_rng(4)
    n, draws = 200, 3000
    q = rng.dirichlet(np.ones(3), size=n)
    p_miscal = q**2 / (q**2).sum(axis=1, keepdims=True)
    for p in (q, p_miscal):
        nu = median_bandwidth(p, estimator)
        kappa = np.exp(-np.linalg.norm(p[:, None] - p[None], axis=2) / nu)
        d = q - p
        terms = kappa * (d @ d.T)
        if estimator == "quadratic":
            exact = (terms.sum() - np.trace(terms)) / (n * (n - 1))
        else:
            exact = np.mean([terms[i, i + 1] for i in range(0, n, 2)])
        values = np.array([skce(p, _categorical(rng, q), estimator=estimator, bandwidth=nu)
                           for _ in range(draws)])
        se = values.std(ddof=1) / np.sqrt(draws)
        assert abs(values.mean() - exact) < Z * se, (values.mean(), exact, se)
        if p is p_miscal:
            assert exact > Z * se  # the miscalibration is visible at this precision


# ------------------------------------------------------------------ p-values
@pytest.mark.parametrize("estimator, method, n", [("quadratic", "resample", 100),
                                                  ("linear", "resample", 100),
                                                  ("linear", "asymptotic", 300)])
def test_p_values_are_uniform_under_calibration(estimator, method, n):
    # Resampled p-values live on the grid 1/(B + 1), ..., 1, which moves the KS distance by
    # at most 1/(B + 1) = 0.005, far below its 1% critical value 0.115 for 200 p-values.
    p_values = [skce_test(*_draw(seed, n), estimator=estimator, method=method,
                          n_resamples=199, seed=seed).p_value for seed in range(200)]
    assert stats.kstest(p_values, "uniform").pvalue > KS_LEVEL


@pytest.mark.parametrize("estimator, method, n, temper", [
    ("quadratic", "resample", 300, 2.5),
    ("quadratic", "resample", 500, 0.4),
    ("linear", "asymptotic", 20000, 2.5),
])
def test_a_miscalibrated_source_is_rejected(estimator, method, n, temper):
    # underconfidence is harder to see than overconfidence, hence the larger n; the linear
    # estimator's variance is far larger (its power is known to be low), hence its n of
    # 20000: there sqrt(m) SKCE / sd(h) is about 3.5
    rejected = [skce_test(*_draw(100 + seed, n, temper=temper), estimator=estimator,
                          method=method, n_resamples=199, seed=seed).p_value < 0.05
                for seed in range(40)]
    assert np.mean(rejected) >= 0.8


def test_test_result_fields_and_seeding():
    p, y = _draw(seed=5, n=80, temper=1.5)
    a = skce_test(p, y, n_resamples=99, seed=3)
    assert isinstance(a, SKCETest)
    assert a.statistic == skce(p, y) and a.bandwidth == median_bandwidth(p)
    assert (a.estimator, a.method, a.n_resamples) == ("quadratic", "resample", 99)
    assert a == skce_test(p, y, n_resamples=99, seed=3)
    assert (a.p_value * 100) % 1 == pytest.approx(0.0, abs=1e-9)  # (1 + count) / (B + 1)


def test_bad_settings_are_named():
    p, y = _draw(seed=6, n=20)
    with pytest.raises(ValueError, match="normal test of the linear estimator"):
        skce_test(p, y, method="asymptotic")
    with pytest.raises(ValueError, match="estimator must be one of"):
        skce(p, y, estimator="cubic")
    with pytest.raises(ValueError, match="method must be"):
        skce_test(p, y, method="bootstrap")
    with pytest.raises(ValueError, match="bandwidth must be"):
        skce(p, y, bandwidth=-1.0)
    with pytest.raises(ValueError, match="labels must lie in 0..3"):
        skce(p, np.full(20, 4))


# ------------------------------------------------------------------ reliability bands
def test_equal_mass_bins_keep_a_minimum_count():
    p, y = _draw(seed=7, n=95)
    bands = reliability_bands(p, y, n_bins=20, min_count=10, n_resamples=50)
    assert isinstance(bands, ReliabilityBands) and bands.kind == "top-label"
    assert bands.count.size == 9 and bands.count.sum() == 95  # 95 // 10 bins
    assert bands.count.min() >= 10 and bands.count.max() - bands.count.min() <= 1
    assert np.all(bands.score_upper[:-1] <= bands.score_lower[1:])  # sorted, disjoint
    scores = p.max(axis=1)
    order = np.argsort(scores, kind="stable")
    first = order[: bands.count[0]]
    assert bands.confidence[0] == pytest.approx(scores[first].mean())
    assert bands.accuracy[0] == pytest.approx(np.mean(p[first].argmax(1) == y[first]))
    few = reliability_bands(p[:7], y[:7], min_count=10, n_resamples=50)
    assert few.count.tolist() == [7]  # one bin when n < min_count


def test_bands_hold_the_observed_frequency_under_calibration():
    # The band is the (2.5%, 97.5%) inverted-CDF range of the exact null distribution of the
    # bin frequency (given the scores), so a bin falls outside with probability <= 5%.
    # Likewise each two-sided p-value is at most uniformly small: P(p <= 0.05) <= 0.05.
    outside, total, small_p = 0, 0, 0
    for seed in range(60):
        p, y = _draw(200 + seed, n=500)
        bands = reliability_bands(p, y, n_bins=10, n_resamples=2000, seed=seed)
        outside += np.sum((bands.accuracy < bands.band_lower)
                          | (bands.accuracy > bands.band_upper))
        small_p += np.sum(bands.p_value <= 0.05)
        total += bands.count.size
    bound = 0.05 + Z * np.sqrt(0.05 * 0.95 / total)
    assert outside / total <= bound and small_p / total <= bound, (outside, small_p, total)


def test_band_width_matches_the_binomial_sum_and_flags_miscalibration():
    p, y = _draw(seed=8, n=2000, C=3, temper=2.0)
    bands = reliability_bands(p, y, kind="classwise", class_index=1, n_bins=10,
                              n_resamples=4000, seed=1)
    score = p[:, 1]
    order = np.argsort(score, kind="stable")
    bins = np.array_split(order, 10)  # sizes 200 each: 2000 // 10
    sd = np.array([np.sqrt(np.sum(score[b] * (1 - score[b]))) / b.size for b in bins])
    # the band is the null's central 95%: about +-1.96 sd around the mean score (the sum of
    # 200 Bernoullis is near normal); 15% allows for its skew and the 1/200 grid
    np.testing.assert_allclose(bands.band_upper - bands.band_lower, 2 * 1.96 * sd, rtol=0.15)
    np.testing.assert_allclose((bands.band_upper + bands.band_lower) / 2,
                               bands.confidence, atol=0.3 * sd.max() + 1 / 200)
    # overconfident probabilities put most bins outside their bands, with small p-values
    out = (bands.accuracy < bands.band_lower) | (bands.accuracy > bands.band_upper)
    assert out.sum() >= 6 and np.all(bands.p_value[out] < 0.05)
    # the resampled frequencies: one row per resample, mean the bin's mean score up to
    # Monte Carlo error (each is a mean of Bernoulli(score) events)
    assert bands.replicated.shape == (4000, 10)
    np.testing.assert_array_less(np.abs(bands.replicated.mean(0) - bands.confidence),
                                 Z * sd / np.sqrt(4000))


def test_band_settings_are_checked():
    p, y = _draw(seed=9, n=40)
    with pytest.raises(ValueError, match="class_index in 0..3"):
        reliability_bands(p, y, kind="classwise")
    with pytest.raises(ValueError, match="level must be a probability in \\(0, 1\\)"):
        reliability_bands(p, y, level=1.0)
    with pytest.raises(ValueError, match="min_count must be an integer >= 1"):
        reliability_bands(p, y, min_count=0)


# ------------------------------------------------------------------ confidence-bin PPC


def _replicates(rng, q, S):
    """(S, n) labels drawn from the rows of q."""
    return np.stack([_categorical(rng, q) for _ in range(S)])


def test_confidence_ppc_holds_the_observed_accuracy_when_the_model_is_right():
    # labels and replicates from the same probabilities: each bin's observed accuracy is
    # one more draw of the replicated one, so it falls outside the central 95% with
    # probability <= 5% (inverted-CDF quantiles of 1000 replicates), and the two-sided
    # p-values are at most about uniformly small
    outside, total, small_p = 0, 0, 0
    for seed in range(40):
        rng = np.random.default_rng(400 + seed)
        q = rng.dirichlet(np.ones(3), size=300)
        ppc = confidence_ppc(q, _categorical(rng, q), _replicates(rng, q, 1000))
        outside += np.sum((ppc.accuracy < ppc.band_lower) | (ppc.accuracy > ppc.band_upper))
        small_p += np.sum(ppc.p_value <= 0.05)
        total += ppc.count.size
    bound = 0.05 + Z * np.sqrt(0.05 * 0.95 / total)
    assert outside / total <= bound and small_p / total <= bound, (outside, small_p, total)


def test_confidence_ppc_fails_an_overconfident_model():
    # the labels come from q, the model's probabilities and replicates from q sharpened
    # (temper 3): the predicted label is right less often than the model's replicates say
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.ones(3), size=1000)
    y = _categorical(rng, q)
    sharp = q**3 / np.sum(q**3, axis=1, keepdims=True)
    ppc = confidence_ppc(sharp, y, _replicates(rng, sharp, 1000).reshape(2, 500, 1000))
    assert isinstance(ppc, ConfidencePPC) and ppc.replicated.shape == (1000, 10)
    assert ConfidencePPC is ReliabilityBands is BandedBins  # one banded-bins type
    assert np.all(ppc.count == 100) and ppc.kind == "top-label"
    below = ppc.accuracy < ppc.band_lower
    assert below.sum() >= 7 and np.all(ppc.p_value[below] < 0.05)
    # the replicated accuracy is the mean confidence of the bin, up to Monte Carlo error
    sd = np.sqrt(ppc.confidence * (1 - ppc.confidence) / 100 / 1000)
    assert np.all(np.abs(ppc.replicated.mean(0) - ppc.confidence) < Z * sd + 1e-12)


def test_confidence_ppc_checks_its_inputs():
    p, y = _draw(seed=9, n=40, C=3)
    good = np.zeros((5, 40), dtype=int)
    with pytest.raises(ValueError, match=r"y_rep must have shape \(S, n\) = \(S, 40\)"):
        confidence_ppc(p, y, good[:, :30])
    with pytest.raises(ValueError, match="y_rep must hold integer labels in 0..2"):
        confidence_ppc(p, y, good + 3)
    with pytest.raises(ValueError, match="y_rep must hold integer labels"):
        confidence_ppc(p, y, good.astype(float))
    with pytest.raises(ValueError, match="level must be a probability"):
        confidence_ppc(p, y, good, level=0.0)

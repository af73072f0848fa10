"""Tests of ppgpc.evaluation.conformal: scores by hand, coverage over many random calibration/test
splits against the split-conformal guarantee, class-conditional coverage, clear errors.

Coverage. For exchangeable calibration and test points with continuous scores, a test label
is covered exactly when its score ranks among the k = ceil((n + 1)(1 - alpha)) smallest of
the n + 1 scores, so the expected coverage is k / (n + 1), which lies in
[1 - alpha, 1 - alpha + 1 / (n + 1)]. Random splits of one fixed pool are exchangeable given
the pool, so the mean coverage over R splits estimates k / (n + 1) with the standard error
sd(split coverages) / sqrt(R); the tests allow 4 standard errors.
"""

import math

import numpy as np
import pytest

from ppgpc.evaluation.conformal import (
    ConformalCalibration,
    ConformalClassifier,
    PredictionSets,
    calibrate,
    class_scores,
    conformal_quantile,
    coverage,
    predict_sets,
)

Z = 4.0  # standard errors allowed for a Monte Carlo mean (two-sided p ~ 6e-5)


def _categorical(rng, q):
    """One label per row of the (n, C) probabilities q."""
    return (rng.uniform(size=(q.shape[0], 1)) > np.cumsum(q, axis=1)).sum(axis=1)


def _pool(seed, n=600, C=5, sharpen=2.0):
    """Dirichlet truths q, labels y ~ q, and reported probabilities p = q^sharpen
    (renormalised): miscalibrated on purpose, since conformal validity must not need
    calibration."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(C, 0.7), size=n)
    y = _categorical(rng, q)
    p = q**sharpen
    return p / p.sum(axis=1, keepdims=True), y


def _split_coverages(p, y, alpha, n_cal, repeats, seed, **kw):
    """Coverage (marginal and per class) and the class counts over random splits."""
    rng = np.random.default_rng(seed)
    C = p.shape[1]
    marginal, per_class, class_counts, sizes = [], [], [], []
    for _ in range(repeats):
        perm = rng.permutation(len(y))
        cal, test = perm[:n_cal], perm[n_cal:]
        calib = calibrate(p[cal], y[cal], alpha, rng=rng, **kw)
        result = predict_sets(calib, p[test], rng=rng)
        marginal.append(coverage(result.sets, y[test]))
        per_class.append(coverage(result.sets, y[test], per_class=True))
        class_counts.append(np.bincount(y[cal], minlength=C))
        sizes.append(result.size.mean())
    return (np.array(marginal), np.array(per_class), np.array(class_counts),
            np.array(sizes))


def _expected(n, alpha):
    """k / (n + 1), the exact expected coverage with n continuous calibration scores."""
    return math.ceil((n + 1) * (1 - alpha) - 1e-9) / (n + 1)


# ------------------------------------------------------------------ scores by hand
P3 = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])


def test_lac_aps_and_raps_scores_by_hand():
    np.testing.assert_allclose(class_scores(P3, "lac"), 1 - P3)
    # point 0: ranks 0, 1, 2 -> mass above 0, 0.5, 0.8; point 1: ranks 1, 0, 2 ->
    # label 1 has 0 above, label 2 has 0.6, label 0 has 0.9.
    u = np.array([0.5, 0.25])
    expected_aps = np.array([[0.0 + 0.25, 0.5 + 0.15, 0.8 + 0.1],
                             [0.9 + 0.025, 0.0 + 0.15, 0.6 + 0.075]])
    np.testing.assert_allclose(class_scores(P3, "aps", u=u), expected_aps)
    # u = None is the deterministic score: the mass up to and including the label
    np.testing.assert_allclose(class_scores(P3, "aps"), [[0.5, 0.8, 1.0], [1.0, 0.6, 0.9]])
    # RAPS adds penalty * max(0, rank - k_reg): ranks (1, 2, 3) and (3, 1, 2)
    raps = class_scores(P3, "raps", u=u, penalty=0.2, k_reg=2)
    np.testing.assert_allclose(raps, expected_aps + 0.2 * np.array([[0, 0, 1], [1, 0, 0]]))
    np.testing.assert_allclose(class_scores(P3, "raps", u=u, penalty=0.0), expected_aps)


def test_ties_are_ranked_by_class_index():
    p = np.array([[0.4, 0.4, 0.2]])
    np.testing.assert_allclose(class_scores(p, "aps"), [[0.4, 0.8, 1.0]])


def test_conformal_quantile_is_the_kth_smallest():
    scores = np.arange(1.0, 20.0)  # n = 19: k = ceil(20 * 0.9) = 18
    assert conformal_quantile(scores[::-1], 0.1) == 18.0
    assert conformal_quantile(np.arange(1.0, 10.0), 0.1) == 9.0  # n = 9: k = 9, the largest
    assert conformal_quantile([0.3], 0.5) == 0.3  # n = 1, alpha = 1/2: k = 1


def test_sets_follow_the_threshold_and_sizes_count_them():
    calib = calibrate(P3, [0, 2], alpha=0.5, score="lac")  # n = 2: k = 2 -> max(0.5, 0.7)
    np.testing.assert_allclose(calib.threshold, [0.7, 0.7, 0.7])
    assert calib.randomized is False and calib.n_calibration.tolist() == [2, 2, 2]
    result = predict_sets(calib, P3)
    assert isinstance(result, PredictionSets)
    np.testing.assert_array_equal(result.sets, [[True, True, False], [False, True, True]])
    np.testing.assert_array_equal(result.size, [2, 2])


# ------------------------------------------------------------------ coverage
@pytest.mark.parametrize("score, randomized", [("lac", False), ("aps", True),
                                               ("aps", False), ("raps", True)])
def test_marginal_coverage_over_random_splits(score, randomized):
    alpha, n_cal, repeats = 0.1, 200, 1500
    p, y = _pool(seed=11)
    cov, _, _, _ = _split_coverages(p, y, alpha, n_cal, repeats, seed=12, score=score,
                                    randomized=randomized)
    mean, se = cov.mean(), cov.std(ddof=1) / np.sqrt(repeats)
    assert mean >= 1 - alpha - Z * se
    assert mean <= 1 - alpha + 1 / (n_cal + 1) + Z * se
    assert abs(mean - _expected(n_cal, alpha)) <= Z * se, (mean, se)


def test_class_conditional_coverage_per_class_over_random_splits():
    alpha, n_cal, repeats = 0.2, 150, 600
    p, y = _pool(seed=21, C=4)
    _, per_class, counts, _ = _split_coverages(p, y, alpha, n_cal, repeats, seed=22,
                                               score="aps", class_conditional=True)
    assert not np.isnan(per_class).any()
    k = np.ceil((counts + 1) * (1 - alpha) - 1e-9)
    expected = k / (counts + 1)              # exact, given each split's class counts
    upper = 1 - alpha + 1 / (counts + 1)
    for c in range(p.shape[1]):
        se = per_class[:, c].std(ddof=1) / np.sqrt(repeats)
        diff = per_class[:, c] - expected[:, c]
        assert per_class[:, c].mean() >= 1 - alpha - Z * se, c
        assert per_class[:, c].mean() <= upper[:, c].mean() + Z * se, c
        assert abs(diff.mean()) <= Z * diff.std(ddof=1) / np.sqrt(repeats), c


def test_marginal_sets_can_miss_a_class_that_mondrian_sets_cover():
    # The model gives class 0 a tenth of the mass its truth has: marginal LAC sets cover
    # class 0 far below 1 - alpha, class-conditional ones keep it.
    alpha, n_cal, repeats = 0.1, 300, 300
    rng = np.random.default_rng(31)
    q = rng.dirichlet(np.ones(3), size=900)
    y = _categorical(rng, q)
    p = q * np.array([0.1, 1.0, 1.0])
    p /= p.sum(axis=1, keepdims=True)
    _, marginal, _, _ = _split_coverages(p, y, alpha, n_cal, repeats, seed=32, score="lac")
    _, mondrian, _, _ = _split_coverages(p, y, alpha, n_cal, repeats, seed=32, score="lac",
                                         class_conditional=True)
    se = marginal[:, 0].std(ddof=1) / np.sqrt(repeats)
    assert marginal[:, 0].mean() < 1 - alpha - 10 * se
    assert mondrian[:, 0].mean() >= 1 - alpha - Z * mondrian[:, 0].std(ddof=1) / np.sqrt(
        repeats)


def test_randomised_aps_gives_smaller_sets_than_deterministic():
    alpha, n_cal, repeats = 0.1, 200, 100
    p, y = _pool(seed=41)
    *_, size_random = _split_coverages(p, y, alpha, n_cal, repeats, seed=42, score="aps")
    *_, size_fixed = _split_coverages(p, y, alpha, n_cal, repeats, seed=42, score="aps",
                                      randomized=False)
    diff = size_fixed - size_random
    assert diff.mean() > Z * diff.std(ddof=1) / np.sqrt(repeats)


# ------------------------------------------------------------------ seeds and randomness
def test_same_seed_same_sets_and_rng_is_required():
    p, y = _pool(seed=51, n=200)
    a = predict_sets(calibrate(p[:100], y[:100], 0.1, rng=7), p[100:], rng=8)
    b = predict_sets(calibrate(p[:100], y[:100], 0.1, rng=np.random.default_rng(7)),
                     p[100:], rng=np.random.default_rng(8))
    np.testing.assert_array_equal(a.sets, b.sets)
    with pytest.raises(ValueError, match="randomized scores need rng"):
        calibrate(p[:100], y[:100], 0.1, score="raps")
    calib = calibrate(p[:100], y[:100], 0.1, score="raps", rng=1)
    with pytest.raises(ValueError, match="randomized scores need rng"):
        predict_sets(calib, p[100:])
    # LAC and deterministic APS need no generator
    assert isinstance(calibrate(p[:100], y[:100], 0.1, score="lac"), ConformalCalibration)
    predict_sets(calibrate(p[:100], y[:100], 0.1, randomized=False), p[100:])


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, True, "0.1"])
def test_alpha_outside_the_unit_interval_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha must be a miscoverage level in \\(0, 1\\)"):
        calibrate(P3, [0, 1], alpha, score="lac")


def test_too_few_calibration_points_say_how_many_are_needed():
    p, y = _pool(seed=61, n=8)
    with pytest.raises(ValueError, match="alpha = 0.1 needs at least 9.*n = 8"):
        calibrate(p, y, 0.1, score="lac")
    calibrate(np.vstack([p, p[:1]]), np.append(y, y[0]), 0.1, score="lac")  # 9 is enough
    p, y = _pool(seed=62, n=60, C=3)
    y = np.where(np.arange(60) < 3, 2, y % 2)  # class 2 has 3 points
    with pytest.raises(ValueError, match="class 2 \\(3 points\\)"):
        calibrate(p, y, 0.1, score="lac", class_conditional=True)


def test_bad_labels_scores_and_shapes_are_named():
    with pytest.raises(ValueError, match="labels must lie in 0..2"):
        calibrate(P3, [0, 3], 0.5, score="lac")
    with pytest.raises(ValueError, match="score must be one of"):
        calibrate(P3, [0, 1], 0.5, score="softmax")
    with pytest.raises(ValueError, match="rows of probs must sum to 1"):
        calibrate(P3 * 2, [0, 1], 0.5, score="lac")
    calib = calibrate(P3, [0, 1], 0.5, score="lac")
    with pytest.raises(ValueError, match="probs has 2 classes but the calibration has 3"):
        predict_sets(calib, np.array([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="penalty must be finite and >= 0"):
        calibrate(P3, [0, 1], 0.5, score="raps", penalty=-1.0, rng=0)


# ------------------------------------------------------------------ estimator wrapper
class _FixedClassifier:
    """A fitted 'estimator': probabilities are stored rows indexed by X[:, 0]."""

    def __init__(self, probs, classes):
        self.probs, self.classes_ = probs, np.asarray(classes)

    def predict_proba(self, X):
        return self.probs[np.asarray(X)[:, 0].astype(int)]


def test_classifier_wrapper_matches_the_functions_and_names_unknown_labels():
    p, y = _pool(seed=71, n=300, C=3)
    names = np.array(["cat", "cow", "dog"])
    est = _FixedClassifier(p, names)
    X = np.arange(300)[:, None]
    conf = ConformalClassifier(est, alpha=0.2, score="raps", seed=5)
    conf.calibrate(X[:150], names[y[:150]])
    result = conf.predict_sets(X[150:])
    # the same streams as the wrapper's: SeedSequence(5).spawn(2)
    s_cal, s_pred = np.random.SeedSequence(5).spawn(2)
    calib = calibrate(p[:150], y[:150], 0.2, score="raps", rng=np.random.default_rng(s_cal))
    direct = predict_sets(calib, p[150:], rng=np.random.default_rng(s_pred))
    np.testing.assert_array_equal(result.sets, direct.sets)
    np.testing.assert_array_equal(conf.predict_sets(X[150:]).sets, result.sets)  # repeatable
    assert conf.coverage(X[150:], names[y[150:]]) == coverage(direct.sets, y[150:])
    with pytest.raises(ValueError, match="label\\(s\\) \\['horse'\\] not among"):
        conf.calibrate(X[:3], ["cat", "horse", "dog"])
    with pytest.raises(ValueError, match="has no classes_: fit it first"):
        ConformalClassifier(type("Unfitted", (), {"predict_proba": lambda s, X: X})())
    with pytest.raises(ValueError, match="call calibrate"):
        ConformalClassifier(est).predict_sets(X)


def test_conformal_sets_around_a_ppgpc_estimator():
    from conftest import toy_problem

    from ppgpc import ILRGPClassifier

    X, y = toy_problem(n=150, num_classes=3, seed=3)
    labels = np.array(["a", "b", "c"])[y]
    clf = ILRGPClassifier(epsilon=0.1, tau=0.1).fit(X[:60], labels[:60])
    conf = ConformalClassifier(clf, alpha=0.2, score="lac").calibrate(X[60:105], labels[60:105])
    result = conf.predict_sets(X[105:])
    # LAC by hand from the estimator's probabilities: 45 points, k = ceil(46 * 0.8) = 37
    p_cal, p_test = clf.predict_proba(X[60:105]), clf.predict_proba(X[105:])
    threshold = np.sort(1 - p_cal[np.arange(45), y[60:105]])[36]
    np.testing.assert_array_equal(result.sets, 1 - p_test <= threshold)
    np.testing.assert_array_equal(result.size, result.sets.sum(axis=1))

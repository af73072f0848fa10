"""Tests of ppgpc.evaluation.metrics against values worked out by hand on tiny examples."""

import math
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from ppgpc.evaluation.metrics import (
    ReliabilityTable,
    accuracy,
    brier,
    ece,
    evaluate,
    nll,
    reliability_table,
)

# Binary example: p(y=1) = 0.2, 0.4, 0.7, 0.9 with labels 1, 0, 1, 1.
BIN_P1 = np.array([0.2, 0.4, 0.7, 0.9])
BIN_PROBS = np.stack([1.0 - BIN_P1, BIN_P1], axis=1)
BIN_Y = np.array([1, 0, 1, 1])

# Three-class example.
TRI_PROBS = np.array([[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4]])
TRI_Y = np.array([0, 1, 1])


# ------------------------------------------------------------------ hand-computed values


def test_binary_ece_four_points_two_bins():
    # Bins (0, 0.5] and (0.5, 1] on the score p(y=1):
    #   bin 0: scores 0.2, 0.4 -> conf 0.3; labels 1, 0 -> frequency 0.5; gap 0.2
    #   bin 1: scores 0.7, 0.9 -> conf 0.8; labels 1, 1 -> frequency 1.0; gap 0.2
    # ECE = 2/4 * 0.2 + 2/4 * 0.2 = 0.2
    assert ece(BIN_PROBS, BIN_Y, n_bins=2, kind="binary") == pytest.approx(0.2)
    assert ece(BIN_PROBS, BIN_Y, n_bins=2) == pytest.approx(0.2)  # auto -> binary

    table = reliability_table(BIN_PROBS, BIN_Y, n_bins=2)
    assert isinstance(table, ReliabilityTable)
    assert table.kind == "binary"
    np.testing.assert_array_equal(table.count, [2, 2])
    np.testing.assert_allclose(table.bin_lower, [0.0, 0.5])
    np.testing.assert_allclose(table.bin_upper, [0.5, 1.0])
    np.testing.assert_allclose(table.confidence, [0.3, 0.8])
    np.testing.assert_allclose(table.accuracy, [0.5, 1.0])


def test_binary_and_top_label_ece_differ():
    # Top-label on the same data: confidences max(p) = 0.8, 0.6, 0.7, 0.9, all in
    # (0.5, 1] with mean 3.0 / 4 = 0.75; predictions 0, 0, 1, 1 against labels
    # 1, 0, 1, 1 -> correct F, T, T, T -> accuracy 0.75; ECE = |0.75 - 0.75| = 0,
    # whereas the binary ECE is 0.2 (previous test).
    assert ece(BIN_PROBS, BIN_Y, n_bins=2, kind="top-label") == pytest.approx(0.0, abs=1e-12)
    table = reliability_table(BIN_PROBS, BIN_Y, n_bins=2, kind="top-label")
    assert table.kind == "top-label"
    np.testing.assert_array_equal(table.count, [0, 4])
    assert np.isnan(table.confidence[0]) and np.isnan(table.accuracy[0])
    assert table.confidence[1] == pytest.approx(0.75)
    assert table.accuracy[1] == pytest.approx(0.75)


def test_binary_ece_ten_bins_scores_on_edges_go_to_lower_bin():
    # Scores 0.2, 0.4, 0.7, 0.9 sit on edges, so they land in (0.1, 0.2], (0.3, 0.4],
    # (0.6, 0.7], (0.8, 0.9]: bins 1, 3, 6, 8, one point each.
    # Gaps |0.2 - 1| = 0.8, |0.4 - 0| = 0.4, |0.7 - 1| = 0.3, |0.9 - 1| = 0.1;
    # ECE = (0.8 + 0.4 + 0.3 + 0.1) / 4 = 0.4
    table = reliability_table(BIN_PROBS, BIN_Y, n_bins=10)
    np.testing.assert_array_equal(table.count, [0, 1, 0, 1, 0, 0, 1, 0, 1, 0])
    assert ece(BIN_PROBS, BIN_Y, n_bins=10) == pytest.approx(0.4)


def test_bin_convention_zero_first_bin_one_last_bin():
    # p(y=1) = 0, 0.5, 0.5, 1 with 2 bins: 0 -> first bin, 0.5 -> (0, 0.5], 1 -> (0.5, 1].
    p1 = np.array([0.0, 0.5, 0.5, 1.0])
    table = reliability_table(np.stack([1 - p1, p1], axis=1), np.array([0, 1, 0, 1]), n_bins=2)
    np.testing.assert_array_equal(table.count, [3, 1])


def test_three_class_metrics_by_hand():
    # accuracy: predictions 0, 1, 2 against labels 0, 1, 1 -> 2/3
    assert accuracy(TRI_PROBS, TRI_Y) == pytest.approx(2 / 3)
    # NLL: p(true) = 0.6, 0.7, 0.3 -> -(log 0.6 + log 0.7 + log 0.3) / 3 = -log(0.126) / 3
    assert nll(TRI_PROBS, TRI_Y) == pytest.approx(-math.log(0.126) / 3)
    # Brier: row 0: 0.4^2 + 0.3^2 + 0.1^2 = 0.16 + 0.09 + 0.01 = 0.26
    #        row 1: 0.2^2 + 0.3^2 + 0.1^2 = 0.04 + 0.09 + 0.01 = 0.14
    #        row 2: 0.3^2 + 0.7^2 + 0.4^2 = 0.09 + 0.49 + 0.16 = 0.74
    #        mean = 1.14 / 3 = 0.38
    assert brier(TRI_PROBS, TRI_Y) == pytest.approx(0.38)


def test_top_label_ece_three_classes():
    # Confidences 0.6, 0.7, 0.4; correct T, T, F.
    #   bin (0, 0.5]: 0.4 -> acc 0, gap 0.4, weight 1/3
    #   bin (0.5, 1]: 0.6, 0.7 -> conf 0.65, acc 1, gap 0.35, weight 2/3
    # ECE = 0.4 / 3 + 0.7 / 3 = 1.1 / 3
    assert ece(TRI_PROBS, TRI_Y, n_bins=2) == pytest.approx(1.1 / 3)  # auto -> top-label
    assert ece(TRI_PROBS, TRI_Y, n_bins=2, kind="top-label") == pytest.approx(1.1 / 3)


def test_classwise_ece_three_classes():
    # Class 0: scores 0.6, 0.2, 0.3 vs indicator 1, 0, 0
    #   (0, 0.5]: 0.2, 0.3 -> conf 0.25, freq 0, gap 0.25, weight 2/3
    #   (0.5, 1]: 0.6      -> conf 0.6,  freq 1, gap 0.4,  weight 1/3
    #   ECE_0 = 0.5/3 + 0.4/3 = 0.9/3
    # Class 1: scores 0.3, 0.7, 0.3 vs indicator 0, 1, 1
    #   (0, 0.5]: 0.3, 0.3 -> conf 0.3, freq 1/2, gap 0.2, weight 2/3
    #   (0.5, 1]: 0.7      -> conf 0.7, freq 1,   gap 0.3, weight 1/3
    #   ECE_1 = 0.4/3 + 0.3/3 = 0.7/3
    # Class 2: scores 0.1, 0.1, 0.4 vs indicator 0, 0, 0
    #   (0, 0.5]: all -> conf 0.2, freq 0, gap 0.2 -> ECE_2 = 0.6/3
    # classwise ECE = (0.9 + 0.7 + 0.6) / 9 = 2.2 / 9
    assert ece(TRI_PROBS, TRI_Y, n_bins=2, kind="classwise") == pytest.approx(2.2 / 9)
    t1 = reliability_table(TRI_PROBS, TRI_Y, n_bins=2, kind="classwise", class_index=1)
    assert t1.kind == "classwise"
    np.testing.assert_array_equal(t1.count, [2, 1])
    np.testing.assert_allclose(t1.confidence, [0.3, 0.7])
    np.testing.assert_allclose(t1.accuracy, [0.5, 1.0])


def test_evaluate_names_the_ece_kind():
    out = evaluate(TRI_PROBS, TRI_Y, n_bins=2)
    assert set(out) == {"accuracy", "nll", "brier", "ece", "ece_kind", "classwise_ece"}
    assert out["ece_kind"] == "top-label"
    assert out["ece"] == pytest.approx(1.1 / 3)
    assert out["classwise_ece"] == pytest.approx(2.2 / 9)
    assert evaluate(BIN_PROBS, BIN_Y, n_bins=2)["ece_kind"] == "binary"
    assert all(isinstance(out[k], float) for k in out if k != "ece_kind")


# ------------------------------------------------------------------- limiting cases


def test_perfect_predictions():
    y = np.array([0, 2, 1, 2, 0])
    probs = np.eye(3)[y]
    assert accuracy(probs, y) == 1.0
    assert nll(probs, y) == 0.0
    assert brier(probs, y) == 0.0
    for kind in ("auto", "top-label", "classwise"):
        assert ece(probs, y, kind=kind) == 0.0


def test_uniform_predictions():
    # C = 4: NLL = log 4; Brier per row = 0.75^2 + 3 * 0.25^2 = 0.5625 + 0.1875 = 0.75.
    y = np.array([0, 1, 2, 3, 3, 1])
    probs = np.full((6, 4), 0.25)
    assert nll(probs, y) == pytest.approx(math.log(4))
    assert brier(probs, y) == pytest.approx(0.75)
    # Ties go to class 0, so accuracy = fraction of y == 0 = 1/6; all confidences are
    # 0.25, one bin, ECE = |1/6 - 0.25| = 1/12.
    assert accuracy(probs, y) == pytest.approx(1 / 6)
    assert ece(probs, y) == pytest.approx(1 / 12)


def test_nll_is_inf_when_true_class_has_zero_probability():
    probs = np.array([[1.0, 0.0], [0.5, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero RuntimeWarning either
        assert nll(probs, np.array([1, 0])) == math.inf


def test_reliability_table_consistent_with_ece():
    rng = np.random.default_rng(0)
    for n_classes in (2, 5):
        logits = rng.normal(size=(300, n_classes)) * 2
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        y = rng.integers(0, n_classes, size=300)
        for kind in ("auto", "top-label"):
            t = reliability_table(probs, y, n_bins=15, kind=kind)
            filled = t.count > 0
            assert t.count.sum() == 300
            from_table = np.sum(t.count[filled] / 300 * np.abs(t.accuracy - t.confidence)[filled])
            assert ece(probs, y, n_bins=15, kind=kind) == pytest.approx(from_table, rel=1e-12)
            assert np.all((t.confidence[filled] > t.bin_lower[filled]) | (t.bin_lower[filled] == 0))
            assert np.all(t.confidence[filled] <= t.bin_upper[filled])
        per_class = []
        for c in range(n_classes):
            t = reliability_table(probs, y, n_bins=15, kind="classwise", class_index=c)
            filled = t.count > 0
            gaps = np.abs(t.accuracy - t.confidence)[filled]
            per_class.append(np.sum(t.count[filled] / 300 * gaps))
        assert ece(probs, y, n_bins=15, kind="classwise") == pytest.approx(np.mean(per_class))


def test_accepts_jax_arrays_and_returns_floats():
    value = nll(jnp.asarray(TRI_PROBS), jnp.asarray(TRI_Y))
    assert type(value) is float
    assert value == pytest.approx(nll(TRI_PROBS, TRI_Y))
    assert type(ece(jnp.asarray(BIN_PROBS), jnp.asarray(BIN_Y))) is float


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("probs", "y", "match"),
    [
        (np.array([0.5, 0.5]), np.array([0]), r"probs must have shape \(n, C\)"),
        (np.full((3, 2), 0.5), np.array([0, 1]), r"y must have shape \(n,\) = \(3,\)"),
        (np.full((2, 2), 0.5), np.array([[0], [1]]), r"y must have shape"),
        (np.ones((2, 1)), np.array([0, 0]), r"at least 2 classes"),
        (np.array([[0.5, np.nan], [0.5, 0.5]]), np.array([0, 1]), r"NaN or inf in 1 of 2 rows"),
        (np.array([[np.inf, 0.0], [0.5, 0.5]]), np.array([0, 1]), r"NaN or inf"),
        (np.array([[1.2, -0.2], [0.5, 0.5]]), np.array([0, 1]), r"negative entries in 1 of 2"),
        (
            np.array([[0.5, 0.6], [0.5, 0.5], [0.2, 0.7]]),
            np.array([0, 1, 0]),
            r"sum to 1 within 1e-06; 2 of 3 rows do not",
        ),
        (np.full((2, 2), 0.5), np.array([0, 2]), r"labels must lie in 0..1 .* 1 of 2"),
        (np.full((2, 2), 0.5), np.array([-1, 0]), r"labels must lie in 0..1"),
        (np.full((2, 2), 0.5), np.array([0.5, 1.0]), r"integer class labels"),
    ],
)
def test_validation_errors(probs, y, match):
    for fn in (accuracy, nll, brier, ece, reliability_table, evaluate):
        with pytest.raises(ValueError, match=match):
            fn(probs, y)


def test_rows_within_tolerance_accepted():
    probs = np.array([[0.5 + 5e-7, 0.5], [0.3, 0.7]])
    assert accuracy(probs, np.array([0, 1])) == 1.0


def test_kind_and_bin_errors():
    with pytest.raises(ValueError, match=r"kind='binary' needs C == 2"):
        ece(TRI_PROBS, TRI_Y, kind="binary")
    with pytest.raises(ValueError, match=r"kind must be one of"):
        ece(TRI_PROBS, TRI_Y, kind="top")
    with pytest.raises(ValueError, match=r"n_bins must be a positive integer"):
        ece(TRI_PROBS, TRI_Y, n_bins=0)
    with pytest.raises(ValueError, match=r"needs class_index in 0..2"):
        reliability_table(TRI_PROBS, TRI_Y, kind="classwise")
    with pytest.raises(ValueError, match=r"class_index is only used"):
        reliability_table(TRI_PROBS, TRI_Y, class_index=0)

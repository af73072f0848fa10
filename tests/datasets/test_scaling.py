"""Input scaling: the robust and min-max Standardizers and the estimators' ``standardize``
option."""

import warnings

import numpy as np
import pytest

from conftest import toy_problem
from ppgpc import ILRGPClassifier
from ppgpc.datasets import Standardizer
from ppgpc.estimators import _common as estimator_checks
from ppgpc.estimators._common import fit_standardizer


def test_robust_standardizer_uses_median_and_iqr():
    X = np.random.default_rng(0).gamma(2.0, 3.0, size=(101, 3))
    s = Standardizer.fit(X, method="robust")
    q25, q50, q75 = np.percentile(X, [25, 50, 75], axis=0)
    np.testing.assert_array_equal(s.mean, q50)
    np.testing.assert_allclose(s.scale, (q75 - q25) / 1.3489795003921634, rtol=1e-15)
    Z = s.transform(X)
    np.testing.assert_allclose(np.median(Z, axis=0), 0.0, atol=1e-15)
    np.testing.assert_allclose(s.inverse_transform(Z), X, rtol=1e-14)


def test_robust_scale_of_normal_data_is_its_standard_deviation():
    """IQR / 1.349 estimates sigma for normal data; its standard error is about
    1.1 sigma / sqrt(n), so 5 standard errors at n = 40000 is 2.8%."""
    X = np.random.default_rng(1).normal(3.0, 2.0, size=(40_000, 2))
    s = Standardizer.fit(X, method="robust")
    np.testing.assert_allclose(s.scale, 2.0, rtol=5 * 1.1 / np.sqrt(40_000))


def test_a_few_extreme_rows_set_the_z_scale_but_not_the_robust_one():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 2))
    X_out = np.vstack([X, [[1e4, 0.0], [-5e3, 0.0]]])
    z, robust = Standardizer.fit(X_out), Standardizer.fit(X_out, method="robust")
    assert z.scale[0] > 100 and z.max_abs_score(X_out)[0] > 40
    np.testing.assert_allclose(robust.scale, Standardizer.fit(X, method="robust").scale, rtol=0.01)
    np.testing.assert_allclose(robust.transform(X)[:, 0].std(), 1.0, rtol=0.1)


def test_robust_standardizer_constant_and_zero_iqr_columns():
    X = np.zeros((20, 3))
    X[:, 0] = 4.0                 # constant: scale 1, transforms to 0
    X[-2:, 1] = [1.0, 3.0]        # IQR 0 but not constant: the standard deviation
    X[:, 2] = np.arange(20.0)
    s = Standardizer.fit(X, method="robust")
    assert s.scale[0] == 1.0 and np.all(s.transform(X)[:, 0] == 0.0)
    assert s.scale[1] == pytest.approx(X[:, 1].std())
    assert np.all(np.isfinite(s.transform(X)))


@pytest.fixture(scope="module")
def with_outlier():
    X, y = toy_problem(24, 2, seed=5)
    X = X.copy()
    X[0, 1] = 1e4
    return X, y


def test_extreme_z_scores_are_reported():
    """One value among n has a z-score of at most sqrt(n - 1), so the warning needs n > 400."""
    X = np.random.default_rng(3).normal(size=(2000, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert fit_standardizer(X, True) is not None
    X[7, 2] = 1e4
    with pytest.warns(UserWarning, match=r"1 input column\(s\) \[2\] have training values up "
                                         r"to 4[0-9] standard deviations.*standardize='robust'"):
        fit_standardizer(X, True)
    with pytest.warns(UserWarning, match=r"1 input column\(s\) \[2\].*set the min-max scale"):
        fit_standardizer(X, "minmax")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert fit_standardizer(X, "robust") is not None
    assert fit_standardizer(X, False) is None


def test_fit_warns_through_the_same_check(with_outlier, monkeypatch):
    X, y = with_outlier  # 24 points: the largest possible z-score is sqrt(23) = 4.8
    monkeypatch.setattr(estimator_checks, "OUTLIER_SCORE", 4.0)
    with pytest.warns(UserWarning, match=r"1 input column\(s\) \[1\]"):
        ILRGPClassifier(epsilon=0.99).fit(X, y)


def test_robust_standardize_fits_without_warning_and_round_trips(with_outlier, tmp_path):
    X, y = with_outlier
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        clf = ILRGPClassifier(epsilon=0.99, standardize="robust").fit(X, y)
    np.testing.assert_allclose(clf.standardizer_.mean, np.median(X, axis=0), rtol=1e-14)
    probs = clf.predict_proba(X[:5])
    loaded = ILRGPClassifier.load(clf.save(tmp_path / "robust"))
    assert loaded.standardize == "robust"
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]), probs)


def test_unknown_standardize_value_is_refused():
    X, y = toy_problem(12, 2)
    with pytest.raises(ValueError, match=r"standardize must be True \(or 'zscore'\), 'robust', "
                                         r"'minmax' or False; got 'iqr'"):
        ILRGPClassifier(epsilon=0.99, standardize="iqr").fit(X, y)
    with pytest.raises(ValueError, match=r"unknown scaling method 'iqr'; choose one of"):
        Standardizer.fit(X, method="iqr")


def test_minmax_standardizer_maps_the_training_range_onto_the_unit_interval():
    X = np.random.default_rng(4).normal(size=(50, 3)) * [1.0, 10.0, 0.1] + [0.0, -3.0, 7.0]
    X[:, 2] = 7.0                                     # constant: scale 1, transforms to 0
    s = Standardizer.fit(X, method="minmax")
    Z = s.transform(X)
    np.testing.assert_array_equal(Z[:, :2].min(axis=0), 0.0)
    np.testing.assert_allclose(Z[:, :2].max(axis=0), 1.0, rtol=1e-15)
    assert s.scale[2] == 1.0 and np.all(Z[:, 2] == 0.0)
    np.testing.assert_allclose(s.inverse_transform(Z), X, rtol=1e-14)


def test_minmax_and_zscore_names_through_the_estimator(tmp_path):
    X, y = toy_problem(24, 2, seed=6)
    named = ILRGPClassifier(epsilon=0.99, standardize="zscore").fit(X, y)
    default = ILRGPClassifier(epsilon=0.99).fit(X, y)
    np.testing.assert_array_equal(named.predict_proba(X[:5]), default.predict_proba(X[:5]))
    clf = ILRGPClassifier(epsilon=0.99, standardize="minmax").fit(X, y)
    np.testing.assert_array_equal(clf.standardizer_.mean, X.min(axis=0))
    np.testing.assert_allclose(clf.standardizer_.scale, np.ptp(X, axis=0), rtol=1e-15)
    loaded = ILRGPClassifier.load(clf.save(tmp_path / "minmax"))
    assert loaded.standardize == "minmax"
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]), clf.predict_proba(X[:5]))

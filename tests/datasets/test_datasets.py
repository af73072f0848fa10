"""Tests of ppgpc.datasets: loading, checksums, the paper's split protocol, z-scoring."""

import hashlib
import json
import re
from collections import Counter
from importlib import resources

import numpy as np
import pytest

from ppgpc import datasets
from ppgpc.datasets import (DATASETS, DatasetFormatError, DatasetNotFoundError, Standardizer, load,
                            paper_split, paper_split_indices, standardize, train_validation_split)

SHIPPED = {
    "wine": ((178, 13), {1: 59, 2: 71, 3: 48}),
    "glass": ((214, 9), {1: 70, 2: 76, 3: 17, 5: 13, 6: 9, 7: 29}),
    "thyroid": ((215, 5), {1: 150, 2: 35, 3: 30}),
}

# From shared/data/uci/README.md: rows, features, classes (and the two-class counts).
LARGE = {
    "letter": (20000, 16, 26, None),
    "magic": (19020, 10, 2, {"g": 12332, "h": 6688}),
    "htru2": (17898, 8, 2, {0: 16259, 1: 1639}),
    "eeg": (14980, 14, 2, {0: 8257, 1: 6723}),
}

PAPER_N_TEST = {"eeg": 4000, "htru2": 5000, "magic": 5000, "letter": 5000,
                "wine": 50, "glass": 50, "thyroid": 50}


def _readme_checksums() -> dict[str, str]:
    """file name -> sha256 from the table in ppgpc/datasets/data/README.md."""
    text = resources.files("ppgpc.datasets").joinpath("data", "README.md").read_text("utf-8")
    return dict(re.findall(r"^\| (\w+\.csv) \|.*`([0-9a-f]{64})`", text, flags=re.MULTILINE))


# ----------------------------------------------------------------------------- loading


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_dataset_shapes_and_class_counts(name):
    shape, counts = SHIPPED[name]
    X, y = load(name)
    assert X.shape == shape and X.dtype == np.float64
    assert y.shape == (shape[0],) and np.issubdtype(y.dtype, np.integer)
    assert dict(Counter(y.tolist())) == counts
    assert np.all(np.isfinite(X))


def test_shipped_values_spot_check():
    X, y = load("glass")
    np.testing.assert_array_equal(X[0], [1.52101, 13.64, 4.49, 1.10, 71.78, 0.06, 8.75, 0, 0])
    X, y = load("wine")
    np.testing.assert_array_equal(X[0, [0, 4, 7, 12]], [14.23, 127, 0.28, 1065])
    assert y[0] == 1 and y[-1] == 3


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_sha256_matches_readme_and_registry(name):
    info = DATASETS[name]
    raw = resources.files("ppgpc.datasets").joinpath("data", info.filename).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    assert _readme_checksums()[info.filename] == digest
    assert info.sha256 == digest
    load(name, check_sha256=True)  # does not raise


def test_registry_metadata():
    assert set(datasets.available()) == set(PAPER_N_TEST)
    assert set(datasets.available(shipped=True)) == set(SHIPPED)
    assert set(datasets.available(shipped=False)) == set(LARGE)
    for name, info in DATASETS.items():
        assert info.name == name
        assert info.paper_n_test == PAPER_N_TEST[name]
        assert len(info.classes) == len(info.class_counts) == info.n_classes
        assert sum(info.class_counts) == info.n
    for name, (n, d, c, _) in LARGE.items():
        assert (DATASETS[name].n, DATASETS[name].d, DATASETS[name].n_classes) == (n, d, c)


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="unknown dataset 'iris'.*wine.*letter"):
        load("iris")


def test_missing_large_dataset_explains_where_and_how(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        load("letter", data_dir=tmp_path)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert str(tmp_path / "letter_recognition.csv") in message
    assert "PPGPC_DATA_DIR" in message
    assert '"Letter Recognition"' in message and "UCI Machine Learning Repository" in message
    assert "header row" in message and "'label' column" in message


def test_missing_data_dir_without_env(monkeypatch):
    monkeypatch.delenv("PPGPC_DATA_DIR", raising=False)
    with pytest.raises(DatasetNotFoundError, match="PPGPC_DATA_DIR is not set.*magic04.csv"):
        load("magic")


def test_env_var_is_used_when_data_dir_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PPGPC_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetNotFoundError, match="environment variable"):
        load("eeg")


def _write_small_htru2(folder, n_rows, *, header=None, bad_row=None):
    """A fake htru2.csv with n_rows rows (the real one has 17898)."""
    header = header or ",".join([f"f{i}" for i in range(8)] + ["label"])
    rows = [",".join(["1.5"] * 8 + [str(i % 2)]) for i in range(n_rows)]
    if bad_row is not None:
        rows[0] = bad_row
    (folder / "htru2.csv").write_text("\n".join([header, *rows]) + "\n")


def test_truncated_file_is_rejected(tmp_path):
    _write_small_htru2(tmp_path, 100)
    with pytest.raises(DatasetFormatError, match="expected 17898 data rows.*found 100.*truncated"):
        load("htru2", data_dir=tmp_path)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"header": "a,b,c"}, "header row"),
        ({"bad_row": "1,2,3"}, "line 2: expected 9 fields, got 3"),
        ({"bad_row": ",".join(["x"] * 8 + ["0"])}, "line 2: could not convert"),
    ],
)
def test_malformed_file_is_rejected(tmp_path, kwargs, pattern):
    _write_small_htru2(tmp_path, 10, **kwargs)
    with pytest.raises(DatasetFormatError, match=pattern):
        load("htru2", data_dir=tmp_path)


def test_checksum_mismatch_is_rejected(tmp_path):
    _write_small_htru2(tmp_path, 10)
    with pytest.raises(DatasetFormatError, match="sha256"):
        load("htru2", data_dir=tmp_path, check_sha256=True)


@pytest.mark.uci
@pytest.mark.parametrize("name", sorted(LARGE))
def test_large_dataset_loads_from_env(uci_data_dir, name):
    n, d, c, counts = LARGE[name]
    X, y = load(name, check_sha256=True)
    assert X.shape == (n, d) and X.dtype == np.float64
    assert y.shape == (n,) and len(np.unique(y)) == c
    if counts is not None:
        assert dict(Counter(y.tolist())) == counts
    if name == "letter":
        assert set(y.tolist()) == {chr(i) for i in range(ord("A"), ord("Z") + 1)}
        assert y.dtype.kind == "U"


# ---------------------------------------------------------------------------- splitting


@pytest.fixture(scope="module")
def glass():
    return load("glass")


@pytest.mark.parametrize("stratify", [True, False])
def test_paper_split_sizes_and_partition(glass, stratify):
    X, y = glass
    idx = paper_split_indices(y, seed=3, stratify=stratify)
    assert (len(idx.test), len(idx.val), len(idx.train)) == (50, 16, 148)  # 10% of 164
    everything = np.concatenate([idx.train, idx.val, idx.test])
    np.testing.assert_array_equal(np.sort(everything), np.arange(len(y)))  # disjoint, covering
    s = paper_split(X, y, seed=3, stratify=stratify)
    np.testing.assert_array_equal(s.X_train, X[idx.train])
    np.testing.assert_array_equal(s.y_val, y[idx.val])
    np.testing.assert_array_equal(s.X_test, X[idx.test])


def test_paper_split_large_test_size():
    y = np.repeat(np.arange(2), 1000)
    idx = paper_split_indices(y, seed=0, n_test=500)
    assert (len(idx.test), len(idx.val), len(idx.train)) == (500, 150, 1350)


def test_paper_split_is_deterministic_per_seed(glass):
    X, y = glass
    a, b = paper_split(X, y, seed=7), paper_split(X, y, seed=7)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    c = paper_split_indices(y, seed=8)
    assert not np.array_equal(paper_split_indices(y, seed=7).test, c.test)


def test_stratified_split_keeps_every_class_and_proportions(glass):
    X, y = glass
    classes, counts = np.unique(y, return_counts=True)
    for seed in range(20):
        s = paper_split(X, y, seed=seed)
        assert set(s.y_train.tolist()) == set(classes.tolist())
        test_counts = np.array([np.sum(s.y_test == c) for c in classes])
        # Proportional allocation: within one of 50 * n_c / n for every class.
        assert np.all(np.abs(test_counts - 50 * counts / counts.sum()) < 1)


def test_stratified_split_keeps_singleton_class_in_train():
    y = np.array([0] * 30 + [1] * 30 + [2])
    X = np.arange(61.0)[:, None]
    for seed in range(10):
        s = paper_split(X, y, seed=seed, n_test=20)
        assert 2 in s.y_train


def test_train_validation_split(glass):
    X, y = glass
    tv = train_validation_split(X, y, seed=1)
    assert (len(tv.y_train), len(tv.y_val)) == (193, 21)  # round(21.4)
    assert set(tv.y_train.tolist()) == set(y.tolist())
    rows = np.concatenate([tv.X_train, tv.X_val])
    assert len(np.unique(rows, axis=0)) == len(np.unique(X, axis=0))
    tv2 = train_validation_split(X, y, seed=1)
    np.testing.assert_array_equal(tv.X_val, tv2.X_val)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        ({"n_test": 214}, ValueError, "n_test must satisfy"),
        ({"n_test": 0}, ValueError, "n_test must satisfy"),
        ({"n_test": 50.0}, TypeError, "n_test must be an int"),
        ({"val_fraction": 0.0}, ValueError, "between 0 and 1"),
        ({"val_fraction": 1.0}, ValueError, "between 0 and 1"),
        ({"seed": None}, TypeError, "seed must be"),
        ({"seed": -1}, TypeError, "seed must be"),
        ({"n_test": 210}, ValueError, "keep at least one row of each"),
    ],
)
def test_paper_split_bad_arguments(glass, kwargs, error, pattern):
    X, y = glass
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(error, match=pattern):
        paper_split(X, y, **kwargs)


def test_split_bad_shapes():
    with pytest.raises(ValueError, match="different numbers of rows"):
        paper_split(np.zeros((10, 2)), np.zeros(9), seed=0, n_test=2)
    with pytest.raises(ValueError, match="X must be 2-D"):
        train_validation_split(np.zeros(10), np.zeros(10), seed=0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        train_validation_split(np.zeros((10, 1)), np.zeros(10), seed=0, val_fraction=1.5)


# ---------------------------------------------------------------------------- z-scoring


def test_standardize_uses_training_statistics_only():
    rng = np.random.default_rng(0)
    X_train = rng.normal(3.0, 5.0, size=(200, 4))
    X_test = rng.normal(-10.0, 1.0, size=(30, 4))
    Z_train, Z_test = standardize(X_train, X_test)
    np.testing.assert_allclose(Z_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z_train.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(Z_test, (X_test - X_train.mean(0)) / X_train.std(0), rtol=1e-12)


def test_standardizer_constant_column_and_inverse():
    X = np.array([[1.0, 0.1, 2.0], [3.0, 0.1, 4.0], [5.0, 0.1, 9.0]])
    s = Standardizer.fit(X)
    assert s.scale[1] == 1.0
    Z = s.transform(X)
    assert np.all(np.isfinite(Z)) and np.all(Z[:, 1] == 0.0)
    np.testing.assert_allclose(s.inverse_transform(Z), X, rtol=1e-15)


def test_standardizer_json_round_trip():
    s = Standardizer.fit(np.random.default_rng(1).normal(size=(20, 3)))
    restored = Standardizer.from_dict(json.loads(json.dumps(s.to_dict())))
    np.testing.assert_array_equal(restored.mean, s.mean)
    np.testing.assert_array_equal(restored.scale, s.scale)


def test_standardizer_bad_inputs():
    s = Standardizer.fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"X has 3 features \(shape \(4, 3\)\).*fit on 2"):
        s.transform(np.ones((4, 3)))
    with pytest.raises(ValueError, match="2-D"):
        Standardizer.fit(np.ones(3))
    with pytest.raises(ValueError, match="zero rows"):
        Standardizer.fit(np.ones((0, 2)))
    with pytest.raises(ValueError, match="NaN"):
        Standardizer.fit(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="lacks keys"):
        Standardizer.from_dict({"mean": [0.0]})
    with pytest.raises(ValueError, match="positive"):
        Standardizer.from_dict({"mean": [0.0], "scale": [0.0]})

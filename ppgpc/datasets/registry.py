"""The UCI classification datasets: a registry of what can be loaded, and ``load``.

Three small datasets ship with the package (``wine``, ``glass``, ``thyroid``). Four larger
ones (``letter``, ``magic``, ``htru2``, ``eeg``) are read from a folder given as
``data_dir`` or by the ``PPGPC_DATA_DIR`` environment variable. Every file is a CSV with
one header row, the feature columns, then a final ``label`` column, checked against its
SHA-256 and its expected shape. Provenance, checksums and licence (CC BY 4.0):
``ppgpc/datasets/data/README.md``.
"""


from __future__ import annotations

import csv
import hashlib
import io
import os
import string
from collections import Counter
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, NamedTuple

import numpy as np


__all__ = ["DATASETS", "DATA_DIR_ENV", "DatasetFormatError", "DatasetInfo", "DatasetNotFoundError",
           "available", "load"]

DATA_DIR_ENV = "PPGPC_DATA_DIR"
"""Name of the environment variable that points to the folder of the larger CSV files."""


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's CSV file is not where ppgpc looked for it."""


class DatasetFormatError(ValueError):
    """A dataset's CSV file is malformed, truncated, or not the expected UCI data."""


class DatasetInfo(NamedTuple):
    """Metadata of one dataset known to :func:`load`."""

    name: str
    """Short name passed to :func:`load`, e.g. ``"letter"``."""
    filename: str
    """CSV file name, in the package (shipped) or in the data folder."""
    uci_page: str
    """Title of the dataset's page in the UCI Machine Learning Repository."""
    n: int
    """Number of rows (examples)."""
    d: int
    """Number of feature columns."""
    classes: tuple
    """The class labels as stored in the file, sorted (ints, or strings such as ``"A"``)."""
    class_counts: tuple[int, ...]
    """Number of rows of each class, aligned with ``classes``."""
    shipped: bool
    """True if the CSV is bundled with ppgpc; False if it is read from the data folder."""
    paper_n_test: int
    """Test-set size used for this dataset in Table 2 of the ILR paper."""
    sha256: str
    """SHA-256 of the reference CSV file (see ``data/README.md``)."""
    preparation: str
    """How the reference CSV was made from the UCI file, for users preparing their own."""

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)


_TABLE = (
    # name, CSV file, UCI page, rows n, features d, {class: rows}, shipped, paper's test size,
    # sha256 of the reference CSV, how that CSV was made from the UCI file
    ("wine", "wine.csv", "Wine", 178, 13, {1: 59, 2: 71, 3: 48}, True, 50,
     "d055e3a6c2cd481c5f2e5112c3e449e42bf83e9890d24453130fdd3d53385e34",
     "wine.data with the class moved from the first to the last column"),
    ("glass", "glass.csv", "Glass Identification", 214, 9,
     {1: 70, 2: 76, 3: 17, 5: 13, 6: 9, 7: 29}, True, 50,
     "70d58a2d01a63b6bec146f894560cb66babb4f3c786ee4248f3043de12c84674",
     "glass.data with the Id column dropped"),
    ("thyroid", "thyroid.csv", "Thyroid Disease (file new-thyroid.data)", 215, 5,
     {1: 150, 2: 35, 3: 30}, True, 50,
     "e77d28b35b228cd461f876753000e81dae3c438f3b96316bb610e3d47501e468",
     "new-thyroid.data with the class moved from the first to the last column"),
    ("letter", "letter_recognition.csv", "Letter Recognition", 20000, 16,
     dict(zip(string.ascii_uppercase, (789, 766, 736, 805, 768, 775, 773, 734, 755, 747, 739,
                                       761, 792, 783, 753, 803, 783, 758, 748, 796, 813, 764,
                                       752, 787, 786, 734))), False, 5000,
     "702895c420c2674133c40f605c59d17a9be45158bdfc00a59fc14f13be4ec39b",
     "letter-recognition.data with the letter moved from the first to the last column"),
    ("magic", "magic04.csv", "MAGIC Gamma Telescope", 19020, 10, {"g": 12332, "h": 6688},
     False, 5000, "4fc287f754444cbd2444f36d55ef2c6939feb57afeffeb5d06a41cf603cda8d4",
     "magic04.data (class g/h already last) with a header row added"),
    ("htru2", "htru2.csv", "HTRU2", 17898, 8, {0: 16259, 1: 1639}, False, 5000,
     "e1a980db2795532918cfd664551621c9b7ebd59d2d2e1759d88033221cf3ef2f",
     "HTRU_2.csv (class 0/1 already last) with a header row added"),
    ("eeg", "eeg_eye_state.csv", "EEG Eye State", 14980, 14, {0: 8257, 1: 6723}, False, 4000,
     "753cf37240bffd38fdef5eef4f7ea9e2fafa60c8fcfb1c69efcbf5e6829d9107",
     "EEG Eye State.arff with the ARFF header replaced by a CSV header row"),
)
"""One row per dataset; the ``{class: rows}`` mapping gives ``classes`` (sorted) and
``class_counts`` aligned with them."""

_INFOS = tuple(
    DatasetInfo(name, filename, uci_page, n, d, tuple(counts), tuple(counts.values()), shipped,
                paper_n_test, sha256, preparation)
    for name, filename, uci_page, n, d, counts, shipped, paper_n_test, sha256, preparation
    in _TABLE
)

DATASETS: Mapping[str, DatasetInfo] = MappingProxyType({info.name: info for info in _INFOS})
"""Read-only mapping from dataset name to its :class:`DatasetInfo`."""


def available(*, shipped: bool | None = None) -> tuple[str, ...]:
    """Names of the datasets :func:`load` knows.

    Args:
        shipped: If True, only the datasets bundled with ppgpc; if False, only those read
            from the data folder; if None (default), all of them.

    Returns:
        The names, in the order of :data:`DATASETS`.
    """
    return tuple(n for n, info in DATASETS.items() if shipped is None or info.shipped == shipped)


def _info(name: str) -> DatasetInfo:
    """Look up a dataset by name, with an error that lists the known names."""
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return DATASETS[name]


def _how_to_get(info: DatasetInfo) -> str:
    """The part of a not-found message that explains where to get the file."""
    return (
        f"Set the {DATA_DIR_ENV} environment variable (or pass data_dir=) to a folder holding "
        f"{info.filename!r}, downloadable from the UCI Machine Learning Repository page "
        f'"{info.uci_page}" (prepared as: {info.preparation}). Expected CSV format: one '
        f"header row, then {info.n} rows of {info.d} feature columns followed by a final "
        f"'label' column; "
        f"comma-separated, no index column."
    )


def _resolve_path(info: DatasetInfo, data_dir: str | os.PathLike | None) -> Path:
    """Path of a non-shipped dataset's CSV, or a DatasetNotFoundError saying where we looked."""
    if data_dir is not None:
        folder, source = Path(data_dir), "data_dir argument"
    elif os.environ.get(DATA_DIR_ENV):
        folder, source = Path(os.environ[DATA_DIR_ENV]), f"{DATA_DIR_ENV} environment variable"
    else:
        raise DatasetNotFoundError(
            f"dataset {info.name!r} is not shipped with ppgpc and no data folder was given "
            f"(data_dir is None and {DATA_DIR_ENV} is not set); looked for {info.filename!r}. "
            + _how_to_get(info)
        )
    path = folder.expanduser() / info.filename
    if not path.is_file():
        raise DatasetNotFoundError(
            f"dataset {info.name!r}: file {str(path)!r} not found (folder from the {source}). "
            + _how_to_get(info)
        )
    return path


def _read_bytes(info: DatasetInfo, data_dir: str | os.PathLike | None) -> tuple[bytes, str]:
    """Raw file contents and a description of where they came from."""
    if info.shipped:
        resource = resources.files(__package__).joinpath("data", info.filename)
        return resource.read_bytes(), f"packaged file data/{info.filename}"
    path = _resolve_path(info, data_dir)
    return path.read_bytes(), str(path)


def _parse_label(token: str, numeric: bool):
    return int(token) if numeric else token


def _parse_csv(text: str, info: DatasetInfo, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse ``features..., label`` rows into (X, y), checking the shape row by row.

    Returns:
        X: float64 array, shape (n, d). y: labels, shape (n,), int64 or str.
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or len(header) != info.d + 1 or header[-1].strip() != "label":
        raise DatasetFormatError(
            f"{where}: expected a header row of {info.d} feature names and a final 'label' "
            f"column, got {header!r}"
        )
    numeric = isinstance(info.classes[0], int)
    features, labels = [], []
    for row in reader:
        if not row:
            continue  # tolerate blank lines, e.g. a trailing one
        if len(row) != info.d + 1:
            raise DatasetFormatError(
                f"{where}, line {reader.line_num}: expected {info.d + 1} fields, got {len(row)}"
            )
        try:
            features.append([float(tok) for tok in row[:-1]])
            labels.append(_parse_label(row[-1].strip(), numeric))
        except ValueError as err:
            raise DatasetFormatError(f"{where}, line {reader.line_num}: {err}") from None
    X = np.asarray(features, dtype=np.float64).reshape(len(features), info.d)
    y = np.asarray(labels, dtype=np.int64 if numeric else str)
    return X, y


def _check_contents(X: np.ndarray, y: np.ndarray, info: DatasetInfo, where: str) -> None:
    """Raise DatasetFormatError unless the rows and classes are those of the UCI data."""
    if X.shape[0] != info.n:
        hint = " (truncated file?)" if X.shape[0] < info.n else ""
        raise DatasetFormatError(
            f"{where}: expected {info.n} data rows for dataset {info.name!r}, "
            f"found {X.shape[0]}{hint}"
        )
    if not np.all(np.isfinite(X)):
        raise DatasetFormatError(f"{where}: the features contain NaN or infinite values")
    counts = Counter(y.tolist())
    expected = dict(zip(info.classes, info.class_counts))
    if counts != expected:
        raise DatasetFormatError(
            f"{where}: class counts {dict(sorted(counts.items()))} differ from the expected "
            f"{expected} for dataset {info.name!r}"
        )


def load(
    name: str, data_dir: str | os.PathLike | None = None, *, check_sha256: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Load a UCI classification dataset as ``(X, y)``.

    The shipped datasets (``wine``, ``glass``, ``thyroid``) are read from the package and
    ignore ``data_dir``. The others (``letter``, ``magic``, ``htru2``, ``eeg``) are read
    from ``data_dir`` or, when it is None, from the folder named by ``PPGPC_DATA_DIR``.
    After parsing, the number of rows, features and the per-class counts are checked
    against :data:`DATASETS`, so a truncated or altered file is rejected.

    Args:
        name: One of :func:`available`.
        data_dir: Folder holding the CSV of a non-shipped dataset. Defaults to the
            ``PPGPC_DATA_DIR`` environment variable.
        check_sha256: Also require the file's SHA-256 to equal the reference copy's
            (``DATASETS[name].sha256``). Off by default, since a faithful CSV written
            with other number formatting or line endings is still accepted by the
            content checks.

    Returns:
        X: Features, float64 array of shape (n, d), in the file's row order.
        y: Original class labels, shape (n,): int64 for numeric labels (e.g. glass
        ``1, 2, 3, 5, 6, 7``), str for letters (``"A"``..``"Z"``, ``"g"``/``"h"``).

    Raises:
        ValueError: Unknown ``name`` (the message lists the known names).
        DatasetNotFoundError: The CSV of a non-shipped dataset is missing; the message says
            where it was looked for and how to get it.
        DatasetFormatError: The file is malformed, truncated, or its checksum differs.

    Example:
        >>> X, y = load("wine")
        >>> X.shape, X.dtype, y[:3]
        ((178, 13), dtype('float64'), array([1, 1, 1]))
    """
    info = _info(name)
    raw, where = _read_bytes(info, data_dir)
    if check_sha256:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != info.sha256:
            raise DatasetFormatError(
                f"{where}: sha256 {digest} differs from the reference {info.sha256} "
                f"for dataset {name!r}"
            )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DatasetFormatError(f"{where}: not a UTF-8 text file ({err})") from None
    X, y = _parse_csv(text, info, where)
    _check_contents(X, y, info, where)
    return X, y

"""The folders of saves: written atomically, read as one complete save.

Saving is atomic: a save cut short at any moment (an exception, KeyboardInterrupt, SIGKILL)
leaves the folder holding the earlier save or the new one, never a mix and never nothing,
and saves to one folder from several processes take turns. For the folder ``<name>``:

* saves run one at a time, each holding an exclusive ``flock`` on the sibling file
  ``.<name>.lock`` (which its holder removes before releasing it);
* a save writes the complete new save into a sibling ``.<name>.tmp-<pid>-<hex>`` and fsyncs
  it; then, if ``<name>`` holds a save, renames ``<name>`` to ``.<name>.old-<pid>-<hex>``
  (the backup), renames the new folder to ``<name>`` and removes the backup (renamed to a
  ``.tmp-`` name first);
* before and after its writing, a save restores the backup if ``<name>`` is missing and
  removes the other ``.tmp-`` and ``.old-`` folders: under the lock, they are what saves
  that died (or the save itself) left.

Hence the invariant, at every instant: nothing is ever written into ``<name>`` or an
``.old-`` folder; an ``.old-`` folder is a complete save, the one renamed away from
``<name>``; when ``<name>`` exists it is the latest complete save, and when it is missing
(a save stopped between its two renames) the one ``.old-`` folder beside it is. A ``.tmp-``
folder is never read. Loading reads ``<name>``, or that backup while ``<name>`` is missing,
and opens settings.json and arrays.nc through one handle on that folder (a folder swapped
away meanwhile is looked up again), so even a load that runs during a save reads one
complete save. This rests on POSIX ``rename`` and ``flock`` (Linux, macOS).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path

import numpy as np
import xarray as xr

from ppgpc.io.format import KINDS, READABLE_VERSIONS, decode

__all__ = ["SETTINGS", "ARRAYS", "write_save", "opened", "dataset", "write_arrays", "read_group"]

SETTINGS = "settings.json"
"""The name of a save folder's JSON file: the settings and the fit's record."""
ARRAYS = "arrays.nc"
"""The name of a save folder's netCDF file: the arrays (draws, hyperparameters, data)."""


def _parse_settings(where: Path, raw: bytes) -> dict:
    """The payload of the settings.json ``where`` whose bytes are ``raw``."""
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{where} is not valid JSON ({err}); the save is damaged") from None
    try:
        payload = decode(payload)
    except ValueError as err:
        raise ValueError(f"{where}: the save is damaged: {err}") from None
    if not isinstance(payload, dict):
        raise ValueError(f"{where} holds a JSON {type(payload).__name__}, not a ppgpc save's "
                         "settings")
    version = payload.get("format_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ValueError(f"{where} has format version {version!r}; this ppgpc reads versions "
                         f"{list(READABLE_VERSIONS)}")
    return payload


# ------------------------------------------------------------------ the folder of a save
_TMP, _OLD = "tmp", "old"
_OPEN_TRIES = 100
"""How often a load looks a save up again when saves keep swapping it away."""


def _holds_a_save(folder: Path) -> bool:
    """Whether ``folder`` holds a ppgpc save: its settings.json is a JSON object with a
    format version and one of ppgpc's kinds (another tool's settings.json is not)."""
    try:
        payload = json.loads((folder / SETTINGS).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return (isinstance(payload, dict) and "format_version" in payload
            and payload.get("kind") in KINDS)


def _refuse_to_overwrite(path: Path) -> None:
    """Refuse to save to ``path`` unless it is missing, an empty folder or an earlier ppgpc
    save: never a file or a folder of other files (among them another tool's settings.json
    or arrays.nc)."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"cannot save to {path}: it is a file; a ppgpc save is a folder")
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir())
        if names and not _holds_a_save(path):
            raise ValueError(f"cannot save to {path}: the folder holds other files "
                             f"({names[:5]}) and is not a ppgpc save; choose an empty or "
                             "new folder")


def _new_sibling(path: Path, kind: str) -> Path:
    """A fresh name ``.<name>.<kind>-<pid>-<hex>`` beside ``path``."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def _siblings(path: Path, kind: str) -> list[Path]:
    """The ``_new_sibling(path, kind)`` names that exist beside ``path``."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{kind}-\d+-[0-9a-f]{{8}}")
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return []
    return [path.with_name(name) for name in sorted(names) if pattern.fullmatch(name)]


def _same_place(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the one at ``path``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _save_lock(path: Path):
    """Hold the lock of saves to ``path``: an exclusive flock on ``.<name>.lock``. Its holder
    removes the file before releasing it, so a waiter that then gets the lock of a removed
    file (it is no longer the one at the lock's name) opens the name again."""
    lock = path.with_name(f".{path.name}.lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_place(fd, lock):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        os.unlink(lock)
        os.close(fd)


def _discard(path: Path, folder: Path) -> None:
    """Remove ``folder`` beside ``path``: renamed to a ``.tmp-`` name first, so that no
    ``.old-`` folder is ever seen half removed."""
    trash = _new_sibling(path, _TMP)
    os.rename(folder, trash)
    shutil.rmtree(trash)


def _tidy(path: Path) -> None:
    """Under the save lock: restore the backup of a save stopped between its two renames
    (``path`` missing), remove the backups of completed ones (``path`` holds a save) and
    every temporary folder."""
    backups = _siblings(path, _OLD)
    if backups and not os.path.lexists(path):
        os.rename(backups.pop(), path)
    if _holds_a_save(path):
        for backup in backups:
            _discard(path, backup)
    for folder in _siblings(path, _TMP):
        shutil.rmtree(folder)


def _fsync(path: Path) -> None:
    """Flush the file or folder ``path`` to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_save(path: Path, groups: dict, settings: str) -> None:
    """Write a save (``groups`` to arrays.nc, the text ``settings`` to settings.json) to the
    folder ``path`` atomically (see the module docstring); refuse a file or a folder of
    other files."""
    path = Path(os.path.realpath(path))
    _refuse_to_overwrite(path)  # before any work
    path.parent.mkdir(parents=True, exist_ok=True)
    with _save_lock(path):
        _tidy(path)
        _refuse_to_overwrite(path)  # what is there now, under the lock
        new = _new_sibling(path, _TMP)
        try:
            new.mkdir()
            raw = settings.encode()
            write_arrays(new / ARRAYS, {**groups, _DIGEST_GROUP: {_DIGEST: _digest(raw)}})
            (new / SETTINGS).write_bytes(raw)
            for written in (new / ARRAYS, new / SETTINGS, new):
                _fsync(written)
            if _holds_a_save(path):
                os.rename(path, _new_sibling(path, _OLD))
            os.rename(new, path)  # path is missing or an empty folder now
            _fsync(path.parent)
        finally:
            _tidy(path)


@contextlib.contextmanager
def opened(path: Path):
    """The settings (checked as ``_parse_settings`` does) and the open arrays.nc (None if
    missing) of the save at ``path``, both from one folder (see ``_open_files``). When the
    ``with`` block has read them without error, the two files must have been written
    together (``_check_together``)."""
    settings, arrays = _open_files(path)
    try:
        if settings is None:
            raise FileNotFoundError(f"{path} is not a saved ppgpc model: {SETTINGS} is "
                                    "missing")
        yield _parse_settings(path / SETTINGS, settings), arrays
        # after the entries' own checks, which name what is wrong more precisely
        if arrays is not None:
            _check_together(path, settings, arrays)
    finally:
        if arrays is not None:
            arrays.close()


def _open_files(path: Path):
    """(bytes of settings.json, open arrays.nc), each None if missing, of the save at
    ``path``: both from the folder at ``path`` or, while it is missing, from its backup. A
    folder swapped away before both are open is looked up again."""
    real = Path(os.path.realpath(path))
    for _ in range(_OPEN_TRIES):
        folder = real if os.path.lexists(real) else next(iter(_siblings(real, _OLD)), None)
        if folder is None:
            if os.path.lexists(real):  # a save renamed its new folder in meanwhile
                continue
            raise FileNotFoundError(f"{path} is not a saved ppgpc model: it does not exist")
        files = _open_in(path, folder)
        if files is not None:
            return files
    raise RuntimeError(f"cannot load {path}: other saves kept replacing it while it was "
                       "being opened")


def _open_in(path: Path, folder: Path):
    """(bytes of settings.json, open arrays.nc), each None if missing, of ``folder``, or
    None if ``folder`` was moved away before both were open."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise FileNotFoundError(f"{path} is not a saved ppgpc model: it is a file, not a "
                                "folder") from None
    opener = functools.partial(os.open, dir_fd=dir_fd)
    settings = arrays = None
    try:
        with contextlib.suppress(FileNotFoundError):
            with open(SETTINGS, "rb", opener=opener) as file:
                settings = file.read()
        with contextlib.suppress(FileNotFoundError):
            arrays = open(ARRAYS, "rb", opener=opener)  # closed by opened
        if (settings is None or arrays is None) and not _same_place(dir_fd, folder):
            if arrays is not None:
                arrays.close()
            return None
        return settings, arrays
    finally:
        os.close(dir_fd)


# ------------------------------------------------------------------ the arrays file
_DIGEST_GROUP = "settings_digest"
"""The group of arrays.nc holding the SHA-256 digest of the settings.json written with it:
the two files of a save prove they belong together (saves from before it have none)."""
_DIGEST = "sha256"


def _digest(raw: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(raw).digest(), dtype=np.uint8)


def _check_together(path: Path, settings: bytes, arrays) -> None:
    """Refuse a save whose arrays.nc was written with another settings.json (a file copied
    in from another save, or a settings.json edited by hand)."""
    try:
        recorded = read_group(path / ARRAYS, arrays, _DIGEST_GROUP)[_DIGEST]
    except (ValueError, KeyError):
        return  # a save from before the digest (the other group reads name any damage)
    if recorded.tobytes() != _digest(settings).tobytes():
        raise ValueError(f"{path}: the save is damaged: {ARRAYS} was written with another "
                         f"{SETTINGS} (a file copied from another save, or edited); save the "
                         "model again")


def dataset(arrays: dict) -> xr.Dataset:
    """One variable per array, each with its own dim names (no shared-size constraints)."""
    return xr.Dataset({name: xr.DataArray(np.asarray(value),
                                          dims=[f"{name}_dim_{i}" for i in range(np.ndim(value))])
                       for name, value in arrays.items()})


def write_arrays(path: Path, groups: dict) -> None:
    """Write ``groups`` ({group: {name: array}}) to the netCDF file ``path``, a group each."""
    mode = "w"
    for group, arrays in groups.items():
        dataset(arrays).to_netcdf(path, group=group, mode=mode, engine="h5netcdf")
        mode = "a"


def read_group(path: Path, arrays, group: str) -> dict:
    """The arrays of ``group`` of the open arrays.nc ``arrays`` (None if missing), which
    is at ``path``."""
    if arrays is None:
        raise FileNotFoundError(f"{path.parent} is not a complete ppgpc save: {path.name} is "
                                "missing")
    arrays.seek(0)
    try:
        with xr.open_dataset(arrays, group=group, engine="h5netcdf", decode_times=False,
                             mask_and_scale=False) as ds:
            return {name: np.asarray(ds[name].values) for name in ds.data_vars}
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"cannot read group {group!r} of {path}: the save is damaged or "
                         f"not a ppgpc save ({type(err).__name__}: {err})") from None

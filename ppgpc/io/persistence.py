"""Save and load fitted results and estimators without pickle: netCDF arrays plus JSON.

A saved model is a folder with two files:

* ``settings.json``: what it is (``"kind"``: ``"fit_result"`` or ``"estimator"``), the model
  name, kernel, method, predictive kind, settings, run facts, seed and, for an estimator,
  its class, constructor parameters and small fitted attributes (``classes_``, the
  standardiser, ``epsilon_`` ...), and, for an estimator fitted on a CSV table by
  ``ppgpc fit --csv``, the ``table`` entry: its label column, id column and dropped
  columns (``TABLE_ENTRIES``), so that ``ppgpc predict`` writes the ids back. Arrays in
  it are tagged lists whose float64 values round-trip exactly (Python writes the shortest
  repr that reads back to the same double).
* ``arrays.nc``: the ``FitResult`` arrays in netCDF groups (h5netcdf engine):
  ``hypers`` (chain, draw, ...) by site name, ``fields`` (the latent draws and any other
  array field of ``FitResult``), ``sample_stats`` and ``data`` (the training ``X`` and
  ``y`` and every array leaf of the model's prepared data), and ``settings_digest``, the
  SHA-256 digest of the settings.json written with it, so that a load refuses the arrays
  of another save (``ppgpc.io.folders``; saves from before it have none).

Loading rebuilds the prepared data with the model's own ``prepare(X, y, C, **model_options)``
(so static structure such as GPD's options comes back), then puts the saved array leaves in
place, so a loaded model holds exactly the saved numbers and predicts bit for bit what the
saved one did (same seed, same keys, same compiled functions).

Loading trusts nothing in the folder: it accepts only what a save writes (the format and
its allow-lists are in ``ppgpc.io.format``): ppgpc's estimator and kernel classes, the
fitted attributes its estimators set (types checked, ``classes_`` and the feature count
against the saved posterior), exactly the constructor's parameters and FitResult's fields.
Anything else is a ValueError saying the save is damaged and which entry. Saving refuses a
folder that holds anything but an earlier ppgpc save (another tool's ``settings.json``
included).

Saving is atomic and loading reads one complete save (``ppgpc.io.folders``).

Example:
    >>> import numpy as np, tempfile
    >>> from ppgpc import ILRGPClassifier, load
    >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = ILRGPClassifier(epsilon=0.99).fit(X, y)
    >>> path = clf.save(tempfile.mkdtemp() + "/clf")
    >>> bool(np.array_equal(load(path).predict_proba(X), clf.predict_proba(X)))
    True
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ppgpc.infer.records import FitInfo
from ppgpc.infer.results import FitResult
from ppgpc.io.legacy import upgrade
from ppgpc.io.folders import ARRAYS, SETTINGS, opened, read_group, write_save
from ppgpc.io.format import (FITTED_ATTRIBUTES, FORMAT_VERSION, KINDS, check_entries, damaged,
                             decode, encode, fitted_from, is_instance, kernel_description,
                             kernel_from, short)
from ppgpc.models import get_spec

__all__ = ["save_result", "load_result", "save_estimator", "load_estimator", "load",
           "load_with_table", "TABLE_ENTRIES",
           "constructor_params"]

# This module sits below the estimators: it never imports them. A caller that saves or
# loads estimators passes the classes a save may name (``ppgpc.estimators.ESTIMATORS``);
# ``ppgpc.save`` and ``ppgpc.load`` (``ppgpc.estimators.saving``) do so.

_SPECIAL_FIELDS = ("spec", "kernel", "data", "input_scaling")


def _array_leaves(data) -> list:
    """Positions and values of the array leaves of a prepared-data pytree."""
    leaves = jax.tree_util.tree_leaves(data)
    return [(i, leaf) for i, leaf in enumerate(leaves)
            if isinstance(leaf, (np.ndarray, jax.Array))]


# ------------------------------------------------------------------ FitResult
def _result_payload(result) -> tuple[dict, dict]:
    """(JSON payload, {netCDF group: arrays}) of a FitResult."""
    spec = result.spec
    try:
        registered = get_spec(spec.name)
    except ValueError:
        registered = None
    if registered is not spec:
        raise ValueError(f"model spec {spec.name!r} is not registered in ppgpc.models; only "
                         "registered models can be saved (they are loaded by name)")
    model_options = result.settings.get("model_options", {})
    if decode(json.loads(json.dumps(encode(model_options)))) != model_options:
        raise ValueError(f"model_options {model_options!r} do not survive JSON; cannot save")
    payload = {"model": spec.name, "kernel": kernel_description(result.kernel),
               "num_classes": int(result.data.num_classes)}
    groups = {"data": {"X": np.asarray(result.data.X), "y": np.asarray(result.data.y)}}
    groups["data"].update({f"leaf_{i}": np.asarray(v) for i, v in _array_leaves(result.data)})
    scalars, fields = {}, {}
    for field in dataclasses.fields(result):
        name = field.name
        if name in _SPECIAL_FIELDS:
            continue
        value = getattr(result, name)
        if isinstance(value, (np.ndarray, jax.Array)):
            fields[name] = value
        elif name == "info":
            scalars[name] = value.to_dict()  # a FitInfo as its JSON form
        elif isinstance(value, dict) and name != "settings":
            groups[name] = dict(value)  # hypers, sample_stats, any dict of arrays
        else:
            scalars[name] = value
    groups["fields"] = fields
    payload["scalars"] = scalars
    payload["dict_fields"] = sorted(k for k in groups if k not in ("data", "fields"))
    return payload, groups


def save_result(result, path) -> Path:
    """Save a ``FitResult`` to the folder ``path``: created if new; an earlier save there is
    replaced atomically (see the module docstring), while a file or a folder of other files
    is refused.

    Returns:
        The folder.
    """
    payload, groups = _result_payload(result)
    settings = {"format_version": FORMAT_VERSION, "kind": "fit_result", "result": payload}
    write_save(Path(path), groups, json.dumps(encode(settings), indent=1, sort_keys=True))
    return Path(path)


_RESULT_ENTRIES = {"model": str, "kernel": dict, "num_classes": int, "scalars": dict,
                   "dict_fields": list}
"""What a save writes for a FitResult, by entry of settings.json, and its JSON type."""

_SCALAR_TYPES = {"method": str, "predictive_kind": str, "point_hypers": bool, "seed": int,
                 "settings": dict, "info": dict, "latent": type(None),
                 "inducing": type(None)}
"""The types of FitResult's non-array fields as saved under ``scalars`` (an array field is
a scalar entry only when it is None)."""


def _result_fields(where: Path, entry: str, payload: dict, arrays: Path, groups: list) -> None:
    """Check that the saved fields (the ``scalars`` and ``dict_fields`` of ``payload``, the
    ``groups`` of arrays.nc's "fields") name FitResult's fields, each once, with the types
    of ``_SCALAR_TYPES``, and that every field without a default is there."""
    fields = {f.name: f for f in dataclasses.fields(FitResult)
              if f.name not in _SPECIAL_FIELDS}
    scalars, dict_fields = payload["scalars"], payload["dict_fields"]
    for name in scalars:
        if name not in fields:
            raise damaged(where, f"{entry}.scalars", f"has {name!r}, which is not a field "
                          "of FitResult")
        if name in _SCALAR_TYPES and not is_instance(scalars[name], _SCALAR_TYPES[name]):
            raise damaged(where, f"{entry}.scalars.{name}", f"is {short(scalars[name])}, "
                          f"not of type {_SCALAR_TYPES[name].__name__}")
    for place, names in ((where, dict_fields), (arrays, groups)):
        for name in names:
            if not isinstance(name, str) or name not in fields or name in scalars:
                raise damaged(place, f"{entry}.dict_fields" if place == where else "fields",
                              f"names {short(name)}, which is not an array field of "
                              "FitResult (or is saved twice)")
    given = set(scalars) | set(dict_fields) | set(groups)
    required = [n for n, f in fields.items() if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING and n not in given]
    if required:
        raise damaged(where, f"{entry}.scalars.{required[0]}", "is missing")
    if scalars.get("seed", 0) < 0:
        raise damaged(where, f"{entry}.scalars.seed", f"is {scalars['seed']}, not >= 0")
    options = scalars.get("settings", {}).get("model_options", {})
    if not isinstance(options, dict):
        raise damaged(where, f"{entry}.scalars.settings.model_options",
                      f"is {short(options)}, not a dict")


def _result_from(path: Path, payload, arrays, entry: str = "result"):
    """The FitResult of the save at ``path``, every entry of its ``payload`` (``entry`` of
    settings.json) and of its open arrays.nc ``arrays`` checked against what
    ``save_result`` writes."""
    where, nc = path / SETTINGS, path / ARRAYS
    payload = check_entries(where, entry, payload, _RESULT_ENTRIES)
    try:
        spec = get_spec(payload["model"])
    except ValueError as err:
        raise damaged(where, f"{entry}.model", f"names no ppgpc model: {err}") from None
    try:
        kernel = kernel_from(payload["kernel"])
    except (TypeError, ValueError) as err:
        raise damaged(where, f"{entry}.kernel", str(err)) from None
    if payload["num_classes"] < 2:
        raise damaged(where, f"{entry}.num_classes", f"is {payload['num_classes']}, not >= 2")
    fields = read_group(nc, arrays, "fields")
    _result_fields(where, entry, payload, nc, sorted(fields))
    scalars = payload["scalars"]
    saved = read_group(nc, arrays, "data")
    if not {"X", "y"} <= set(saved):
        raise damaged(nc, "data", f"has {sorted(saved)}; a save writes X, y and the "
                      "prepared data's leaves")
    try:
        data = spec.prepare(saved["X"], saved["y"], payload["num_classes"],
                            **scalars.get("settings", {}).get("model_options", {}))
    except (TypeError, ValueError) as err:
        raise damaged(where, f"{entry}.scalars.settings.model_options",
                      f"does not prepare model {spec.name!r}: {err}") from None
    leaves, treedef = jax.tree_util.tree_flatten(data)
    positions = _array_leaves(data)
    if sorted(f"leaf_{i}" for i, _ in positions) != sorted(k for k in saved
                                                          if k.startswith("leaf_")):
        raise ValueError(f"{path}: the prepared data of {spec.name!r} no longer has the "
                         "saved structure (was the model changed since saving?)")
    for i, leaf in positions:
        value = saved[f"leaf_{i}"]
        if value.shape != tuple(leaf.shape):
            raise ValueError(f"{path}: prepared-data leaf {i} has shape {tuple(leaf.shape)} "
                             f"now, {value.shape} when saved")
        leaves[i] = jnp.asarray(value, dtype=leaf.dtype)
    data = jax.tree_util.tree_unflatten(treedef, leaves)
    kwargs = dict(scalars)
    if "info" in kwargs:
        try:
            kwargs["info"] = FitInfo.from_dict(kwargs["info"])
        except (TypeError, ValueError) as err:
            raise damaged(where, f"{entry}.scalars.info", f"is not a fit's record: {err}") \
                from None
    for name in payload["dict_fields"]:
        kwargs[name] = {k: jnp.asarray(v) if name == "hypers" else v
                        for k, v in read_group(nc, arrays, name).items()}
    kwargs.update({k: jnp.asarray(v) for k, v in fields.items()})
    try:
        return FitResult(spec=spec, kernel=kernel, data=data, **kwargs)
    except (TypeError, ValueError) as err:
        raise damaged(where, entry, f"does not make a FitResult: {err}") from None


def load_result(path):
    """Load a ``FitResult`` saved by ``save_result`` (or ``ppgpc.save``)."""
    path = Path(path)
    with opened(path) as (payload, arrays):
        if _kind(path, payload) != "fit_result":
            raise ValueError(f"{path} holds a saved {payload.get('kind')!r}, not a "
                             "FitResult; use ppgpc.load")
        return _result_from_save(path, payload, arrays)


# ------------------------------------------------------------------ estimators
def constructor_params(estimator) -> dict:
    """The constructor parameters as a save stores them (the estimator's
    ``_saved_params``: JSON-ready, e.g. a ``Selection`` as a dict)."""
    return estimator.saved_params()


def _params_from(where: Path, cls, params: dict) -> dict:
    """The constructor parameters of a save: exactly those of ``cls.__init__``."""
    names = set(_constructor_param_names(cls))
    unknown, missing = sorted(set(params) - names), sorted(names - set(params))
    if unknown:
        raise damaged(where, "params", f"has unknown parameter(s) {unknown}; "
                      f"{cls.__name__} takes {sorted(names)}")
    if missing:
        raise damaged(where, f"params.{missing[0]}", "is missing")
    return params


def _constructor_param_names(cls) -> list[str]:
    sig = inspect.signature(cls.__init__)
    return [name for name, p in sig.parameters.items()
            if name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


TABLE_ENTRIES = {"target": str, "id_column": (str, type(None)), "dropped": list}
"""The ``table`` entry of an estimator fitted on a CSV table: the label column, the column
of row identifiers (None without one) and the columns left out of the features."""


def _checked_table(where: Path, table) -> dict:
    """``table`` if it is what a save writes (``TABLE_ENTRIES``, dropped columns strings),
    else ``damaged`` naming the entry."""
    table = check_entries(where, "table", table, TABLE_ENTRIES)
    if not all(isinstance(c, str) for c in table["dropped"]):
        raise damaged(where, "table.dropped", "is not a list of column names")
    return table


def save_estimator(estimator, path, classes: dict, *, table: dict | None = None) -> Path:
    """Save a fitted ppgpc estimator to the folder ``path`` (created if new; an earlier save
    there is replaced atomically, see the module docstring, while a file or a folder of
    other files is refused).

    The constructor parameters and the fitted attributes (names ending in ``_``) go to
    ``settings.json``, the ``FitResult`` arrays to ``arrays.nc``.

    Args:
        estimator: a fitted estimator whose class is one of ``classes``.
        path: the folder.
        classes: the estimator classes a save may name, by class name
            (``ppgpc.estimators.ESTIMATORS``).
        table: for an estimator fitted on a CSV table, ``{"target", "id_column",
            "dropped"}`` (``TABLE_ENTRIES``); None otherwise.

    Raises:
        RuntimeError: the estimator is not fitted. ValueError/TypeError: something in it
            cannot be stored without pickle (e.g. a custom kernel object, or a fitted
            attribute that is not one of ``FITTED_ATTRIBUTES``).
    """
    check_is_fitted(estimator, "result_")
    name = type(estimator).__name__
    if classes.get(name) is not type(estimator):
        raise ValueError(f"{name} is not one of ppgpc's estimators {sorted(classes)}; "
                         "only those can be saved")
    fitted = {}
    for attr, value in vars(estimator).items():
        if not attr.endswith("_") or attr.startswith("_") or attr == "result_":
            continue
        if attr not in FITTED_ATTRIBUTES:
            raise ValueError(f"cannot save the fitted attribute {attr!r}: a save holds only "
                             f"those of ppgpc's estimators ({sorted(FITTED_ATTRIBUTES)})")
        if attr == "standardizer_" and value is not None:
            value = {"__standardizer__": value.to_dict()}
        fitted[attr] = value
    result_payload, groups = _result_payload(estimator.result_)
    path = Path(path)
    payload = {"format_version": FORMAT_VERSION, "kind": "estimator", "class": name,
               "params": constructor_params(estimator), "fitted": fitted,
               "result": result_payload}
    if table is not None:
        payload["table"] = _checked_table(Path("table"), dict(table))
    write_save(path, groups, json.dumps(encode(payload), indent=1, sort_keys=True))
    return path


_TOP_LEVEL = {"fit_result": {"format_version": int, "kind": str, "result": dict},
              "estimator": {"format_version": int, "kind": str, "class": str,
                            "params": dict, "fitted": dict, "result": dict}}
"""The top-level entries of settings.json for each kind of save."""


def _estimator_from(path: Path, payload: dict, arrays, classes: dict, expected=None):
    where = path / SETTINGS
    payload = {k: v for k, v in payload.items() if k != "table"}
    payload = check_entries(where, "", payload, _TOP_LEVEL["estimator"])
    cls = classes.get(payload["class"])
    if cls is None:
        raise damaged(where, "class", f"is {short(payload['class'])}, not one of ppgpc's "
                      f"estimators {sorted(classes)}")
    if expected is not None and not issubclass(cls, expected):
        raise TypeError(f"{path} holds a {cls.__name__}, not a {expected.__name__}")
    result = _result_from(path, payload["result"], arrays)
    params, fitted = payload["params"], dict(payload["fitted"])
    version = payload["format_version"]
    if version != FORMAT_VERSION:  # settings of an older format, translated
        saved = cls.__name__
        try:
            name, params, dropped = upgrade(cls.__name__, params, version,
                                            int(np.shape(result.data.X)[0]))
        except KeyError as err:
            raise damaged(where, f"params.{err.args[0]}", "is missing") from None
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        cls = classes[name]
        if expected is not None and not issubclass(cls, expected):
            raise TypeError(f"{path} holds a {saved} saved in format version {version}, "
                            f"which is now a {cls.__name__}, not a {expected.__name__}")
        fitted = {k: v for k, v in fitted.items() if k not in dropped}
    try:
        params = cls.params_from_saved(_params_from(where, cls, params))
    except (TypeError, ValueError) as err:
        if "the save is damaged" in str(err):
            raise
        raise damaged(where, "params", f"does not make a {cls.__name__}: {err}") from None
    estimator = cls(**params)
    vars(estimator).update(fitted_from(where, fitted, result))
    estimator.result_ = dataclasses.replace(
        result, input_scaling=getattr(estimator, "standardizer_", None))
    return estimator


def _kind(path: Path, payload: dict) -> str:
    kind = payload.get("kind")
    if kind not in KINDS:
        raise damaged(path / SETTINGS, "kind", f"is {short(kind)}, not one of {list(KINDS)}")
    return kind


def load_estimator(path, classes: dict, expected=None):
    """Load an estimator saved by ``save_estimator``; ``expected`` checks its class.

    Args:
        path: the save's folder.
        classes: the estimator classes a save may name, by class name
            (``ppgpc.estimators.ESTIMATORS``).
        expected: a class the loaded estimator must be an instance of, or None.

    Raises:
        FileNotFoundError: no save at ``path``. TypeError: a save of another class than
            ``expected``. ValueError: a save of a FitResult, or a damaged save: any entry
            that is not what a save writes (an unknown kernel or estimator class, fitted
            attribute or parameter, a missing entry, classes that do not match the saved
            posterior), named in the message.
    """
    path = Path(path)
    with opened(path) as (payload, arrays):
        if _kind(path, payload) != "estimator":
            raise ValueError(f"{path} holds a saved {payload.get('kind')!r}, not an "
                             "estimator")
        return _estimator_from(path, payload, arrays, classes, expected)


def load_with_table(path, classes: dict):
    """(what ``load`` loads, its ``table`` entry) from one read of the save at ``path``: the
    table entry (``TABLE_ENTRIES``) checked, None for a save without one (an estimator not
    fitted on a CSV table, or a ``FitResult``)."""
    path = Path(path)
    with opened(path) as (payload, arrays):
        if _kind(path, payload) != "estimator":
            return _result_from_save(path, payload, arrays), None
        table = payload.get("table")
        if table is not None:
            table = _checked_table(path / SETTINGS, table)
        return _estimator_from(path, payload, arrays, classes), table


def load(path, classes: dict):
    """Load whatever ppgpc saved at ``path``: an estimator (one of ``classes``, by class
    name) or a ``FitResult`` (errors as for ``load_estimator``); ``ppgpc.load`` passes
    ppgpc's estimator classes."""
    return load_with_table(path, classes)[0]


def _result_from_save(path: Path, payload: dict, arrays):
    payload = check_entries(path / SETTINGS, "", payload, _TOP_LEVEL["fit_result"])
    return _result_from(path, payload["result"], arrays)

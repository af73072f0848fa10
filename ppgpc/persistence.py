"""Save and load fitted results and estimators without pickle: netCDF arrays plus JSON.

A saved model is a folder with two files:

* ``settings.json``: what it is (``"kind"``: ``"fit_result"`` or ``"estimator"``), the model
  name, kernel, method, predictive kind, settings, run facts, seed and, for an estimator,
  its class, constructor parameters and small fitted attributes (``classes_``, the
  standardiser, ``epsilon_`` ...). Arrays in it are tagged lists whose float64 values
  round-trip exactly (Python writes the shortest repr that reads back to the same double).
* ``arrays.nc``: the ``FitResult`` arrays in netCDF groups (h5netcdf engine):
  ``hypers`` (chain, draw, ...) by site name, ``fields`` (the latent draws and any other
  array field of ``FitResult``), ``sample_stats`` and ``data`` (the training ``X`` and
  ``y`` and every array leaf of the model's prepared data).

Loading rebuilds the prepared data with the model's own ``prepare(X, y, C, **model_options)``
(so static structure such as GPD's options comes back), then puts the saved array leaves in
place, so a loaded model holds exactly the saved numbers and predicts bit for bit what the
saved one did (same seed, same keys, same compiled functions).

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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

__all__ = ["save_result", "load_result", "save_estimator", "load_estimator", "load",
           "FORMAT_VERSION"]

FORMAT_VERSION = 1
"""Version of the folder layout; bumped when it changes incompatibly."""

_SETTINGS = "settings.json"
_ARRAYS = "arrays.nc"
_SPECIAL_FIELDS = ("spec", "kernel", "data")


# ------------------------------------------------------------------ tagged JSON values
def _encode(value):
    """JSON-ready form of a value: arrays, tuples and non-string-keyed dicts are tagged."""
    if isinstance(value, (np.ndarray, jax.Array)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufUO":
            raise TypeError(f"cannot store an array of dtype {arr.dtype} in JSON")
        return {"__ndarray__": _encode(arr.tolist()), "dtype": arr.dtype.str,
                "shape": list(arr.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return {"__items__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "evaluate") and hasattr(value, "param_shapes"):  # make_kernel's test
        return {"__kernel__": _kernel_description(value)}   # raises for foreign classes
    raise TypeError(f"cannot store a {type(value).__name__} in JSON: {value!r}")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        dtype = np.dtype(value["dtype"])
        return np.asarray(_decode(value["__ndarray__"]), dtype=dtype).reshape(value["shape"])
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__items__" in value:
        return {_hashable(_decode(k)): _decode(v) for k, v in value["__items__"]}
    if "__kernel__" in value:
        return _kernel_from(value["__kernel__"])
    return {k: _decode(v) for k, v in value.items()}


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def _write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(_encode(payload), indent=1, sort_keys=True))


def _read_json(path: Path) -> dict:
    if not path.parent.exists():
        raise FileNotFoundError(f"{path.parent} is not a saved ppgpc model: it does not "
                                "exist")
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} is not a saved ppgpc model: {path.name} is "
                                "missing")
    try:
        payload = _decode(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); the save is damaged") from None
    if not isinstance(payload, dict):
        raise ValueError(f"{path} holds a JSON {type(payload).__name__}, not a ppgpc save's "
                         "settings")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path} has format version {version!r}; this ppgpc reads version "
                         f"{FORMAT_VERSION}")
    return payload


# ------------------------------------------------------------------ netCDF groups
def _dataset(arrays: dict) -> xr.Dataset:
    """One variable per array, each with its own dim names (no shared-size constraints)."""
    return xr.Dataset({name: xr.DataArray(np.asarray(value),
                                          dims=[f"{name}_dim_{i}" for i in range(np.ndim(value))])
                       for name, value in arrays.items()})


def _read_group(path: Path, group: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent} is not a complete ppgpc save: {path.name} is "
                                "missing")
    try:
        with xr.open_dataset(path, group=group, engine="h5netcdf", decode_times=False,
                             mask_and_scale=False) as ds:
            return {name: np.asarray(ds[name].values) for name in ds.data_vars}
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"cannot read group {group!r} of {path}: the save is damaged or "
                         f"not a ppgpc save ({type(err).__name__}: {err})") from None


def _kernel_description(kernel) -> dict:
    from ppgpc import kernels

    cls = type(kernel)
    if getattr(kernels, cls.__name__, None) is not cls or not dataclasses.is_dataclass(kernel):
        raise ValueError(f"only the kernels of ppgpc.kernels can be saved; got "
                         f"{cls.__module__}.{cls.__name__}")
    return {"class": cls.__name__, "fields": dataclasses.asdict(kernel)}


def _kernel_from(description: dict):
    from ppgpc import kernels

    cls = getattr(kernels, description["class"], None)
    if cls is None:
        raise ValueError(f"unknown kernel class {description['class']!r} in ppgpc.kernels")
    return cls(**description["fields"])


def _array_leaves(data) -> list:
    """Positions and values of the array leaves of a prepared-data pytree."""
    leaves = jax.tree_util.tree_leaves(data)
    return [(i, leaf) for i, leaf in enumerate(leaves)
            if isinstance(leaf, (np.ndarray, jax.Array))]


# ------------------------------------------------------------------ FitResult
def _result_payload(result) -> tuple[dict, dict]:
    """(JSON payload, {netCDF group: arrays}) of a FitResult."""
    from ppgpc.models import get_spec

    spec = result.spec
    try:
        registered = get_spec(spec.name)
    except ValueError:
        registered = None
    if registered is not spec:
        raise ValueError(f"model spec {spec.name!r} is not registered in ppgpc.models; only "
                         "registered models can be saved (they are loaded by name)")
    model_options = result.settings.get("model_options", {})
    if _decode(json.loads(json.dumps(_encode(model_options)))) != model_options:
        raise ValueError(f"model_options {model_options!r} do not survive JSON; cannot save")
    payload = {"model": spec.name, "kernel": _kernel_description(result.kernel),
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
        elif isinstance(value, dict) and name not in ("settings", "info"):
            groups[name] = dict(value)  # hypers, sample_stats, any dict of arrays
        else:
            scalars[name] = value
    groups["fields"] = fields
    payload["scalars"] = scalars
    payload["dict_fields"] = sorted(k for k in groups if k not in ("data", "fields"))
    return payload, groups


def _prepare_folder(path: Path) -> None:
    """Create the save folder ``path``, or check that an existing one may be overwritten:
    an empty folder or an earlier ppgpc save, never a file or a folder of other files."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"cannot save to {path}: it is a file; a ppgpc save is a folder")
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if p.name not in (_ARRAYS, _SETTINGS))
        if others and not (path / _SETTINGS).is_file():
            raise ValueError(f"cannot save to {path}: the folder holds other files "
                             f"({others[:5]}) and is not a ppgpc save; choose an empty or "
                             "new folder")
    path.mkdir(parents=True, exist_ok=True)


def _write_result_arrays(path: Path, groups: dict) -> None:
    mode = "w"
    for group, arrays in groups.items():
        _dataset(arrays).to_netcdf(path, group=group, mode=mode, engine="h5netcdf")
        mode = "a"


def save_result(result, path) -> Path:
    """Save a ``FitResult`` to the folder ``path``: created if new; an earlier save there is
    overwritten, while a file or a folder of other files is refused.

    Returns:
        The folder.
    """
    path = Path(path)
    payload, groups = _result_payload(result)
    _prepare_folder(path)
    _write_result_arrays(path / _ARRAYS, groups)
    _write_json(path / _SETTINGS, {"format_version": FORMAT_VERSION, "kind": "fit_result",
                                   "result": payload})
    return path


def _result_from(path: Path, payload: dict):
    from ppgpc.infer.results import FitResult
    from ppgpc.models import get_spec

    spec = get_spec(payload["model"])
    kernel = _kernel_from(payload["kernel"])
    scalars = payload["scalars"]
    arrays = path / _ARRAYS
    saved = _read_group(arrays, "data")
    data = spec.prepare(saved["X"], saved["y"], payload["num_classes"],
                        **scalars["settings"].get("model_options", {}))
    leaves, treedef = jax.tree_util.tree_flatten(data)
    positions = _array_leaves(data)
    if sorted(i for i, _ in positions) != sorted(int(k[5:]) for k in saved if
                                                 k.startswith("leaf_")):
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
    for name in payload["dict_fields"]:
        kwargs[name] = {k: jnp.asarray(v) if name == "hypers" else v
                        for k, v in _read_group(arrays, name).items()}
    kwargs.update({k: jnp.asarray(v) for k, v in _read_group(arrays, "fields").items()})
    return FitResult(spec=spec, kernel=kernel, data=data, **kwargs)


def load_result(path):
    """Load a ``FitResult`` saved by ``save_result`` (or ``FitResult.save``)."""
    path = Path(path)
    payload = _read_json(path / _SETTINGS)
    if payload.get("kind") != "fit_result":
        raise ValueError(f"{path} holds a saved {payload.get('kind')!r}, not a FitResult; "
                         "use ppgpc.load")
    return _result_from(path, payload["result"])


# ------------------------------------------------------------------ estimators
def _constructor_params(estimator) -> dict:
    sig = inspect.signature(type(estimator).__init__)
    return {name: getattr(estimator, name) for name, p in sig.parameters.items()
            if name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _estimator_class(name: str):
    import ppgpc

    cls = getattr(ppgpc, name, None)
    from ppgpc.estimators import GPClassifierBase

    if not (isinstance(cls, type) and issubclass(cls, GPClassifierBase)):
        raise ValueError(f"{name!r} is not a ppgpc estimator class")
    return cls


def save_estimator(estimator, path) -> Path:
    """Save a fitted ppgpc estimator to the folder ``path`` (created if new; an earlier save
    there is overwritten, while a file or a folder of other files is refused).

    The constructor parameters and the fitted attributes (names ending in ``_``) go to
    ``settings.json``, the ``FitResult`` arrays to ``arrays.nc``.

    Raises:
        RuntimeError: the estimator is not fitted. ValueError/TypeError: something in it
            cannot be stored without pickle (e.g. a custom kernel object).
    """
    import ppgpc

    estimator._check_fitted()
    name = type(estimator).__name__
    if getattr(ppgpc, name, None) is not type(estimator):
        raise ValueError(f"{name} is not exported by ppgpc; only ppgpc's estimators can be "
                         "saved")
    fitted = {}
    for attr, value in vars(estimator).items():
        if not attr.endswith("_") or attr.startswith("_") or attr == "result_":
            continue
        if attr == "standardizer_" and value is not None:
            value = {"__standardizer__": value.to_dict()}
        fitted[attr] = value
    result_payload, groups = _result_payload(estimator.result_)
    path = Path(path)
    payload = {"format_version": FORMAT_VERSION, "kind": "estimator", "class": name,
               "params": _constructor_params(estimator), "fitted": fitted,
               "result": result_payload}
    text = json.dumps(_encode(payload), indent=1, sort_keys=True)  # fail before writing
    _prepare_folder(path)
    _write_result_arrays(path / _ARRAYS, groups)
    (path / _SETTINGS).write_text(text)
    return path


def _estimator_from(path: Path, payload: dict, expected=None):
    from ppgpc.datasets import Standardizer

    cls = _estimator_class(payload["class"])
    if expected is not None and not issubclass(cls, expected):
        raise TypeError(f"{path} holds a {cls.__name__}, not a {expected.__name__}")
    estimator = cls(**payload["params"])
    for attr, value in payload["fitted"].items():
        if isinstance(value, dict) and "__standardizer__" in value:
            value = Standardizer.from_dict(value["__standardizer__"])
        setattr(estimator, attr, value)
    estimator.result_ = _result_from(path, payload["result"])
    return estimator


def load_estimator(path, expected=None):
    """Load an estimator saved by ``save_estimator``; ``expected`` checks its class."""
    path = Path(path)
    payload = _read_json(path / _SETTINGS)
    if payload.get("kind") != "estimator":
        raise ValueError(f"{path} holds a saved {payload.get('kind')!r}, not an estimator")
    return _estimator_from(path, payload, expected)


def load(path):
    """Load whatever ppgpc saved at ``path``: an estimator or a ``FitResult``."""
    path = Path(path)
    payload = _read_json(path / _SETTINGS)
    if payload.get("kind") == "estimator":
        return _estimator_from(path, payload)
    if payload.get("kind") == "fit_result":
        return _result_from(path, payload["result"])
    raise ValueError(f"{path}: unknown saved kind {payload.get('kind')!r}")

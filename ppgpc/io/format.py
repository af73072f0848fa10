"""What a ppgpc save may hold in its settings.json, and nothing else.

* Tagged JSON values (``encode`` / ``decode``): arrays, tuples, dicts with non-string keys
  and kernels are written as ``{"__ndarray__": ..., "dtype": ..., "shape": ...}``,
  ``{"__tuple__": [...]}``, ``{"__items__": [[key, value], ...]}`` and
  ``{"__kernel__": {"class": ..., "fields": ...}}``; ``decode`` reads back exactly these
  forms and raises a ValueError for any other use of a tag.
* Allow-lists: the kernel classes (``KERNELS``) and fitted attributes
  (``FITTED_ATTRIBUTES``, each with the check of its type) a save may name. A loaded file
  is never trusted to name a class or an attribute by itself.
* ``check_entries`` and ``damaged``: the errors that say a save is damaged and which entry.

``ppgpc.io.persistence`` writes and reads the folders; this module holds the format.
"""

from __future__ import annotations

import dataclasses
import numbers
from pathlib import Path

import jax
import numpy as np

from ppgpc.datasets import Standardizer
from ppgpc.gp.kernels import RBF, Matern52

__all__ = ["FORMAT_VERSION", "READABLE_VERSIONS", "KINDS", "encode", "decode", "KERNELS",
           "kernel_description", "kernel_from", "FITTED_ATTRIBUTES", "fitted_from", "check_entries",
           "damaged", "is_instance", "short"]

FORMAT_VERSION = 2
"""Version of the folder layout; bumped when it changes incompatibly. Version 2: estimator
settings with a ``selection`` instead of grid and validation options, a
``progress`` option, SVGP's SVI settings in ``inference_options``)."""

READABLE_VERSIONS = (1, 2)
"""Versions this ppgpc loads. A FitResult save is the same in both; an estimator saved in
version 1 has its settings translated (``ppgpc.io.legacy``), or the load fails
naming the version and the setting that has no equivalent."""

KINDS = ("fit_result", "estimator")
"""What a save holds: a ``FitResult`` or an estimator."""


_ARRAY_KINDS = "biufUO"
"""dtype kinds an array in settings.json may have (those ``encode`` writes)."""

KERNELS = {cls.__name__: cls for cls in (RBF, Matern52)}
"""The kernel classes a save may name: saved by class name and fields, loaded from here
(never looked up as any attribute of a module)."""


def encode(value):
    """JSON-ready form of a value: arrays, tuples and non-string-keyed dicts are tagged."""
    if isinstance(value, (np.ndarray, jax.Array)):
        arr = np.asarray(value)
        if arr.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"cannot store an array of dtype {arr.dtype} in JSON")
        return {"__ndarray__": encode(arr.tolist()), "dtype": arr.dtype.str,
                "shape": list(arr.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"__items__": [[encode(k), encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "evaluate") and hasattr(value, "param_shapes"):  # make_kernel's test
        return {"__kernel__": kernel_description(value)}   # raises for foreign classes
    raise TypeError(f"cannot store a {type(value).__name__} in JSON: {value!r}")


class _MalformedEntry(ValueError):
    """A tagged entry of settings.json that is not what ``encode`` writes (its message
    names the entry)."""


def decode(value, entry: str = ""):
    """The value ``encode`` wrote.

    Args:
        value: parsed JSON.
        entry: where ``value`` sits in the file, a dotted path (for error messages).

    Raises:
        ValueError: a tagged entry that ``encode`` would not write (a malformed array, an
            unknown kernel class ...), naming the entry.
    """
    if isinstance(value, list):
        return [decode(v, f"{entry}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if not _TAGS.intersection(value):
        return {k: decode(v, f"{entry}.{k}" if entry else k) for k, v in value.items()}
    try:
        return _from_tagged(value, entry)
    except _MalformedEntry:
        raise
    except (TypeError, ValueError) as err:
        raise _MalformedEntry(f"entry {entry or '(top level)'!r} {err}") from None


_TAGS = {"__ndarray__", "__tuple__", "__items__", "__kernel__"}


def _from_tagged(value: dict, entry: str):
    if "__ndarray__" in value:
        return _array_from(value)
    if "__tuple__" in value:
        return tuple(decode(v, f"{entry}[{i}]")
                     for i, v in enumerate(_tagged(value, "__tuple__", list)))
    if "__items__" in value:
        items = _tagged(value, "__items__", list)
        if not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
            raise ValueError("is not a list of [key, value] pairs")
        return {_hashable(decode(k, entry)): decode(v, f"{entry}[{k!r}]") for k, v in items}
    return kernel_from(_tagged(value, "__kernel__", dict))


def _tagged(value: dict, tag: str, kind: type):
    """The content of a tagged entry ``{tag: content}`` (nothing else beside the tag)."""
    if set(value) != {tag} or not isinstance(value[tag], kind):
        raise ValueError(f"is not {{{tag!r}: <a {kind.__name__}>}}; it has keys "
                         f"{sorted(value)}")
    return value[tag]


def _array_from(value: dict) -> np.ndarray:
    if set(value) != {"__ndarray__", "dtype", "shape"}:
        raise ValueError(f"is an array without '__ndarray__', 'dtype' and 'shape' (it has "
                         f"{sorted(value)})")
    try:
        dtype = np.dtype(value["dtype"])
    except TypeError:
        raise ValueError(f"is an array of dtype {short(value['dtype'])}, not a NumPy "
                         "dtype") from None
    shape = value["shape"]
    if dtype.kind not in _ARRAY_KINDS or not (
            isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
        raise ValueError(f"is an array of dtype {dtype} and shape {short(shape)}; a save "
                         f"writes dtypes of kinds {list(_ARRAY_KINDS)} and a list of sizes")
    try:
        return np.asarray(decode(value["__ndarray__"]), dtype=dtype).reshape(shape)
    except (TypeError, ValueError) as err:
        raise ValueError(f"is an array whose values do not fit its dtype {dtype} and "
                         f"shape {shape}: {err}") from None


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def kernel_description(kernel) -> dict:
    """A kernel of ``ppgpc.gp.kernels`` as JSON: ``{"class": name, "fields": {...}}``, which
    ``kernel_from`` reads back; any other class is a ValueError."""
    cls = type(kernel)
    if KERNELS.get(cls.__name__) is not cls:
        raise ValueError(f"only the kernels of ppgpc.gp.kernels ({sorted(KERNELS)}) can be "
                         f"saved; got {cls.__module__}.{cls.__name__}")
    return {"class": cls.__name__, "fields": dataclasses.asdict(kernel)}


def kernel_from(description: dict):
    """The kernel a saved description names: a class of ``KERNELS`` and exactly its
    fields, each of the type of the field's default (an int is accepted for a float)."""
    if set(description) != {"class", "fields"} or not isinstance(description["fields"], dict):
        raise ValueError(f"is not a kernel's 'class' and dict of 'fields' (it has "
                         f"{sorted(description)})")
    name, fields = description["class"], description["fields"]
    cls = KERNELS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"names kernel class {short(name)}, not one of ppgpc's kernels "
                         f"{sorted(KERNELS)}")
    expected = {f.name: type(f.default) for f in dataclasses.fields(cls)}
    if set(fields) != set(expected):
        raise ValueError(f"gives kernel {name} the fields {sorted(fields)}; a saved {name} "
                         f"has {sorted(expected)}")
    for field, kind in expected.items():
        if not is_instance(fields[field], kind):
            raise ValueError(f"gives kernel {name}'s field {field!r} the value "
                             f"{short(fields[field])}, not of type {kind.__name__}")
    return cls(**fields)


def is_instance(value, kind: type) -> bool:
    """isinstance, where a bool is not a number and an int is a float."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real)
    return isinstance(value, kind)


def short(value, limit: int = 80) -> str:
    """repr of a value for an error message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def damaged(where: Path, entry: str, problem: str) -> ValueError:
    """The error of a save whose ``entry`` (a dotted path into settings.json, or a group of
    arrays.nc) is not what a save writes."""
    return ValueError(f"{where}: the save is damaged: entry {entry!r} {problem}")


def check_entries(where: Path, entry: str, value, expected: dict) -> dict:
    """``value``, if it is a dict with exactly the keys of ``expected`` and each value of
    the type given there (a tuple of types: any of them); else ``damaged`` naming it."""
    if not isinstance(value, dict):
        raise damaged(where, entry, f"is a {type(value).__name__}, not a dict")
    missing = sorted(set(expected) - set(value))
    unknown = sorted(set(value) - set(expected))
    if missing:
        raise damaged(where, f"{entry}.{missing[0]}" if entry else missing[0], "is missing")
    if unknown:
        raise damaged(where, entry or "(top level)", f"has unknown entries {unknown}; a save "
                      f"writes {sorted(expected)}")
    for key, kinds in expected.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if not any(is_instance(value[key], kind) for kind in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise damaged(where, f"{entry}.{key}" if entry else key,
                          f"is {short(value[key])}, not of type {names}")
    return value


def _classes(value) -> np.ndarray:
    if not (isinstance(value, np.ndarray) and value.ndim == 1 and value.size >= 2):
        raise ValueError("is not a 1-D array of at least two class labels")
    try:
        ordered = np.array_equal(np.unique(value), value)
    except TypeError:
        ordered = False
    if not ordered:
        raise ValueError("does not hold each class once, sorted, as fit sets it")
    return value


def _count(value, minimum: int = 1) -> int:
    if not is_instance(value, int) or value < minimum:
        raise ValueError(f"is {short(value)}, not an integer >= {minimum}")
    return value


def _iterations(value) -> int:
    return _count(value, minimum=0)


def _optional_number(value):
    if value is not None and not (is_instance(value, float) and np.isfinite(value)):
        raise ValueError(f"is {short(value)}, not a finite number or None")
    return value


def _optional_numbers(value):
    """A number, a 1-D float array (one per class or coordinate) or None."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind != "f" or not np.all(np.isfinite(value)):
            raise ValueError("is not a 1-D array of finite numbers")
        return value
    return _optional_number(value)


def _optional_scores(value):
    """None, or {grid value: score}, both numbers."""
    if value is not None and not (isinstance(value, dict) and all(
            is_instance(k, float) and is_instance(v, float) for k, v in value.items())):
        raise ValueError(f"is {short(value)}, not a dict of numbers or None")
    return value


def _optional_text(value):
    """None, or a short text (a phrase of the fit's report)."""
    if value is not None and not (isinstance(value, str) and len(value) <= 1000):
        raise ValueError(f"is {short(value)}, not a text or None")
    return value


def _standardizer(value):
    if value is None:
        return None
    if not (isinstance(value, dict) and set(value) == {"__standardizer__"}
            and isinstance(value["__standardizer__"], dict)):
        raise ValueError("is not a saved Standardizer ({'__standardizer__': {mean, scale}})")
    return Standardizer.from_dict(value["__standardizer__"])


def _feature_names(value) -> np.ndarray:
    if not (isinstance(value, np.ndarray) and value.ndim == 1
            and all(isinstance(v, str) for v in value.tolist())):
        raise ValueError("is not a 1-D array of feature names (strings)")
    return value


FITTED_ATTRIBUTES = {
    "classes_": _classes,
    "n_features_in_": _count,
    "standardizer_": _standardizer,
    "noise_scale_": _optional_numbers,
    "epsilon_": _optional_number,
    "epsilon_scores_": _optional_scores,
    "tau_": _optional_number,
    "tau_scores_": _optional_scores,
    "noise_std_": _optional_number,
    "alpha_eps_": _optional_number,
    "alpha_eps_scores_": _optional_scores,
    "sparse_instead_": _optional_text,
    # scikit-learn's: the column names of a DataFrame X, the iterations of the fit
    "feature_names_in_": _feature_names,
    "n_iter_": _iterations,
}
"""The fitted attributes a save may hold, each with the check of its loaded value (which
returns the value to set); anything else in ``fitted`` is refused on loading and on
saving. Every estimator sets the first three."""

_REQUIRED_FITTED = ("classes_", "n_features_in_", "standardizer_")


def fitted_from(where: Path, fitted: dict, result) -> dict:
    """The fitted attributes of a save, each checked (``FITTED_ATTRIBUTES``) and against
    the saved FitResult: as many classes as it has, as many features as its inputs."""
    missing = [name for name in _REQUIRED_FITTED if name not in fitted]
    if missing:
        raise damaged(where, f"fitted.{missing[0]}", "is missing")
    out = {}
    for name, value in fitted.items():
        check = FITTED_ATTRIBUTES.get(name)
        if check is None:
            raise damaged(where, "fitted", f"has {name!r}, which is not a fitted attribute "
                          f"of ppgpc's estimators ({sorted(FITTED_ATTRIBUTES)})")
        try:
            out[name] = check(value)
        except ValueError as err:
            raise damaged(where, f"fitted.{name}", str(err)) from None
    if len(out["classes_"]) != result.num_classes:
        raise damaged(where, "fitted.classes_", f"has {len(out['classes_'])} classes, but "
                      f"the saved posterior has {result.num_classes}")
    num_features = int(np.shape(result.data.X)[1])
    sizes = {"n_features_in_": out["n_features_in_"]}
    if out["standardizer_"] is not None:
        sizes["standardizer_"] = out["standardizer_"].n_features
    if "feature_names_in_" in out:
        sizes["feature_names_in_"] = len(out["feature_names_in_"])
    for name, size in sizes.items():
        if size != num_features:
            raise damaged(where, f"fitted.{name}", f"is for {size} features, but the saved "
                          f"training inputs have {num_features}")
    return out

"""Model modules, one per classifier, installed as ``ppgpc.models``.

Each module exports a ``SPEC`` (a ``ppgpc.infer.ModelSpec``) that the driver runs.
"""

from __future__ import annotations

import importlib

__all__ = ["available", "get_spec"]

_MODULES = {
    "ilr_gp": "ppgpc.models.ilr_gp",
}


def available() -> tuple[str, ...]:
    """Names of the model modules."""
    return tuple(_MODULES)


def get_spec(name: str):
    """The ``ModelSpec`` of a model by name."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; available models: {list(_MODULES)}") from None
    return importlib.import_module(module).SPEC

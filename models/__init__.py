"""Model modules, one per classifier, installed as ``ppgpc.models``.

Each module exports a ``SPEC`` (a ``ppgpc.spec.ModelSpec``) that the inference methods run.
"""

from __future__ import annotations

import importlib

__all__ = ["available", "get_spec"]

_MODULES = {
    "ilr_gp": "ppgpc.models.ilr_gp",
    "ilr_gp_sparse": "ppgpc.models.ilr_gp:SPARSE_SPEC",
    "dirichlet_gp": "ppgpc.models.dirichlet_gp",
    "dirichlet_gp_sparse": "ppgpc.models.dirichlet_gp:SPARSE_SPEC",
    "logistic_softmax": "ppgpc.models.logistic_softmax",
    "softmax_svgp": "ppgpc.models.softmax_svgp",
    "ilr_gp_uncollapsed": "ppgpc.models.softmax_svgp:ILR_SPEC",
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
    module, _, attribute = module.partition(":")  # "module:ATTRIBUTE" for a second spec
    return getattr(importlib.import_module(module), attribute or "SPEC")

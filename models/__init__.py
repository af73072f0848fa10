"""The classifiers as models: one module per model, each filling the contract of ``spec``.

``spec.ModelSpec`` is what the inference driver (``ppgpc.infer``) runs: a model's
``prepare`` (data to arrays), ``pad``, ``num_latent``, ``log_link``, ``initial_hypers`` and
its capability groups (``Conjugate``, ``Latent``, ``Gibbs``, ``CAVI``, ``SVI``,
``Inducing``), each a NamedTuple of pure functions; a method runs on every model that fills
the groups it needs. Every model module builds its specs the same way, from explicit groups.

* ``ilr_gp``: ILR-GP, conjugate GP regression on isometric-log-ratio targets of smoothed
  labels (``SPEC``), its collapsed sparse variant (``SPARSE_SPEC``) and its uncollapsed
  SVGP variant (``UNCOLLAPSED_SPEC``);
* ``dirichlet_gp``: the Dirichlet-based GP (GPD), heteroscedastic regression on log-Gamma
  targets, exact and collapsed sparse;
* ``logistic_softmax``: the logistic-softmax GP with its Pólya-Gamma augmentation (Gibbs,
  CAVI, NUTS), a package of its algorithms;
* ``svgp``: the sparse variational GP classifier (softmax or inverse-ILR link) and its ELBO.

``get_spec(name)`` imports a model on first use; ``available()`` lists the names.
"""

from __future__ import annotations

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)

import importlib

__all__ = ["available", "get_spec"]

_MODULES = {
    "ilr_gp": "ppgpc.models.ilr_gp",
    "ilr_gp_sparse": "ppgpc.models.ilr_gp:SPARSE_SPEC",
    "dirichlet_gp": "ppgpc.models.dirichlet_gp",
    "dirichlet_gp_sparse": "ppgpc.models.dirichlet_gp:SPARSE_SPEC",
    "logistic_softmax": "ppgpc.models.logistic_softmax",
    "softmax_svgp": "ppgpc.models.svgp",
    "ilr_gp_uncollapsed": "ppgpc.models.ilr_gp:UNCOLLAPSED_SPEC",
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

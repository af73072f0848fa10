"""ppgpc: calibrated multi-class Gaussian-process classifiers as NumPyro models on JAX.

The package is layered, each layer importing only those below it:

* ``gp``: GP algebra on arrays (kernels, Cholesky with reported jitter, exact and sparse
  conditioning, simplex transforms); ``runtime``: fixed shapes, the bound on compiled
  programs, device blocks and progress; ``polyagamma``: the Pólya-Gamma sampler;
* ``datasets``: the UCI data, the paper's splits, scaling, synthetic problems;
* ``models``: one module per classifier, each a ``ModelSpec`` (the contract, ``models.spec``)
  of NumPyro models, guides and Gibbs or CAVI kernels;
* ``evaluation``: scores, calibration tests, recalibration, conformal sets, plots and
  posterior comparisons;
* ``infer``: the driver, ``fit`` any model with any method it supports (exact, MAP, NUTS,
  Gibbs, CAVI, SVI), its ``FitResult``, convergence reports and the ArviZ export;
* ``io``: the save format (netCDF arrays plus JSON, no pickle);
* ``estimators``: the scikit-learn classifiers on top of the driver;
* ``experiments`` and ``cli``: the papers' protocols and the ``ppgpc`` command.

Public API (imported on first use, so ``import ppgpc`` is quick and silent):

* ILRGPClassifier, DirichletGPClassifier, LogisticSoftmaxGPClassifier,
  SoftmaxSVGPClassifier, Selection: the estimators (``ppgpc.estimators``).
* fit, supported_methods, FitResult, to_inference_data: the driver (``ppgpc.infer``).
* ConvergenceWarning, ConvergenceReport: whether to trust a fit; every fit keeps its
  report and warns once when it finds a problem.
* save, load: a fitted estimator or ``FitResult`` to a folder and back.
* compare_posteriors, ConformalClassifier, skce_test, fit_temperature, fit_dirichlet:
  from ``ppgpc.evaluation``.

``import ppgpc`` imports no JAX and changes nothing in the process. The first import of
ppgpc's JAX code (any subpackage that holds some: an estimator, ``ppgpc.infer``,
``ppgpc.gp``, ...) turns on JAX's float64 mode and its persistent compilation cache
(``ppgpc._config``; each such subpackage imports it before anything else).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING


if TYPE_CHECKING:  # what the names below resolve to, for readers and static tools
    from ppgpc import (datasets, estimators, evaluation, experiments, gp, infer, io, models,
                       polyagamma, runtime)
    from ppgpc.estimators import (DirichletGPClassifier, ILRGPClassifier,
                                  LogisticSoftmaxGPClassifier, Selection, SoftmaxSVGPClassifier)
    from ppgpc.estimators.saving import load, save
    from ppgpc.evaluation import (ConformalClassifier, compare_posteriors, fit_dirichlet,
                                  fit_temperature, skce_test)
    from ppgpc.infer import (ConvergenceReport, ConvergenceWarning, FitResult, fit,
                             supported_methods, to_inference_data)

__version__ = "0.1.0"

_PUBLIC = {
    "ILRGPClassifier": "ppgpc.estimators",
    "DirichletGPClassifier": "ppgpc.estimators",
    "LogisticSoftmaxGPClassifier": "ppgpc.estimators",
    "SoftmaxSVGPClassifier": "ppgpc.estimators",
    "Selection": "ppgpc.estimators",
    "save": "ppgpc.estimators.saving",
    "load": "ppgpc.estimators.saving",
    "fit": "ppgpc.infer",
    "supported_methods": "ppgpc.infer",
    "FitResult": "ppgpc.infer",
    "to_inference_data": "ppgpc.infer",
    "ConvergenceWarning": "ppgpc.infer",
    "ConvergenceReport": "ppgpc.infer",
    "compare_posteriors": "ppgpc.evaluation",
    "ConformalClassifier": "ppgpc.evaluation",
    "skce_test": "ppgpc.evaluation",
    "fit_temperature": "ppgpc.evaluation",
    "fit_dirichlet": "ppgpc.evaluation",
}
"""Each public name -> the module that defines or faces it."""

_SUBPACKAGES = ("gp", "runtime", "polyagamma", "datasets", "models", "evaluation", "infer", "io",
                "estimators", "experiments")

__all__ = [*_PUBLIC, *_SUBPACKAGES]


def __getattr__(name: str):
    """Import a public name or a subpackage on first use (PEP 562)."""
    if name in _SUBPACKAGES:
        return importlib.import_module(f"ppgpc.{name}")
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ppgpc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

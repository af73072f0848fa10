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
    ILRGPClassifier, DirichletGPClassifier, LogisticSoftmaxGPClassifier,
    SoftmaxSVGPClassifier, Selection: the estimators (``ppgpc.estimators``).
    fit, supported_methods, FitResult, to_inference_data: the driver (``ppgpc.infer``).
    ConvergenceWarning, ConvergenceReport: whether to trust a fit; every fit keeps its
        report and warns once when it finds a problem.
    save, load: a fitted estimator or ``FitResult`` to a folder and back.
    compare_posteriors, ConformalClassifier, skce_test, fit_temperature, fit_dirichlet:
        from ``ppgpc.evaluation``.

Importing ppgpc turns on JAX's float64 mode and its persistent compilation cache
(``ppgpc._config``) without importing JAX: at once if JAX is imported already, else the
moment JAX is (``_configure_jax``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING


class _ConfigureJaxOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``jax`` is about to be imported it removes itself, lets the
    other finders find JAX, and runs ``ppgpc._config`` as soon as JAX's module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run_jax = spec.loader.exec_module

        def exec_module(module):
            run_jax(module)
            importlib.import_module("ppgpc._config")

        spec.loader.exec_module = exec_module
        return spec


def _configure_jax() -> None:
    """float64 and the compilation cache for every JAX array and program of the process:
    now if JAX is imported, else as soon as it is (nothing of JAX is imported here)."""
    if "jax" in sys.modules:
        importlib.import_module("ppgpc._config")
    elif not any(isinstance(f, _ConfigureJaxOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ConfigureJaxOnImport())


_configure_jax()

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

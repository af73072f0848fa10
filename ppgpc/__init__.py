"""ppgpc: calibrated multi-class Gaussian-process classifiers as NumPyro models on JAX.

Importing ppgpc turns on JAX's float64 mode and limits OpenBLAS to one thread (see
``ppgpc._config`` for why).

Public API:
    ILRGPClassifier: the ILR-GP estimator (scikit-learn conventions).
    LogisticSoftmaxGPClassifier: the logistic-softmax GP (Polya-Gamma Gibbs / CAVI / NUTS).
    DirichletGPClassifier: the Dirichlet-based GP (GPD), exact or collapsed sparse.
    SoftmaxSVGPClassifier: the sparse variational GP classifier (SVGPC / Uncollapsed-ILR).
    fit: the inference driver (``ppgpc.infer.fit``) for any model and method.
    load: load a saved estimator or ``FitResult`` (``est.save(path)``; no pickle).
    compare_posteriors: two posteriors compared variable by variable (``ppgpc.compare``).
    diagnostics: accuracy, NLL, Brier, ECE, reliability diagrams and RGB probability maps.
    datasets, metrics, plotting, kernels, simplex, gp, linalg: the building blocks.
"""

from ppgpc import _config  # noqa: F401  (float64 and BLAS threads before anything else)
from ppgpc import datasets, gp, kernels, linalg, metrics, plotting, simplex  # noqa: F401
from ppgpc import kmeans, sparse  # noqa: F401
from ppgpc.estimators import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.estimators import SoftmaxSVGPClassifier
from ppgpc.infer import FitResult, fit, supported_methods
from ppgpc.persistence import load
from ppgpc import compare, diagnostics  # noqa: F401
from ppgpc.compare import compare_posteriors

__version__ = "0.1.0"

__all__ = [
    "ILRGPClassifier",
    "LogisticSoftmaxGPClassifier",
    "DirichletGPClassifier",
    "SoftmaxSVGPClassifier",
    "FitResult",
    "fit",
    "supported_methods",
    "load",
    "compare_posteriors",
    "diagnostics",
    "datasets",
    "gp",
    "kernels",
    "linalg",
    "metrics",
    "plotting",
    "simplex",
]

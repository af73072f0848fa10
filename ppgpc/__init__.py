"""ppgpc: calibrated multi-class Gaussian-process classifiers as NumPyro models on JAX.

Importing ppgpc turns on JAX's float64 mode and limits OpenBLAS to one thread (see
``ppgpc._config`` for why).

Public API:
    ILRGPClassifier: the ILR-GP estimator (scikit-learn conventions).
    LogisticSoftmaxGPClassifier: the logistic-softmax GP (Polya-Gamma Gibbs / CAVI / NUTS).
    DirichletGPClassifier: the Dirichlet-based GP (GPD), exact or collapsed sparse.
    fit: the inference driver (``ppgpc.infer.fit``) for any model and method.
    datasets, metrics, plotting, kernels, simplex, gp, linalg: the building blocks.
"""

from ppgpc import _config  # noqa: F401  (float64 and BLAS threads before anything else)
from ppgpc import datasets, gp, kernels, linalg, metrics, plotting, simplex  # noqa: F401
from ppgpc import kmeans, sparse  # noqa: F401
from ppgpc.estimators import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.infer import FitResult, fit, supported_methods

__version__ = "0.1.0"

__all__ = [
    "ILRGPClassifier",
    "LogisticSoftmaxGPClassifier",
    "DirichletGPClassifier",
    "FitResult",
    "fit",
    "supported_methods",
    "datasets",
    "gp",
    "kernels",
    "linalg",
    "metrics",
    "plotting",
    "simplex",
]

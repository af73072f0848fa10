"""ppgpc: calibrated multi-class Gaussian-process classifiers as NumPyro models on JAX.

Importing ppgpc turns on JAX's float64 mode and its persistent compilation cache (see
``ppgpc._config`` for why, and how code that wants float32 can live with it).

Public API:
    ILRGPClassifier: the ILR-GP estimator (scikit-learn conventions).
    LogisticSoftmaxGPClassifier: the logistic-softmax GP (Polya-Gamma Gibbs / CAVI / NUTS).
    DirichletGPClassifier: the Dirichlet-based GP (GPD), exact or collapsed sparse.
    SoftmaxSVGPClassifier: the sparse variational GP classifier (SVGPC / Uncollapsed-ILR).
    Selection: how ILR-GP's epsilon and GPD's alpha_eps are chosen (grid, validation).
    fit: the inference driver (``ppgpc.infer.fit``) for any model and method.
    ConvergenceWarning, ConvergenceReport: whether to trust a fit (``ppgpc.infer.convergence``:
        R-hat, ESS, divergences, optimiser convergence, Cholesky jitter, grid edges); every
        fit keeps its report and warns once when it finds a problem.
    save, load: save a fitted estimator or ``FitResult`` to a folder and load it back
        (``ppgpc.saving``: netCDF arrays plus JSON, no pickle; ``est.save(path)`` too).
    to_inference_data: a ``FitResult`` as ArviZ ``InferenceData`` (``ppgpc.infer``).
    compare_posteriors: two posteriors compared variable by variable (``ppgpc.compare``).
    diagnostics: accuracy, NLL, Brier, ECE, reliability diagrams and RGB probability maps.
    ConformalClassifier: split-conformal prediction sets around any fitted classifier
        (``ppgpc.conformal``: LAC, APS, RAPS; marginal or class-conditional).
    skce_test: a calibration test with a p-value (``ppgpc.calibration``: the squared kernel
        calibration error; reliability bins with consistency bands).
    fit_temperature, fit_dirichlet: post-hoc recalibration baselines
        (``ppgpc.recalibration``: temperature scaling, Dirichlet calibration).
    datasets, metrics, plotting, kernels, simplex, gp, linalg: the building blocks.
"""

from ppgpc import _config  # noqa: F401  (float64 before anything else)
from ppgpc import datasets, gp, kernels, linalg, metrics, plotting, simplex  # noqa: F401
from ppgpc import kmeans, sparse  # noqa: F401
from ppgpc.estimators import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.estimators import Selection, SoftmaxSVGPClassifier
from ppgpc.infer import FitResult, fit, supported_methods, to_inference_data
from ppgpc.infer.convergence import ConvergenceReport, ConvergenceWarning
from ppgpc.saving import load, save
from ppgpc import compare, diagnostics  # noqa: F401
from ppgpc.compare import compare_posteriors
from ppgpc import calibration, conformal, recalibration  # noqa: F401
from ppgpc.calibration import skce_test
from ppgpc.conformal import ConformalClassifier
from ppgpc.recalibration import fit_dirichlet, fit_temperature

__version__ = "0.1.0"

__all__ = [
    "ILRGPClassifier",
    "LogisticSoftmaxGPClassifier",
    "DirichletGPClassifier",
    "SoftmaxSVGPClassifier",
    "Selection",
    "FitResult",
    "ConvergenceWarning",
    "ConvergenceReport",
    "fit",
    "supported_methods",
    "to_inference_data",
    "save",
    "load",
    "compare_posteriors",
    "ConformalClassifier",
    "skce_test",
    "fit_temperature",
    "fit_dirichlet",
    "calibration",
    "conformal",
    "recalibration",
    "diagnostics",
    "datasets",
    "gp",
    "kernels",
    "linalg",
    "metrics",
    "plotting",
    "simplex",
]

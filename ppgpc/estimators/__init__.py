"""scikit-learn estimators on top of the inference driver, one module per classifier.

* ``ILRGPClassifier`` (``ilr``), ``DirichletGPClassifier`` (``gpd``): conjugate GP
  regression on transformed labels, exact, MAP, NUTS or collapsed sparse, with a smoothing
  level chosen by ``Selection`` (``conjugate``).
* ``LogisticSoftmaxGPClassifier`` (``logistic_softmax``): Gibbs, CAVI or NUTS.
* ``SoftmaxSVGPClassifier`` (``svgp``): minibatch SVI (or NUTS for small N).

They share ``GPClassifierBase`` (``base``) and its options: ``kernel``, ``inference``,
``standardize``, ``seed``, ``max_exact_points``, ``progress``, ``inference_options``.

Example:
    >>> from ppgpc.estimators import ILRGPClassifier
    >>> from ppgpc.datasets import load
    >>> X, y = load("wine")
    >>> ILRGPClassifier(epsilon=0.99, progress=False).fit(X, y).score(X, y) > 0.9
    True
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.estimators.base import GPClassifierBase, saveable_estimators
from ppgpc.estimators.gpd import DirichletGPClassifier
from ppgpc.estimators.ilr import ILRGPClassifier
from ppgpc.estimators.logistic_softmax import LogisticSoftmaxGPClassifier
from ppgpc.estimators.options import Selection
from ppgpc.estimators.svgp import SoftmaxSVGPClassifier

__all__ = ["GPClassifierBase", "ILRGPClassifier", "DirichletGPClassifier",
           "LogisticSoftmaxGPClassifier", "SoftmaxSVGPClassifier", "Selection", "ESTIMATORS"]

ESTIMATORS = saveable_estimators()
"""ppgpc's estimator classes by name (those of ``ppgpc.catalog``): the classes a save may
name (``ppgpc.io.persistence``), as ``estimator.save`` and ``<Class>.load`` find them."""

"""ppgpc's classifiers, each declared once: its command-line name, its estimator class, its
model, its inference methods and its rows in the experiments.

The command line (``ppgpc.cli``), the papers' protocols (``ppgpc.experiments``) and the
classes a save may name (``ppgpc.estimators.ESTIMATORS``) are read from ``CLASSIFIERS``.
This module imports nothing, so ``ppgpc fit --help`` lists the classifiers without JAX;
``tests/test_cli.py`` holds each record against its estimator.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Classifier", "CLASSIFIERS"]


@dataclasses.dataclass(frozen=True)
class Classifier:
    """One classifier."""

    name: str
    """Its ``--model`` name on the command line."""
    estimator: str
    """Its class in ``ppgpc.estimators``, the name a save stores."""
    model: str
    """The ``ppgpc.models`` spec its estimator fits by default."""
    inferences: tuple[str, ...]
    """Its estimator's ``inference`` settings, the default first."""
    line: str
    """One line on it, for ``ppgpc fit --help``."""
    row: str
    """Its row in ``ppgpc.experiments``'s exact setting and in ``ppgpc compare``'s table."""
    sparse_rows: dict = dataclasses.field(default_factory=dict)
    """Its rows in the experiments' sparse setting: row name -> the estimator options that
    differ from its defaults."""
    aliases: tuple[str, ...] = ()
    """Further names the command line takes (besides ``name``, ``model`` and ``row`` in
    lower case)."""


CLASSIFIERS = (
    Classifier("ilr", "ILRGPClassifier", "ilr_gp", ("map", "exact", "nuts", "collapsed"),
               "ILR-GP: GP regression on isometric-log-ratio targets, C-1 latent GPs",
               "Exact-ILR", {"Collapsed-ILR": {"inference": "collapsed"}}),
    Classifier("gpd", "DirichletGPClassifier", "dirichlet_gp",
               ("map", "exact", "nuts", "collapsed"),
               "GPD: Dirichlet-based GP regression on log-Gamma targets, C latent GPs",
               "GPD", {"Sparse-GPD": {"inference": "collapsed"}}),
    Classifier("lsm", "LogisticSoftmaxGPClassifier", "logistic_softmax", ("nuts", "gibbs", "cavi"),
               "logistic-softmax GP with Polya-Gamma augmentation", "LSM",
               # the stochastic CAVI, in minibatches of 128 points
               {"Sparse-LSM": {"inference": "cavi",
                               "inference_options": {"batch_size": 128, "max_iter": 1000}}}),
    Classifier("svgpc", "SoftmaxSVGPClassifier", "softmax_svgp", ("svi", "nuts"),
               "sparse variational GP classifier with a softmax link", "SVGPC",
               {"SVGPC": {}, "Uncollapsed-ILR": {"link": "ilr"}}, aliases=("svgp",)),
)
"""The classifiers, in the order of the command line's lists and the experiments' rows."""

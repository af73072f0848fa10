"""How good are the class probabilities: scores, calibration, conformal sets, plots, posteriors.

Everything here takes predicted probabilities (n, C) and labels, or an ArviZ
``InferenceData`` of a fit, and never fits a GP (docs/math.md section 7):

* ``metrics``: accuracy, NLL, Brier score, expected calibration error and reliability
  tables, the scores every benchmark reports;
* ``calibration``: calibration tests with p-values (the squared kernel calibration error),
  reliability bins with consistency bands, confidence posterior-predictive checks;
* ``recalibration``: post-hoc baselines, temperature scaling and Dirichlet calibration;
* ``conformal``: split-conformal prediction sets (LAC, APS, RAPS) around any classifier;
* ``exports``: the same scores, tests and reliability diagrams read from an
  ``InferenceData`` (predictive probabilities, labels, calibration tables of several models);
* ``maps``: RGB pictures of classifiers' predictive probabilities over a 2-D grid of inputs
  (the plane of the first two principal components for D > 2);
* ``plotting``: reliability diagrams and probability maps (matplotlib, imported when a
  plot is drawn);
* ``chain_diagnostics``: rank-normalised split R-hat and bulk and tail ESS of MCMC draws,
  as ArviZ defines them, vectorised over every entry;
* ``posteriors``: two posteriors compared variable by variable (MCMC against a conjugate
  posterior, Gibbs against NUTS), with Monte Carlo standard errors and an energy test;
* ``arviz_objects``: the installed ArviZ's container of groups (``InferenceData`` under
  ArviZ 0.2x, ``xarray.DataTree`` under ArviZ 1) and the calls whose form differs between
  them (PSIS weights, ESS, ``ELPDData``), so that exports are built and read one way.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.evaluation import (arviz_objects, calibration, chain_diagnostics, conformal, exports,
                              maps, metrics, plotting, posteriors, recalibration)
from ppgpc.evaluation.calibration import skce_test
from ppgpc.evaluation.conformal import ConformalClassifier
from ppgpc.evaluation.posteriors import compare_posteriors
from ppgpc.evaluation.recalibration import fit_dirichlet, fit_temperature

__all__ = ["arviz_objects", "metrics", "calibration", "chain_diagnostics", "recalibration",
           "conformal", "exports", "maps", "plotting", "posteriors", "compare_posteriors",
           "ConformalClassifier", "skce_test", "fit_temperature", "fit_dirichlet"]

"""The predictions the code gave before a change of layout, reproduced after it.

``tests/data/golden/make_golden.py`` recorded, with the code before the move into
subpackages, the mean class probabilities of every driver method on every model it runs
(the shared tiny fits of ``fitted_cases``) and of every estimator's defaults on a small
problem, and saved each estimator. Here the same fits run again and the saves are loaded:
the code that moved must compute the same numbers, and a save written before the move must
load after it and predict what it predicted then.

Tolerance: the fits run the same programs on the same keys, so on one machine they agree to
rounding; 1e-9 absolute in probabilities allows for a different BLAS or XLA version and
nothing more (a changed algorithm, key or default moves them by far more than that).

Entries re-recorded since, each within its Monte Carlo error of the value before
(docs/records/speed.md, "Run lengths set by the check"): the NUTS and Gibbs driver fits
(windowed samplers with new keys) and the ``defaults/`` predictions of the estimators whose
defaults now stop at their check (the logistic-softmax GP's NUTS, the SVGP's SVI); the
saves still predict their ``estimator/`` entries.
"""

from pathlib import Path

import numpy as np
import pytest

import ppgpc
from fitted_cases import NUM_PRED, SPARSE_VARIANTS, cases, estimator_problem, fitted, toy

GOLDEN = Path(__file__).parent / "data" / "golden"
RECORDED = dict(np.load(GOLDEN / "predictions.npz"))
ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "LogisticSoftmaxGPClassifier",
              "SoftmaxSVGPClassifier")
ATOL = 1e-9


def test_every_recorded_case_is_still_a_case():
    expected = {f"fit/{m}/{k}" for m, k in cases()}
    expected |= {f"fit/{m}/{k}/{n}" for m, k, n in SPARSE_VARIANTS}
    expected |= {f"{kind}/{name}" for name in ESTIMATORS for kind in ("estimator", "defaults")}
    assert set(RECORDED) == expected


@pytest.mark.parametrize("model, method", cases())
def test_driver_methods_predict_as_recorded(model, method):
    probs = fitted(model, method).predict_proba(toy()[0][:NUM_PRED])
    np.testing.assert_allclose(probs, RECORDED[f"fit/{model}/{method}"], rtol=0, atol=ATOL)


@pytest.mark.parametrize("model, method, num_inducing", SPARSE_VARIANTS)
def test_sparse_variants_predict_as_recorded(model, method, num_inducing):
    probs = fitted(model, method, num_inducing=num_inducing).predict_proba(toy()[0][:NUM_PRED])
    np.testing.assert_allclose(probs, RECORDED[f"fit/{model}/{method}/{num_inducing}"],
                               rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_saves_from_before_load_and_predict_as_recorded(name):
    X_test = estimator_problem()[2]
    loaded = ppgpc.load(GOLDEN / "saves" / name)
    assert type(loaded).__name__ == name
    np.testing.assert_allclose(loaded.predict_proba(X_test), RECORDED[f"estimator/{name}"],
                               rtol=0, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_defaults_fit_as_recorded(name):
    X, y, X_test = estimator_problem()
    estimator = getattr(ppgpc, name)(progress=False).fit(X, y)
    np.testing.assert_allclose(estimator.predict_proba(X_test), RECORDED[f"defaults/{name}"],
                               rtol=0, atol=ATOL)

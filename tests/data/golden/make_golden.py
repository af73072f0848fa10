"""Record the predictions of every driver method and every estimator's defaults, and save
each estimator (save format 2), as the reference that a change of layout must reproduce.

Run from the repository root: ``python tests/data/golden/make_golden.py``. It writes
``predictions.npz`` beside itself (one array per case: the mean class probabilities at
fixed test inputs) and one save folder per estimator under ``saves/``; the test
``tests/test_golden.py`` refits every case and loads every save and compares.

A change that moves some predictions on purpose (a new sampler's keys, a run length set by a
check) re-records only those entries, after showing that they moved by no more than their
Monte Carlo error, and says so in ``docs/records/``: the ``defaults/`` entries are the
estimators' current defaults, the ``estimator/`` entries what the saves predict.
"""

import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # tests/: fitted_cases, conftest

import ppgpc  # noqa: E402
from fitted_cases import (HYPERPARAMETER_CASES, NUM_PRED, SPARSE_VARIANTS, cases,  # noqa: E402
                          estimator_problem, fitted, toy)


ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "LogisticSoftmaxGPClassifier",
              "SoftmaxSVGPClassifier")


def main():
    arrays = {}
    X_pred = toy()[0][:NUM_PRED]
    for model, method in cases():
        arrays[f"fit/{model}/{method}"] = fitted(model, method).predict_proba(X_pred)
        print(model, method, flush=True)
    for model, method, num_inducing in SPARSE_VARIANTS:
        result = fitted(model, method, num_inducing=num_inducing)
        arrays[f"fit/{model}/{method}/{num_inducing}"] = result.predict_proba(X_pred)
    for model, method in HYPERPARAMETER_CASES:
        result = fitted(model, method, fit_hyperparameters=True)
        arrays[f"hyperparameters/{model}/{method}"] = result.predict_proba(X_pred)
    X, y, X_test = estimator_problem()
    saves = HERE / "saves"
    shutil.rmtree(saves, ignore_errors=True)
    saves.mkdir()
    for name in ESTIMATORS:
        estimator = getattr(ppgpc, name)().fit(X, y)
        arrays[f"estimator/{name}"] = estimator.predict_proba(X_test)
        arrays[f"defaults/{name}"] = arrays[f"estimator/{name}"]
        estimator.save(saves / name)
        print(name, flush=True)
    np.savez(HERE / "predictions.npz", **arrays)


if __name__ == "__main__":
    main()

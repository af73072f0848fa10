"""Write saves of the format-version-1 estimators (the API before issue 36) as fixtures.

Run from the repository root with the code of commit 091ae7d (format version 1); the new
API cannot run it (it uses the options issue 36 removed). predictions.npz holds the training
data, the test inputs and each saved model's predict_proba there.
"""
import time, shutil
from pathlib import Path
import numpy as np
from ppgpc import (ILRGPClassifier, DirichletGPClassifier, LogisticSoftmaxGPClassifier,
                   SoftmaxSVGPClassifier)

rng = np.random.default_rng(0)
centres = np.array([[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]])
y = np.repeat(np.arange(3), 10)
X = centres[y] + rng.normal(size=(30, 2))
Xt = X[::3] + 0.1
out = Path("tests/data/saves_v1"); shutil.rmtree(out, ignore_errors=True); out.mkdir(parents=True)
cases = {
    "ilr_map": ILRGPClassifier(epsilon=0.99, tau=0.1, inference_options={"num_draws": 50}),
    "ilr_uncollapsed": ILRGPClassifier(inference="uncollapsed", num_inducing=8,
                                       inference_options={"max_iter": 30, "num_draws": 20}),
    "gpd_map": DirichletGPClassifier(alpha_eps=0.01, validation="cv", cv_folds=3,
                                     inference_options={"num_draws": 50}),
    "lsm_cavi": LogisticSoftmaxGPClassifier(inference="cavi",
                                            inference_options={"max_iter": 20, "num_draws": 20}),
    "lsm_svi": LogisticSoftmaxGPClassifier(inference="svi",
                                           inference_options={"max_iter": 20, "num_draws": 20,
                                                              "num_inducing": 8,
                                                              "batch_size": 16}),
    "svgp_moved": SoftmaxSVGPClassifier(num_inducing=8, batch_size=16, max_iter=30,
                                        learning_rate=0.05, validation_fraction=0.2,
                                        natural_gradient=0.1, progress_bar=True,
                                        inference_options={"num_draws": 20}),
    "svgp_removed": SoftmaxSVGPClassifier(num_inducing=8, max_iter=30, link="ilr",
                                          initial_variance=0.5,
                                          inference_options={"num_draws": 20}),
}
arrays = {"X": X, "y": y, "X_test": Xt}
for name, est in cases.items():
    t = time.time()
    est.fit(X, y)
    est.save(out / name)
    arrays[f"proba_{name}"] = est.predict_proba(Xt)
    print(name, round(time.time() - t, 1), "s")
np.savez(out / "predictions.npz", **arrays)

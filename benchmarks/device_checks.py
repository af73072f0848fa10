"""Checks for a machine with an accelerator: the four estimators' defaults on wine, and the
N = 2000 exact ILR fit padded and unpadded.

1. ``ILRGPClassifier()``, ``DirichletGPClassifier()``, ``LogisticSoftmaxGPClassifier()``
   and ``SoftmaxSVGPClassifier()`` fitted on the training points of wine's paper split
   (seed 0) under ``warnings.simplefilter("error", ppgpc.ConvergenceWarning)``: each line
   gives the cold fit's seconds (compilation included), whether the convergence report
   passed, and accuracy / NLL / ECE on the test points (or the warning it raised).
2. The driver's ``exact`` ILR fit on N = 2000 synthetic points (D = 8, C = 5, 100 draws),
   twice in the process (first with compilation, then warm), with the registered spec
   (padded to 2048 rows, ``ppgpc.runtime.padding``) and with ``pad=None`` (at N itself).

    python benchmarks/device_checks.py
"""
import dataclasses, time, warnings, sys
import numpy as np, jax
import ppgpc
from ppgpc.datasets import load, paper_split
from ppgpc.infer import fit
from ppgpc.models import get_spec
print("devices", jax.devices(), "jax", jax.__version__, flush=True)
X, y = load("wine")
split = paper_split(X, y, seed=0)
for name, cls in [("ILR", ppgpc.ILRGPClassifier), ("GPD", ppgpc.DirichletGPClassifier),
                  ("LSM", ppgpc.LogisticSoftmaxGPClassifier), ("SVGPC", ppgpc.SoftmaxSVGPClassifier)]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ppgpc.ConvergenceWarning)
        t = time.perf_counter()
        try:
            est = cls(progress=False).fit(split.X_train, split.y_train)
            dt = time.perf_counter() - t
            ev = est.evaluate(split.X_test, split.y_test)
            print(f"wine {name}: fit {dt:.1f} s (cold), converged {est.convergence_.converged}, "
                  f"{ {k: round(float(v), 3) for k, v in ev.items() if k in ('accuracy', 'nll', 'ece')} }", flush=True)
        except Exception as err:
            print(f"wine {name}: {type(err).__name__}: {err}", flush=True)
rng = np.random.default_rng(0)
N, D, C = 2000, 8, 5
y2 = rng.integers(0, C, N); X2 = rng.normal(size=(N, D)) + 1.5 * rng.normal(size=(C, D))[y2]
spec = get_spec("ilr_gp")
for label, s in (("padded", spec), ("unpadded", dataclasses.replace(spec, pad=None))):
    times = []
    for rep in range(2):
        t = time.perf_counter()
        r = fit(s, X2, y2, method="exact", num_draws=100)
        jax.block_until_ready(r.latent)
        times.append(time.perf_counter() - t)
    print(f"N=2000 exact ILR {label}: first {times[0]:.2f} s, second {times[1]:.2f} s, "
          f"iterations {r.info.optimizer.iterations}", flush=True)

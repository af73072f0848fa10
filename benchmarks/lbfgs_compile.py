"""Seconds a first fit spends compiling its L-BFGS program, for the two estimators whose
defaults fit their hyperparameters by L-BFGS (type-II MAP of the collapsed model).

Each row is one fresh Python process with the persistent compilation cache turned off
(``PPGPC_COMPILATION_CACHE=off``) and XLA's default flags, fitting the estimator's defaults
on 200 rows of ``make_classification`` (8 columns, 6 informative, 4 classes) and predicting
100 more: the process's wall seconds from the start of ``fit`` to the probabilities, the
seconds XLA spent compiling every program (``/jax/core/compile/backend_compile_duration``),
those of the L-BFGS program alone (``jit(_sites_window)``, the optimiser loop), and the L-BFGS iterations of
the final fit. ``--repeats`` processes per estimator.

    python benchmarks/lbfgs_compile.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import collections, json, sys, time, warnings
import jax
seconds = collections.Counter()
def listener(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        seconds["all"] += duration
        if kw.get("fun_name") == "jit(_sites_window)":
            seconds["lbfgs"] += duration
jax.monitoring.register_event_duration_secs_listener(listener)
warnings.simplefilter("ignore")
import ppgpc
from sklearn.datasets import make_classification
X, y = make_classification(300, 8, n_informative=6, n_redundant=0, n_classes=4,
                           random_state=0)
start = time.perf_counter()
model = getattr(ppgpc, sys.argv[1])(progress=False).fit(X[:200], y[:200])
model.predict_proba(X[200:])
print(json.dumps({"wall": time.perf_counter() - start, "compile": seconds["all"],
                  "lbfgs": seconds["lbfgs"], "n_iter": int(model.n_iter_)}))
"""

ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    repeats = parser.parse_args().repeats
    env = dict(os.environ, PPGPC_COMPILATION_CACHE="off")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    print("| estimator | process | fit + predict s | compile s | L-BFGS program s | iterations |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ESTIMATORS:
        for i in range(repeats):
            run = subprocess.run([sys.executable, "-c", _CHILD, name], env=env,
                                 capture_output=True, text=True, check=True)
            row = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"| {name} | {i + 1} | {row['wall']:.2f} | {row['compile']:.2f} | "
                  f"{row['lbfgs']:.2f} | {row['n_iter']} |")


if __name__ == "__main__":
    main()

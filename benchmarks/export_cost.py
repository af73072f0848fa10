"""What an estimator's default ArviZ export costs: time, memory, file size, and how far its
mean probabilities are from ``predict_proba``.

Each estimator runs in a fresh process, as a user meets it: fit at its defaults on 64 rows
of glass (standardised), ``predict_proba`` on the other 150 rows, ``import arviz`` (timed
alone: the first export pays it), then ``to_inference_data(X_test, y_test)`` three times
(the first compiles the export's programs; the best of the other two is what a warm process
pays). Columns: those times, the export's size in memory (``nbytes`` over every group), its
netCDF file, the part of it in the ``predictions`` group, the draws of ``p`` it holds, how
far the exported ``p_mean`` is from ``predict_proba``, and how far the mean of the exported
draws of ``p`` is (largest over points and classes: Monte Carlo error of a thinned sample).

    python benchmarks/export_cost.py [--estimators ILR GPD LSM SVGP]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ESTIMATORS = {"ILR": "ILRGPClassifier", "GPD": "DirichletGPClassifier",
              "LSM": "LogisticSoftmaxGPClassifier", "SVGP": "SoftmaxSVGPClassifier"}

_CHILD = """
import json, sys, time
import numpy as np
import ppgpc
from ppgpc.datasets import load, standardize
X, y = load("glass")
rng = np.random.default_rng(0)
order = rng.permutation(len(y))
train, test = order[:64], order[64:]
X_train, X_test = standardize(X[train], X[test])
est = getattr(ppgpc, sys.argv[1])().fit(X_train, y[train])
proba = est.predict_proba(X_test)
start = time.perf_counter()
import arviz
times = [time.perf_counter() - start]
for _ in range(3):
    start = time.perf_counter()
    idata = est.to_inference_data(X_test, y[test])
    times.append(time.perf_counter() - start)
nbytes = sum(idata[g].nbytes for g in idata.groups())
pred = idata.predictions.nbytes
idata.to_netcdf(sys.argv[2])
import os
mean = idata.predictions["p"].mean(dim=("chain", "draw")).transpose("pred", "class").values
exact = idata.predictions_constant_data["p_mean"].transpose("pred", "class").values
draws = idata.predictions.sizes["chain"] * idata.predictions.sizes["draw"]
print(json.dumps({"arviz": times[0], "first": times[1], "again": min(times[2:]), "memory": nbytes,
                  "file": os.path.getsize(sys.argv[2]), "predictions": pred,
                  "draws": int(draws), "exact": float(np.max(np.abs(exact - proba))),
                  "gap": float(np.max(np.abs(mean - proba)))}))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimators", nargs="+", choices=sorted(ESTIMATORS),
                        default=list(ESTIMATORS))
    args = parser.parse_args(argv)
    print("| estimator | import arviz | first export | again | in memory | netCDF file "
          "| of which `predictions` | draws of p | max abs(p_mean - predict_proba) "
          "| max abs(mean of p - predict_proba) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for short in args.estimators:
            out = subprocess.run([sys.executable, "-c", _CHILD, ESTIMATORS[short],
                                  str(Path(tmp) / f"{short}.nc")],
                                 capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            mb = 2 ** 20
            print(f"| {short} | {row['arviz']:.1f} s | {row['first']:.2f} s "
                  f"| {row['again']:.2f} s | {row['memory'] / mb:.1f} MB "
                  f"| {row['file'] / mb:.1f} MB | {row['predictions'] / mb:.1f} MB "
                  f"| {row['draws']} | {row['exact']:.0e} | {row['gap']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

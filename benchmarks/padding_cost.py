"""What padding the training data to fixed sizes costs: default fits at N padded and not.

``ppgpc.runtime.padding`` fits the exact GPs on their data padded to ``bucket(N)`` rows (N = 200
-> 224, 1000 -> 1008, 2000 -> 2016: ``python -c "from ppgpc.runtime.padding import bucket;
print([bucket(n) for n in (200, 1000, 2000)])"``). For each N and estimator (``ILRGPClassifier()``,
``DirichletGPClassifier()``, defaults, ``progress=False``; synthetic blobs with
``--features`` features and ``--classes`` classes), two fresh processes, each fitting twice:

* ``padded``: as a user gets it;
* ``unpadded``: the same with ``ppgpc.runtime.padding.bucket`` replaced by the identity, so every
  program runs at N itself (the mask multiplies by ones), which is what a fit cost before
  padding.

Each prints the first fit (compilation included, an empty compilation cache) and the
second (warm) in seconds, and the ratio padded / unpadded of each.

    python benchmarks/padding_cost.py
    python benchmarks/padding_cost.py --sizes 2000 --estimators ILR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_TAG = "PADDING_COST_JSON "


def _child(estimator: str, n: int, padded: bool, num_features: int, num_classes: int):
    import warnings

    import numpy as np

    import ppgpc
    import ppgpc.infer.driver
    import ppgpc.infer.loo
    import ppgpc.infer.predictive

    if not padded:  # every module that pads, through its own name for bucket
        for module in (ppgpc.infer.driver, ppgpc.infer.loo, ppgpc.infer.predictive):
            module.bucket = lambda rows: int(rows)
    warnings.simplefilter("ignore")
    cls = {"ILR": ppgpc.ILRGPClassifier, "GPD": ppgpc.DirichletGPClassifier}[estimator]
    rng = np.random.default_rng(0)
    y = rng.integers(0, num_classes, n)
    X = rng.normal(size=(n, num_features)) + 1.5 * rng.normal(
        size=(num_classes, num_features))[y]
    times = []
    for _ in range(2):
        start = time.perf_counter()
        cls(progress=False).fit(X, y)
        times.append(time.perf_counter() - start)
    print(_TAG + json.dumps({"cold": times[0], "warm": times[1]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 2000])
    parser.add_argument("--estimators", nargs="+", default=["ILR", "GPD"],
                        choices=["ILR", "GPD"])
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, n, padded = args.child
        _child(name, int(n), padded == "1", args.features, args.classes)
        return
    print(f"{'estimator':9s} {'N':>5s} {'padded cold':>11s} {'unpadded cold':>13s} "
          f"{'ratio':>6s} {'padded warm':>11s} {'unpadded warm':>13s} {'ratio':>6s}")
    for name in args.estimators:
        for n in args.sizes:
            row = {}
            for padded in ("1", "0"):
                with tempfile.TemporaryDirectory() as cache:
                    env = {**os.environ, "PPGPC_COMPILATION_CACHE": cache,
                           "PYTHONWARNINGS": "ignore"}
                    env.pop("JAX_COMPILATION_CACHE_DIR", None)
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", name, str(n), padded,
                         "--features", str(args.features), "--classes", str(args.classes)],
                        capture_output=True, text=True, env=env)
                lines = [x for x in out.stdout.splitlines() if x.startswith(_TAG)]
                if out.returncode != 0 or not lines:
                    raise RuntimeError(out.stderr[-2000:])
                row[padded] = json.loads(lines[-1][len(_TAG):])
            p, u = row["1"], row["0"]
            print(f"{name:9s} {n:5d} {p['cold']:11.1f} {u['cold']:13.1f} "
                  f"{p['cold'] / u['cold']:6.2f} {p['warm']:11.1f} {u['warm']:13.1f} "
                  f"{p['warm'] / u['warm']:6.2f}", flush=True)


if __name__ == "__main__":
    main()

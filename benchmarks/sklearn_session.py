"""scikit-learn's model selection at scale in one process, with the estimators' defaults.

Three jobs, each in its own fresh process (``--child``), timed as a user meets them
(compilation included; ppgpc's persistent compilation cache pointed at a new empty folder,
so nothing is read back from an earlier run), each printing its seconds, the XLA
compilations it caused, the memory mappings and resident memory it ended with:

* ``check_estimator``: scikit-learn's conformance checks on the default
  ``ILRGPClassifier()``, ``DirichletGPClassifier()``, ``LogisticSoftmaxGPClassifier()`` and
  ``SoftmaxSVGPClassifier()``, one after the other in one process (each check fits on its
  own small data, of many sizes);
* ``grid_search``: ``GridSearchCV`` of ``--estimator`` over 10 candidates x 5 stratified
  folds on the bundled wine data, scored by log loss (ILR and GPD: two kernels x the
  smoothing search or four fixed smoothing levels; LSM and SVGPC: the four kernels, and two
  kernels x three seeds);
* ``learning_curve``: scikit-learn's ``learning_curve`` of ``--estimator`` at 10
  training sizes x 5 folds on wine.

    python benchmarks/sklearn_session.py
    python benchmarks/sklearn_session.py --jobs learning_curve --estimator GPD
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from process_stats import BUILD_EVENT, memory_maps, resident_mib

JOBS = ("check_estimator", "grid_search", "learning_curve")
ESTIMATORS = ("ILR", "GPD", "LSM", "SVGPC")
_JSON_TAG = "SKLEARN_SESSION_JSON "



def _estimator(name: str):
    import ppgpc

    return {"ILR": ppgpc.ILRGPClassifier, "GPD": ppgpc.DirichletGPClassifier,
            "LSM": ppgpc.LogisticSoftmaxGPClassifier,
            "SVGPC": ppgpc.SoftmaxSVGPClassifier}[name](progress=False)


def _grid(name: str) -> dict:
    """Ten candidates: the four kernels, and a smoothing level or a second setting."""
    kernels = ["rbf-ard", "rbf", "matern52-ard", "matern52"]
    if name == "ILR":
        return {"kernel": kernels[:2], "epsilon": ["auto", 0.9, 0.99, 0.999, 0.9999]}
    if name == "GPD":
        return {"kernel": kernels[:2], "alpha_eps": ["auto", 0.003, 0.01, 0.03, 0.1]}
    return [{"kernel": kernels}, {"kernel": kernels[:2], "seed": [1, 2, 3]}]


def _child(job: str, name: str) -> dict:
    import warnings

    import jax
    import numpy as np

    import ppgpc

    builds = [0]

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == BUILD_EVENT:
            builds[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    if job == "check_estimator":
        from sklearn.utils.estimator_checks import check_estimator

        for estimator_name in ESTIMATORS:
            check_estimator(_estimator(estimator_name))
            print(f"  {estimator_name}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)
        extra = {}
    else:
        from sklearn.model_selection import GridSearchCV, StratifiedKFold, learning_curve

        X, y = ppgpc.datasets.load("wine")
        folds = StratifiedKFold(5, shuffle=True, random_state=0)
        if job == "grid_search":
            search = GridSearchCV(_estimator(name), _grid(name), cv=folds,
                                  scoring="neg_log_loss").fit(X, y)
            extra = {"candidates": len(search.cv_results_["params"]),
                     "best": {k: str(v) for k, v in search.best_params_.items()},
                     "best_nll": -float(search.best_score_)}
        else:
            sizes, _, test = learning_curve(_estimator(name), X, y, cv=folds,
                                            train_sizes=np.linspace(0.1, 1.0, 10),
                                            scoring="neg_log_loss", shuffle=True,
                                            random_state=0)
            extra = {"sizes": [int(s) for s in sizes],
                     "nll": [round(-float(v), 4) for v in test.mean(axis=1)]}
    return {"job": job, "estimator": name, "seconds": time.perf_counter() - start,
            "compiles": builds[0], "maps": memory_maps(), "rss": resident_mib(), **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="+", default=list(JOBS), choices=JOBS)
    parser.add_argument("--estimator", default="ILR", choices=ESTIMATORS,
                        help="the estimator of the grid search and the learning curve")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(_JSON_TAG + json.dumps(_child(*args.child)), flush=True)
        return
    print(f"{'job':16s} {'estimator':9s} {'seconds':>8s} {'compiles':>8s} {'maps':>7s} "
          f"{'rss MiB':>8s}  result")
    for job in args.jobs:
        name = "all four" if job == "check_estimator" else args.estimator
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PPGPC_COMPILATION_CACHE": cache, "PYTHONWARNINGS": "ignore"}
            env.pop("JAX_COMPILATION_CACHE_DIR", None)
            out = subprocess.run([sys.executable, __file__, "--child", job, args.estimator],
                                 capture_output=True, text=True, env=env)
        rows = [line for line in out.stdout.splitlines() if line.startswith(_JSON_TAG)]
        if out.returncode != 0 or not rows:
            print(f"{job:16s} {name:9s} failed with exit code {out.returncode}: "
                  f"{out.stderr.strip().splitlines()[-1:] or ''}", flush=True)
            continue
        row = json.loads(rows[-1][len(_JSON_TAG):])
        rest = {k: v for k, v in row.items()
                if k not in ("job", "estimator", "seconds", "compiles", "maps", "rss")}
        print(f"{job:16s} {name:9s} {row['seconds']:8.1f} {row['compiles']:8d} "
              f"{row['maps']:7d} {row['rss']:8.0f}  {json.dumps(rest)}", flush=True)


if __name__ == "__main__":
    main()

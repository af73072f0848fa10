"""The exact classifiers' defaults at the sizes people bring, beside GPyTorch's exact
Dirichlet GP, each as a user meets it: a whole fresh process (import, compilation, fit and
prediction of the test rows).

Tables:

* ``large``: ``make_classification``, 1,250 training and 250 test rows, 64 columns (16
  informative), 10 classes;
* ``overlap``: the circle mixture of ``ppgpc.datasets.synthetic`` (10 classes, noise 0.3),
  2,000 training and 1,000 test rows, 2 columns (``benchmarks/overlap.py``'s problem);
* ``n4000`` and ``n10000``: ``make_classification``, 4,000 or 10,000 training and 1,000
  test rows, 10 columns (all informative), 5 classes.

Rows: ``ILRGPClassifier()``, ``DirichletGPClassifier()`` (their defaults, progress on
stderr included, whatever they choose: the exact fit, its kernel fitted on a subsample past
``HYPER_ROWS``, or, past ``max_exact_points``, the collapsed sparse fit), and
``gpytorch`` (``benchmarks/gpytorch_peer.py``'s recipe: one scaled RBF-ARD kernel per class,
100 Adam steps, alpha_eps 0.01, Cholesky up to N), each a fresh process. Columns: the
process's wall seconds, the fit's own seconds, test NLL, accuracy, top-label ECE (10 bins)
and what the estimator chose. ``--warm`` adds a second fit in the same process (a notebook's
next fit). Where torch is missing, or N exceeds ``--peer-max-rows``, the peer row says so.
The persistent compilation cache is a fresh folder per run unless ``--filled-cache``.

    python benchmarks/exact_sizes.py
    python benchmarks/exact_sizes.py --tables large overlap --estimators ILRGPClassifier
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "gpytorch")
TABLES = ("large", "overlap", "n4000", "n10000")

_CHILD = r"""
import json, sys, time
start = time.perf_counter()
which, table, warm = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
import numpy as np


def load(table):
    if table == "overlap":
        from ppgpc.datasets.synthetic import mixture_problem
        p = mixture_problem(2000, 1000, 10, 0.3, seed=0)
        return p.X_train, p.y_train, p.X_test, p.y_test
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split
    n_train, n_test, D, informative, C = {"large": (1250, 250, 64, 16, 10),
                                          "n4000": (4000, 1000, 10, 10, 5),
                                          "n10000": (10000, 1000, 10, 10, 5)}[table]
    X, y = make_classification(n_samples=n_train + n_test, n_features=D,
                               n_informative=informative, n_redundant=0, n_classes=C,
                               n_clusters_per_class=1, random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, train_size=n_train, random_state=0,
                                              stratify=y)
    return X_tr, y_tr, X_te, y_te


X_train, y_train, X_test, y_test = load(table)
from ppgpc.evaluation import metrics


def scores(p):
    return {"nll": metrics.nll(p, y_test), "accuracy": metrics.accuracy(p, y_test),
            "ece": metrics.ece(p, y_test, kind="top-label")}


out = {}
if which == "gpytorch":
    sys.path.insert(0, sys.argv[4])
    from gpytorch_peer import fit_predict
    probs, fit_seconds, per_step = fit_predict(X_train, y_train, X_test,
                                               max_cholesky_size=len(y_train) + 1)
    out.update(scores(probs), fit=fit_seconds, chose=f"{per_step:.2f} s/step")
else:
    import ppgpc
    est = getattr(ppgpc, which)()   # the defaults, progress on stderr included
    t = time.perf_counter()
    est.fit(X_train, y_train)
    probs = est.predict_proba(X_test)
    out.update(scores(probs), fit=time.perf_counter() - t)
    chose = [f"{k[:-1]}={getattr(est, k):.7g}" for k in ("alpha_eps_", "tau_", "epsilon_")
             if getattr(est, k, None) is not None]
    sparse = est.result_.spec.name.endswith("_sparse")
    subsample = [n.split(" rows;")[0].split("subsample of ")[1] + " rows"
                 for n in est.convergence_.notes if "stratified subsample of" in n]
    out["chose"] = ", ".join(chose + (["collapsed"] if sparse else [])
                             + [f"kernel on {s}" for s in subsample])
    if warm:
        t = time.perf_counter()
        est.fit(X_train, y_train)
        est.predict_proba(X_test)
        out["warm"] = time.perf_counter() - t
out["process"] = time.perf_counter() - start
print("RESULT " + json.dumps(out))
"""


def _run(which: str, table: str, warm: bool, env: dict) -> dict:
    here = str(Path(__file__).resolve().parent)
    proc = subprocess.run([sys.executable, "-c", _CHILD, which, table, "1" if warm else "0",
                           here], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": " | ".join(tail)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--estimators", nargs="+", choices=ESTIMATORS,
                        default=list(ESTIMATORS))
    parser.add_argument("--peer-max-rows", type=int, default=4000,
                        help="skip GPyTorch above this many training rows (its exact fit "
                             "takes hours at 10,000 on 2 cores)")
    parser.add_argument("--warm", action="store_true", help="time a second fit too")
    parser.add_argument("--filled-cache", action="store_true",
                        help="use ppgpc's persistent compilation cache as it is")
    args = parser.parse_args(argv)
    rows = {"large": 1250, "overlap": 2000, "n4000": 4000, "n10000": 10000}
    env = dict(os.environ)
    if not args.filled_cache:
        env["PPGPC_COMPILATION_CACHE"] = tempfile.mkdtemp(prefix="ppgpc-cache-")
    try:
        import gpytorch_peer
        peer_note = None if gpytorch_peer.AVAILABLE else gpytorch_peer.UNAVAILABLE_NOTE
    except ImportError:
        peer_note = "GPyTorch rows skipped: benchmarks/gpytorch_peer.py not importable"
    header = (f"{'table':8s} {'estimator':22s} {'process s':>9s} {'fit s':>8s} {'warm s':>7s} "
              f"{'NLL':>7s} {'acc':>6s} {'ECE':>6s}  chose")
    print(header)
    print("-" * len(header))
    for table in args.tables:
        for which in args.estimators:
            if which == "gpytorch" and (peer_note or rows[table] > args.peer_max_rows):
                why = peer_note or f"skipped: N = {rows[table]} > --peer-max-rows"
                print(f"{table:8s} {which:22s} {why}", flush=True)
                continue
            r = _run(which, table, args.warm and which != "gpytorch", env)
            if "error" in r:
                print(f"{table:8s} {which:22s} failed: {r['error']}", flush=True)
                continue
            warm = f"{r['warm']:7.1f}" if "warm" in r else f"{'':7s}"
            print(f"{table:8s} {which:22s} {r['process']:9.1f} {r['fit']:8.1f} {warm} "
                  f"{r['nll']:7.3f} {r['accuracy']:6.3f} {r['ece']:6.3f}  {r['chose']}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

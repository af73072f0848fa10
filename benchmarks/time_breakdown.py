"""Where a default fit's time goes: import, trace and lower, compile, cache reads, arithmetic
and prediction, as a user meets it.

For each estimator's defaults (``ILRGPClassifier``, ``DirichletGPClassifier``,
``LogisticSoftmaxGPClassifier``, ``SoftmaxSVGPClassifier``) and each table, three ways of
meeting it:

* ``empty``: a fresh process with an empty compilation cache (a first run after install);
* ``filled``: a fresh process whose cache the ``empty`` run filled (every later run);
* ``warm``: a second fit and prediction in the ``empty`` process (a notebook's next fit).

Each row splits one fit plus ``predict_proba`` on the test rows into: ``import`` (``import
ppgpc`` and its dependencies; fresh processes only), ``trace`` (JAX's tracing to jaxprs and
lowering to MLIR, summed over every program; nested programs count once each), ``compile``
(XLA's compilations, less cache reads), ``cache`` (reading compiled programs from the
persistent cache), ``arith`` (the rest of the fit: running the programs and the host work
around them), ``predict`` (the prediction, all of its parts), ``total`` (the whole process
for fresh processes, from before the import to after the prediction; the fit and
prediction for ``warm``), and the test NLL. scikit-learn's
``make_pipeline(StandardScaler(), GaussianProcessClassifier())`` runs as a fresh process
on the same split as the peer (``sklearn`` rows: import, fit and predict).

Tables: ``small`` (``make_classification``: 200 training and 100 test rows, 6 informative
columns, 4 classes), ``wine`` (the paper split, seed 0, fitted on training and validation
rows) and ``large`` (``make_classification``: 1,250 training and 250 test rows, 64 columns,
10 classes; opt in, it takes long).

    python benchmarks/time_breakdown.py
    python benchmarks/time_breakdown.py --tables small --estimators ILRGPClassifier
    python benchmarks/time_breakdown.py --tables large --estimators ILRGPClassifier
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ESTIMATORS = ("ILRGPClassifier", "DirichletGPClassifier", "LogisticSoftmaxGPClassifier",
              "SoftmaxSVGPClassifier")
TABLES = ("small", "wine", "large")

_CHILD = r"""
import json, sys, time
start = time.perf_counter()
import numpy as np

which, table, fits = sys.argv[1], sys.argv[2], int(sys.argv[3])


def load(table):
    if table == "wine":
        from ppgpc.datasets import load as load_shipped, paper_split
        X, y = load_shipped("wine")
        y = np.unique(y, return_inverse=True)[1]  # classes 0..C-1 for the NLL
        s = paper_split(X, y, seed=0)
        return (np.concatenate([s.X_train, s.X_val]), np.concatenate([s.y_train, s.y_val]),
                s.X_test, s.y_test)
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split
    n_train, n_test, D, C = (200, 100, 6, 4) if table == "small" else (1250, 250, 64, 10)
    X, y = make_classification(n_samples=n_train + n_test, n_features=D,
                               n_informative=min(D, 6 if table == "small" else 16),
                               n_redundant=0, n_classes=C, n_clusters_per_class=1,
                               random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, train_size=n_train, random_state=0,
                                              stratify=y)
    return X_tr, y_tr, X_te, y_te


def nll(p, y):
    return float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-300, None))))


if which == "sklearn":
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    imported = time.perf_counter()
    X, y, X_test, y_test = load(table)
    model = make_pipeline(StandardScaler(), GaussianProcessClassifier()).fit(X, y)
    p = model.predict_proba(X_test)
    end = time.perf_counter()
    print(json.dumps({"fit": 0, "import": imported - start, "trace": 0, "compile": 0,
                      "cache": 0, "arith": end - imported, "predict": 0,
                      "total": end - start, "nll": nll(p, y_test)}))
    sys.exit(0)

import jax
import ppgpc

imported = time.perf_counter()
sums = {}


def listen(event, duration, **kwargs):
    sums[event] = sums.get(event, 0.0) + duration


jax.monitoring.register_event_duration_secs_listener(listen)
TRACE = ("/jax/core/compile/jaxpr_trace_duration",
         "/jax/core/compile/jaxpr_to_mlir_module_duration")
COMPILE = "/jax/core/compile/backend_compile_duration"
CACHE = "/jax/compilation_cache/cache_retrieval_time_sec"
X, y, X_test, y_test = load(table)
for k in range(fits):
    sums.clear()
    t0 = time.perf_counter()
    model = getattr(ppgpc, which)(progress=False).fit(X, y)
    t1 = time.perf_counter()
    fit_sums = dict(sums)
    p = model.predict_proba(X_test)
    t2 = time.perf_counter()
    trace = sum(fit_sums.get(e, 0.0) for e in TRACE)
    cache = fit_sums.get(CACHE, 0.0)
    compile_ = max(fit_sums.get(COMPILE, 0.0) - cache, 0.0)
    print(json.dumps({"fit": k, "import": imported - start if k == 0 else 0.0,
                      "trace": trace, "compile": compile_, "cache": cache,
                      "arith": (t1 - t0) - trace - compile_ - cache, "predict": t2 - t1,
                      "total": (t2 - start) if k == 0 else (t2 - t0),
                      "nll": nll(p, y_test),
                      "converged": bool(model.convergence_.converged)}), flush=True)
"""

COLUMNS = ("import", "trace", "compile", "cache", "arith", "predict", "total")


def _child(which: str, table: str, fits: int, cache_dir: str) -> list[dict]:
    env = {**os.environ, "PPGPC_COMPILATION_CACHE": cache_dir, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", _CHILD, which, table, str(fits)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{which} on {table} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _row(table: str, which: str, mode: str, r: dict) -> str:
    cells = " | ".join(f"{r[c]:.1f}" for c in COLUMNS)
    conv = "" if "converged" not in r else ("yes" if r["converged"] else "no")
    return f"| {table} | {which} | {mode} | {cells} | {r['nll']:.3f} | {conv} |"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=["small", "wine"], choices=TABLES)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=ESTIMATORS)
    parser.add_argument("--no-peer", action="store_true",
                        help="leave out scikit-learn's pipeline")
    args = parser.parse_args(argv)
    print("seconds; trace = tracing and lowering, compile = XLA less cache reads, cache = "
          "cache reads, arith = the rest of the fit")
    print("| table | estimator | process | " + " | ".join(COLUMNS) + " | test NLL | converged |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in COLUMNS) + " | --- | --- |")
    for table in args.tables:
        if not args.no_peer:
            (r,) = _child("sklearn", table, 1, "0")
            print(_row(table, "sklearn GPC pipeline", "fresh", r), flush=True)
        for which in args.estimators:
            with tempfile.TemporaryDirectory() as cache:
                cold, warm = _child(which, table, 2, cache)
                (filled,) = _child(which, table, 1, cache)
            for mode, r in (("empty", cold), ("filled", filled), ("warm", warm)):
                print(_row(table, which, mode, r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

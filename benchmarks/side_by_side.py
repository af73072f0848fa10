"""Two ppgpc processes on the same cores: how much does each lose against one alone?

JAX's CPU Cholesky and triangular solves call SciPy's OpenBLAS, whose idle threads spin
while they wait for work, so two processes that each keep a full pool take the cores from
each other's working threads. ppgpc holds OpenBLAS at one thread during its own fits and
predictions (``ppgpc.runtime.threads``); ``PPGPC_BLAS_THREADS=0`` turns that off, which is
what every fit did before. This script runs one workload in a fresh process alone, then two
copies at once, under both settings, with no ``OPENBLAS_NUM_THREADS`` set: the default
``ILRGPClassifier`` fit and prediction on 500 rows (``make_classification``: 6 columns, 4
classes; 100 test rows), then the default ``LogisticSoftmaxGPClassifier`` on 200 of them.
Every process has its compilation cache off, so each pays the same compilation. Columns:
wall seconds and user CPU seconds of each process (the median over the copies when two run
at once), and the ratio of the wall seconds to the same setting alone.

    python benchmarks/side_by_side.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

_CHILD = r"""
from sklearn.datasets import make_classification
from ppgpc import ILRGPClassifier, LogisticSoftmaxGPClassifier

X, y = make_classification(n_samples=600, n_features=6, n_informative=4, n_redundant=0,
                           n_classes=4, n_clusters_per_class=1, random_state=0)
ILRGPClassifier(progress=False).fit(X[:500], y[:500]).predict_proba(X[500:])
LogisticSoftmaxGPClassifier(progress=False).fit(X[:200], y[:200]).predict_proba(X[500:])
"""


def _run(copies: int, limited: bool) -> list[tuple[float, float]]:
    """Start ``copies`` workload processes at once; (wall s, user CPU s) of each."""
    env = {**os.environ, "PPGPC_COMPILATION_CACHE": "0", "PYTHONWARNINGS": "ignore"}
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "PPGPC_BLAS_THREADS"):
        env.pop(name, None)
    if not limited:
        env["PPGPC_BLAS_THREADS"] = "0"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(copies)]
    out = []
    for proc in procs:
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if proc.returncode != 0:
            raise RuntimeError(f"a workload process exited with {proc.returncode}")
        out.append((time.perf_counter() - start, rusage.ru_utime))
    return out


def main() -> None:
    print("| ppgpc's BLAS threads in a fit | processes | wall s | user CPU s | wall / alone |")
    print("| --- | --- | --- | --- | --- |")
    for limited in (True, False):
        alone = None
        for copies in (1, 2):
            runs = _run(copies, limited)
            wall = statistics.median(r[0] for r in runs)
            user = statistics.median(r[1] for r in runs)
            alone = wall if alone is None else alone
            label = "1 (default)" if limited else "unlimited (PPGPC_BLAS_THREADS=0)"
            print(f"| {label} | {copies} | {wall:.1f} | {user:.1f} | {wall / alone:.2f} |",
                  flush=True)

if __name__ == "__main__":
    main()

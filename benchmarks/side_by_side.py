"""Two ppgpc processes on the same cores: how much does each lose, and does limiting
OpenBLAS's threads help?

JAX's CPU Cholesky and triangular solves call SciPy's OpenBLAS, whose idle threads spin
while they wait for work. This script runs one workload in a fresh process alone, then
two copies at once, under two settings: OpenBLAS's default thread count and
``OPENBLAS_NUM_THREADS=1``. The workload is the MCMC part of notebook 04 at its small
size on wine's paper split: ILR-GP by NUTS on its collapsed form (isotropic RBF kernel,
epsilon 0.999, 2 chains of 100 draws after 100 warm-up steps), then the logistic-softmax
GP by blocked Gibbs (2 chains of 100 sweeps after 100). Every process has its compilation
cache off, so each pays the same compilation. Columns: wall seconds and user CPU seconds
of each process (the median over the copies when two run at once).

    python benchmarks/side_by_side.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

_CHILD = r"""
import numpy as np
from ppgpc import ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.datasets import load, paper_split

X, y = load("wine")
split = paper_split(X, y, seed=0)
X_fit = np.concatenate([split.X_train, split.X_val])
y_fit = np.concatenate([split.y_train, split.y_val])
ILRGPClassifier(epsilon=0.999, kernel="rbf", inference="nuts", progress=False,
                inference_options=dict(form="collapsed", num_warmup=100, num_samples=100,
                                       num_chains=2)).fit(X_fit, y_fit)
LogisticSoftmaxGPClassifier(inference="gibbs", progress=False, inference_options=dict(
    num_chains=2, num_warmup=100, num_samples=100, thinning=1)).fit(X_fit, y_fit)
"""


def _run(copies: int, blas_threads: str | None) -> list[tuple[float, float]]:
    """Start ``copies`` workload processes at once; (wall s, user CPU s) of each."""
    env = {**os.environ, "PPGPC_COMPILATION_CACHE": "0", "PYTHONWARNINGS": "ignore"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
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
    print(f"{'OpenBLAS threads':>16} | {'processes':>9} | {'wall s':>7} | {'user CPU s':>10}")
    print(f"{'-' * 16}-|-{'-' * 9}-|-{'-' * 7}-|-{'-' * 10}")
    for blas in (None, "1"):
        for copies in (1, 2):
            runs = _run(copies, blas)
            wall = statistics.median(r[0] for r in runs)
            user = statistics.median(r[1] for r in runs)
            label = "default" if blas is None else blas
            print(f"{label:>16} | {copies:>9} | {wall:7.1f} | {user:10.1f}", flush=True)


if __name__ == "__main__":
    main()

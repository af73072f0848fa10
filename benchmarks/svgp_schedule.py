"""Which SVI schedule should ``SoftmaxSVGPClassifier`` use between 300 and 5000 points?

Two schedules, each fitted on N training points of two data sets with heavily overlapping
classes, scored on 1000 held-out points:

* ``minibatch``: minibatches of B = 256 and 5000 Adam steps at peak rate 0.01 (the
  estimator's default whenever N > 256 before this benchmark);
* ``full``: every step sees all N points, 2000 Adam steps at 0.1 (the estimator's default for
  N <= 256, chosen by ``benchmarks/svgp_steps.py``).

Data: the UCI MAGIC gamma telescope set (``magic``, C = 2, D = 10, from ``PPGPC_DATA_DIR``;
the N training and 1000 test points drawn without overlap, stratified, seed 0) and the
circle mixture of ``ppgpc.datasets.synthetic`` with C = 5 classes and noise 0.4 (D = 2).
Each fit runs in a fresh Python process with an empty compilation cache, so the seconds
are what a user meets (compilation included); a fit that runs past ``--timeout`` seconds
is reported as such. Columns: test NLL, accuracy, whether the SVI convergence check passed,
and the fit's wall time.

    python benchmarks/svgp_schedule.py
    python benchmarks/svgp_schedule.py --sizes 300 1000 --datasets mixture5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SCHEDULES = {
    "minibatch": {"batch_size": 256, "max_iter": 5000, "learning_rate": 0.01},
    "full": {"batch_size": None, "max_iter": 2000, "learning_rate": 0.1},
}
DATASETS = ("magic", "mixture5")
N_TEST = 1000

_CHILD = r"""
import json, sys, time, warnings
import numpy as np
from sklearn.model_selection import train_test_split
from ppgpc import SoftmaxSVGPClassifier
from ppgpc.evaluation import metrics

name, n, opts = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if name == "magic":
    from ppgpc.datasets import load
    X, y = load("magic")
    X, X_test, y, y_test = train_test_split(X, y, train_size=n, test_size=%(n_test)d,
                                            stratify=y, random_state=0)
else:
    from ppgpc.datasets.synthetic import mixture_problem
    p = mixture_problem(n, %(n_test)d, num_classes=5, sigma=0.4, seed=0)
    X, y, X_test, y_test = p.X_train, p.y_train, p.X_test, p.y_test
if opts.get("batch_size") is None:
    opts = {**opts, "batch_size": n}
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    clf = SoftmaxSVGPClassifier(progress=False, inference_options=opts).fit(X, y)
seconds = time.perf_counter() - start
probs = clf.predict_proba(X_test)
codes = np.searchsorted(clf.classes_, y_test)
print(json.dumps({"nll": float(metrics.nll(probs, codes)),
                  "accuracy": float(np.mean(probs.argmax(1) == codes)),
                  "converged": bool(clf.convergence_.converged), "seconds": seconds}))
""" % {"n_test": N_TEST}


def run(name: str, n: int, schedule: str, timeout: float) -> dict:
    env = dict(os.environ, PPGPC_COMPILATION_CACHE=tempfile.mkdtemp(prefix="ppgpc-cache-"))
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, name, str(n),
                              json.dumps(SCHEDULES[schedule])],
                             capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if out.returncode != 0:
        raise RuntimeError(f"{name} N={n} {schedule}: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[300, 1000, 5000])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--schedules", nargs="+", default=list(SCHEDULES), choices=SCHEDULES)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before a fit counts as too slow (default 300)")
    args = parser.parse_args(argv)
    print(f"{'data':<10}{'N':>6}  {'schedule':<10}{'NLL':>8}{'acc':>7}  {'conv':<5}{'fit s':>8}")
    for name in args.datasets:
        for n in args.sizes:
            for schedule in args.schedules:
                r = run(name, n, schedule, args.timeout)
                if "timeout" in r:
                    print(f"{name:<10}{n:>6}  {schedule:<10}{'-':>8}{'-':>7}  {'-':<5}"
                          f"{'>' + format(r['timeout'], '.0f'):>8}", flush=True)
                else:
                    print(f"{name:<10}{n:>6}  {schedule:<10}{r['nll']:>8.4f}{r['accuracy']:>7.3f}"
                          f"  {'yes' if r['converged'] else 'no':<5}{r['seconds']:>8.1f}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

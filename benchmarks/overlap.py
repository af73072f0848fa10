"""Calibration under heavily overlapping classes: Exact-ILR and GPD through their defaults.

The circle mixture of ``ppgpc.datasets.synthetic`` with C = 10 classes whose means lie on
the unit circle and isotropic noise of standard deviation 0.3 (neighbouring means are
2 sin(pi / 10) = 0.62 apart, so the classes overlap heavily): N = 2000 training and 1000
test points. Prints accuracy, NLL and top-label ECE of each estimator's defaults, the
smoothing level each chose, the fit time, and the Bayes-optimal classifier's scores (the
true class probabilities: the floor of the NLL).

    python benchmarks/overlap.py
    python benchmarks/overlap.py --n-train 1000 --seeds 0 1
"""

from __future__ import annotations

import argparse
import sys
import time

import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
from ppgpc import DirichletGPClassifier, ILRGPClassifier
from ppgpc.datasets.synthetic import mixture_problem
from ppgpc.evaluation import metrics
from ppgpc.experiments import print_table_header


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--sigma", type=float, default=0.3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    print_table_header(f"{'seed':>4s} {'model':10s} {'accuracy':>9s} {'NLL':>7s} {'ECE':>7s} "
                       f"{'chosen':>10s} {'fit s':>7s}")
    for seed in args.seeds:
        problem = mixture_problem(args.n_train, args.n_test, args.classes, args.sigma,
                                  seed=seed)
        truth = metrics.evaluate(problem.bayes_probabilities(problem.X_test), problem.y_test)
        print(f"{seed:4d} {'Bayes':10s} {truth['accuracy']:9.3f} {truth['nll']:7.3f} "
              f"{truth['ece']:7.3f} {'':>10s} {0.0:7.1f}", flush=True)
        for name, est in (("Exact-ILR", ILRGPClassifier(seed=seed)),
                          ("GPD", DirichletGPClassifier(seed=seed))):
            start = time.perf_counter()
            est.fit(problem.X_train, problem.y_train)
            seconds = time.perf_counter() - start
            s = est.evaluate(problem.X_test, problem.y_test)
            chosen = getattr(est, "epsilon_", None) or getattr(est, "alpha_eps_", None)
            print(f"{seed:4d} {name:10s} {s['accuracy']:9.3f} {s['nll']:7.3f} {s['ece']:7.3f} "
                  f"{chosen:10.6g} {seconds:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

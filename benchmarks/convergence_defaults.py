"""Do the estimators' defaults pass their own convergence check?

For each data set (wine, glass, thyroid: the shipped sets; iris: scikit-learn's copy) and
each estimator with its default settings (``ILRGPClassifier()``, ``DirichletGPClassifier()``,
``LogisticSoftmaxGPClassifier()``, ``SoftmaxSVGPClassifier()``), one fit on all the rows
under ``warnings.simplefilter("error", ppgpc.ConvergenceWarning)``, so a fit whose report
finds a problem raises. Prints one row per fit: the verdict, the report's one-line summary
(``est.convergence_``), R-hat and ESS where the fit drew chains, and the fit's seconds.
Each data set runs in one process, so the first fit of an estimator includes compilation.

Then, unless ``--no-negative``, two fits that must warn: a Gibbs run of 20 warm-up and 20
draws on 2 chains (the warning names R-hat) and an exact fit whose optimiser is stopped
after 2 iterations.

    python benchmarks/convergence_defaults.py
    python benchmarks/convergence_defaults.py --datasets wine --estimators LSM
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

ESTIMATORS = ("ILR", "GPD", "LSM", "SVGPC")
DATASETS = ("wine", "glass", "thyroid", "iris")


def load(name: str):
    if name == "iris":
        from sklearn.datasets import load_iris

        data = load_iris()
        return data.data, data.target
    from ppgpc.datasets import load as load_shipped

    return load_shipped(name)


def estimator(name: str):
    import ppgpc

    return {"ILR": ppgpc.ILRGPClassifier, "GPD": ppgpc.DirichletGPClassifier,
            "LSM": ppgpc.LogisticSoftmaxGPClassifier,
            "SVGPC": ppgpc.SoftmaxSVGPClassifier}[name](progress=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=ESTIMATORS)
    parser.add_argument("--no-negative", action="store_true",
                        help="skip the two fits that must warn")
    args = parser.parse_args(argv)

    import ppgpc

    failures = 0
    print("| data set | estimator | inference | verdict | max R-hat | min ESS bulk / tail | "
          "seconds | summary |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        X, y = load(dataset)
        for name in args.estimators:
            est = estimator(name)
            start = time.perf_counter()
            verdict = "converged"
            with warnings.catch_warnings():
                warnings.simplefilter("error", ppgpc.ConvergenceWarning)
                try:
                    est.fit(X, y)
                except ppgpc.ConvergenceWarning as warning:
                    verdict, failures = f"WARNS: {warning}", failures + 1
            seconds = time.perf_counter() - start
            report = est.convergence_ if hasattr(est, "result_") else None
            chains = getattr(report, "chains", None)
            rhat = "" if chains is None else f"{chains.max_rhat:.4f}"
            ess = "" if chains is None else f"{chains.min_ess_bulk:.0f} / {chains.min_ess_tail:.0f}"
            summary = "" if report is None else report.summary(estimator=True)
            print(f"| {dataset} | {name} | {est.inference} | {verdict[:9]} | {rhat} | {ess} | "
                  f"{seconds:.1f} | {summary} |", flush=True)

    if not args.no_negative:
        X, y = load("wine")
        short = [
            ("Gibbs, 20 warm-up + 20 draws, 2 chains",
             ppgpc.LogisticSoftmaxGPClassifier(
                 inference="gibbs", progress=False,
                 inference_options={"num_warmup": 20, "num_samples": 20, "num_chains": 2})),
            ("ILR exact, L-BFGS stopped after 2 iterations",
             ppgpc.ILRGPClassifier(inference="exact", epsilon=0.99, tau=0.1, progress=False,
                                   inference_options={"max_iter": 2})),
        ]
        for what, est in short:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est.fit(X, y)
            mine = [w for w in caught if issubclass(w.category, ppgpc.ConvergenceWarning)]
            print(f"\n{what}: {len(mine)} ConvergenceWarning(s)")
            for w in mine:
                print(f"  {w.message}")
            failures += len(mine) != 1
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

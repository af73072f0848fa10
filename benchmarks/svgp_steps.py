"""How many full-batch SVI steps does ``SoftmaxSVGPClassifier``'s default need to converge?

For each step count (``max_iter``, at the full-batch default learning rate 0.1) and each data
set (wine, glass, thyroid, iris), five splits (``paper_split(X, y, seed=s)``, s = 0..4),
``SoftmaxSVGPClassifier(inference_options={"max_iter": steps})`` fitted on the training and
validation points (as the main job, ``ppgpc compare``, fits them): how many fits passed the SVI
convergence check (``est.convergence_``), the test NLL (mean +- s.d.), and the fit seconds (median
of splits 1-4, one process per step count, so split 0 includes compilation).

    python benchmarks/svgp_steps.py
    python benchmarks/svgp_steps.py --steps 500 1000 --datasets wine
    python benchmarks/svgp_steps.py --steps 500 1000 --options '{"natural_gradient": 0.1}'
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

DATASETS = ("wine", "glass", "thyroid", "iris")


def load(name: str):
    if name == "iris":
        from sklearn.datasets import load_iris

        return load_iris(return_X_y=True)
    from ppgpc.datasets import load as load_shipped

    return load_shipped(name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", nargs="+", type=int, default=[500, 1000, 2000])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--options", default=None,
                        help="JSON inference_options added to every fit, e.g. "
                             "'{\"natural_gradient\": 0.1}'")
    args = parser.parse_args(argv)
    extra = json.loads(args.options) if args.options else {}

    import ppgpc
    from ppgpc.datasets import paper_split

    print("| steps | data set | converged | test NLL | seconds (warm) |")
    print("| --- | --- | --- | --- | --- |")
    for steps in args.steps:
        for dataset in args.datasets:
            X, y = load(dataset)
            converged, nll, seconds = [], [], []
            for seed in range(5):
                split = paper_split(X, y, seed=seed)
                est = ppgpc.SoftmaxSVGPClassifier(
                    progress=False, inference_options={"max_iter": steps, **extra})
                X_fit = np.concatenate([split.X_train, split.X_val])
                y_fit = np.concatenate([split.y_train, split.y_val])
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ppgpc.ConvergenceWarning)
                    est.fit(X_fit, y_fit)
                seconds.append(time.perf_counter() - start)
                nll.append(est.evaluate(split.X_test, split.y_test)["nll"])
                converged.append(est.convergence_.converged)
            print(f"| {steps} | {dataset} | {sum(converged)}/5 | {np.mean(nll):.4f} +- "
                  f"{np.std(nll, ddof=1):.4f} | {np.median(seconds[1:]):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

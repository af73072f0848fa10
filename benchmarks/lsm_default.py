"""Which inference should ``LogisticSoftmaxGPClassifier`` use by default?

For each data set (wine, glass, thyroid) and each inference (``"gibbs"``, ``"cavi"``,
``"nuts"``, each with the estimator's defaults for it, or with ``--options`` JSON added),
five splits (``ppgpc.datasets.paper_split(X, y, seed=s)``, s = 0..4: 50 stratified test
points), one fit per split on the training points, scored on the test points: accuracy,
NLL, top-label ECE, the fit's seconds, and whether its convergence report passed
(``est.convergence_``; the worst R-hat and the smallest bulk ESS for samplers).

Every (data set, inference) runs in its own fresh process, so the first split's time
includes compilation (``cold``) and the others show a warm process (``warm``: their median).

    python benchmarks/lsm_default.py
    python benchmarks/lsm_default.py --datasets wine --inference nuts --options '{"num_chains": 4}'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

DATASETS = ("wine", "glass", "thyroid")
INFERENCE = ("gibbs", "cavi", "nuts")
SEEDS = (0, 1, 2, 3, 4)
_TAG = "LSM_DEFAULT_JSON "


def child(dataset: str, inference: str, options: dict | None, seeds) -> None:
    import warnings

    import ppgpc
    from ppgpc.datasets import load, paper_split

    X, y = load(dataset)
    for seed in seeds:
        split = paper_split(X, y, seed=seed)
        est = ppgpc.LogisticSoftmaxGPClassifier(inference=inference, progress=False,
                                                inference_options=options)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ppgpc.ConvergenceWarning)
            est.fit(split.X_train, split.y_train)
        seconds = time.perf_counter() - start
        scores = est.evaluate(split.X_test, split.y_test)
        report = est.convergence_
        chains = report.chains
        print(_TAG + json.dumps({
            "seed": seed, "seconds": seconds, "accuracy": scores["accuracy"],
            "nll": scores["nll"], "ece": scores["ece"], "converged": report.converged,
            "rhat": None if chains is None else chains.max_rhat,
            "ess": None if chains is None else min(chains.min_ess_bulk, chains.min_ess_tail),
            "summary": report.summary(estimator=True)}), flush=True)


def run(dataset: str, inference: str, options: dict | None) -> list[dict]:
    cmd = [sys.executable, __file__, "--child", dataset, inference,
           json.dumps(options or {})]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    rows = [json.loads(line[len(_TAG):]) for line in out.stdout.splitlines()
            if line.startswith(_TAG)]
    if out.returncode or len(rows) != len(SEEDS):
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit(f"child {dataset} {inference} failed")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--inference", nargs="+", default=list(INFERENCE), choices=INFERENCE)
    parser.add_argument("--options", default=None,
                        help="JSON inference_options added to every fit")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        dataset, inference, options = args.child
        child(dataset, inference, json.loads(options) or None, SEEDS)
        return 0

    import numpy as np

    options = json.loads(args.options) if args.options else None
    print("| data set | inference | accuracy | NLL | ECE | cold s | warm s | converged | "
          "max R-hat | min ESS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dataset in args.datasets:
        for inference in args.inference:
            rows = run(dataset, inference, options)

            def stat(key):
                v = np.array([r[key] for r in rows], dtype=float)
                return f"{v.mean():.3f} +- {v.std(ddof=1):.3f}"

            rhat = [r["rhat"] for r in rows if r["rhat"] is not None]
            ess = [r["ess"] for r in rows if r["ess"] is not None]
            print(f"| {dataset} | {inference} | {stat('accuracy')} | {stat('nll')} | "
                  f"{stat('ece')} | {rows[0]['seconds']:.1f} | "
                  f"{np.median([r['seconds'] for r in rows[1:]]):.1f} | "
                  f"{sum(r['converged'] for r in rows)}/{len(rows)} | "
                  f"{max(rhat):.3f} | {min(ess):.0f} |" if rhat else
                  f"| {dataset} | {inference} | {stat('accuracy')} | {stat('nll')} | "
                  f"{stat('ece')} | {rows[0]['seconds']:.1f} | "
                  f"{np.median([r['seconds'] for r in rows[1:]]):.1f} | "
                  f"{sum(r['converged'] for r in rows)}/{len(rows)} | | |", flush=True)
            for r in rows:
                if not r["converged"]:
                    print(f"  <!-- {dataset} {inference} seed {r['seed']}: "
                          f"{r['summary']} -->", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

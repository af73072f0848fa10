"""How the test NLL of a saved sparse variational fit depends on its predictive draws.

An SVGPC / Uncollapsed-ILR fit predicts p(y* | x*) = E_q[link(f*)] by the mean over S draws
of q(v). The NLL of that mean, -log(mean_s p_s), is biased upwards by Jensen's inequality,
by about Var(p_s) / (2 S p^2) per point (the delta method), so a fit scored with few draws
looks worse than it is. This script takes a fit saved by ``uci_sparse.py --save-dir`` with
many draws, rebuilds its test split, and scores it with the first S draws and with disjoint
blocks of S draws (their mean estimates the expected NLL at S draws, their spread its Monte
Carlo error), for S from 64 up to all the fit has.

    python benchmarks/uci_sparse.py --datasets letter --models Uncollapsed-ILR --per-latent \\
        --batch-size 512 --min-svi-steps 10000 --num-draws 4096 --save-dir fits
    python benchmarks/predictive_draws.py fits/letter_Uncollapsed-ILR_seed0
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import numpy as np

from ppgpc.evaluation import metrics
from ppgpc.experiments import benchmark_split
from ppgpc.io.persistence import load as load_estimator

_NAME = re.compile(r"^(?P<dataset>[a-z0-9]+)_(?P<model>.+)_seed(?P<seed>\d+)$")


def _test_split(path: Path):
    """The saved fit's dataset, seed and paper test split, from the folder name that
    ``uci_sparse.py --save-dir`` gives it."""
    match = _NAME.match(path.name)
    if match is None:
        raise ValueError(f"{path.name!r} is not a uci_sparse.py --save-dir folder name "
                         "(<dataset>_<model>_seed<k>)")
    dataset = match["dataset"]
    split = benchmark_split(dataset, int(match["seed"]))
    return dataset, match["model"], split.X_test, split.y_test


def _scores(estimator, draws, X_test, codes) -> dict:
    """Metrics of the fit predicting with the whitened inducing draws ``draws`` (1, S, M, L)."""
    full = estimator.result_
    try:
        estimator.result_ = dataclasses.replace(full, inducing=draws)
        return metrics.evaluate(estimator.predict_proba(X_test), codes)
    finally:
        estimator.result_ = full


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fit", type=Path, help="a folder written by uci_sparse.py --save-dir")
    parser.add_argument("--min-draws", type=int, default=64)
    args = parser.parse_args(argv)

    dataset, model, X_test, y_test = _test_split(args.fit)
    estimator = load_estimator(args.fit)
    inducing = estimator.result_.inducing
    if inducing is None:
        raise SystemExit(f"{args.fit} holds a {type(estimator).__name__} fit without inducing "
                         "draws; this script scores SVGPC / Uncollapsed-ILR fits")
    total = inducing.shape[1]
    codes = estimator.encode_classes(y_test, X_test.shape[0])
    print(f"{dataset} {model}: {X_test.shape[0]} test points, {total} saved draws of q(v)")
    print(f"{'S':>6s} {'accuracy':>9s} {'NLL, first S':>13s} {'NLL, blocks of S':>22s} "
          f"{'blocks':>7s}")
    size = args.min_draws
    while size <= total:
        first = _scores(estimator, inducing[:, :size], X_test, codes)
        blocks = [_scores(estimator, inducing[:, a:a + size], X_test, codes)["nll"]
                  for a in range(0, total - size + 1, size)]
        spread = (f"{np.mean(blocks):.4f} ± {np.std(blocks, ddof=1) / np.sqrt(len(blocks)):.4f}"
                  if len(blocks) > 1 else f"{blocks[0]:.4f}")
        print(f"{size:6d} {first['accuracy']:9.4f} {first['nll']:13.4f} {spread:>22s} "
              f"{len(blocks):7d}", flush=True)
        size *= 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

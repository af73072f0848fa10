"""The inducing-point Gibbs sampler of the logistic-softmax GP against the sparse CAVI on a
UCI set (issue 40: on magic, N = 14020, M = 200, the sampler should reach the sparse CAVI's
test NLL within 0.02 in under 10 minutes, its preliminary fit included).

For one seeded paper split (``ppgpc.experiments.run_split``, the split and scaling of
``benchmarks/uci_sparse.py``), two rows:

* Sparse-LSM: the stochastic sparse CAVI exactly as ``uci_sparse.py`` runs it (minibatches
  of 128 points, ``--lsm-iterations`` iterations, M inducing inputs);
* inducing Gibbs: ``LogisticSoftmaxGPClassifier(num_inducing=M, inference="gibbs")`` with
  the library's defaults for everything but the chain lengths, i.e. the sparse CAVI's
  type-II MAP point (kernel hyperparameters and inducing inputs) fitted first, then
  ``--chains`` chains of ``--warmup`` + ``--samples`` sweeps; its seconds include that fit.

Prints accuracy, NLL, top-label ECE (10 bins) and fit seconds per row, and for the Gibbs
chains the rank-normalised split R-hat and bulk ESS (ArviZ) of the test points' class
probabilities, of the whitened inducing values v, of their class-mean level and of their
contrasts; the test NLL of each chain alone; and the mean Poisson count at the start and
end of each chain.

    PPGPC_DATA_DIR=/path/to/uci python benchmarks/gibbs_sparse.py --dataset magic
"""

from __future__ import annotations

import argparse
import sys
import time

import arviz as az
import numpy as np

from ppgpc.estimators import LogisticSoftmaxGPClassifier
from ppgpc.evaluation import metrics
from ppgpc.experiments import benchmark_split, run_split


def _diagnostics(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised split R-hat and bulk ESS (ArviZ) of every entry of (chain, draw, ...)
    draws, flattened."""
    data = az.convert_to_inference_data({"x": draws})
    return (np.ravel(az.rhat(data)["x"].values),
            np.ravel(az.ess(data, method="bulk")["x"].values))


def _summary(name: str, draws: np.ndarray) -> str:
    rhat, ess = _diagnostics(draws)
    return (f"{name}: R-hat max {rhat.max():.3f} / median {np.median(rhat):.3f} "
            f"({np.mean(rhat > 1.01):.0%} above 1.01), bulk ESS min {ess.min():.0f} / "
            f"median {np.median(ess):.0f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="magic")
    parser.add_argument("--seed", type=int, default=0, help="split and model seed")
    parser.add_argument("--num-inducing", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=["Sparse-LSM", "inducing Gibbs"],
                        choices=["Sparse-LSM", "inducing Gibbs"])
    parser.add_argument("--lsm-iterations", type=int, default=1000,
                        help="Sparse-LSM: stochastic CAVI iterations (one minibatch each)")
    parser.add_argument("--warmup", type=int, default=200, help="Gibbs warm-up sweeps")
    parser.add_argument("--samples", type=int, default=300, help="Gibbs draws per chain")
    parser.add_argument("--chains", type=int, default=2, help="Gibbs chains (vectorised)")
    parser.add_argument("--progress", action="store_true", help="progress bars (stderr)")
    args = parser.parse_args(argv)
    M = args.num_inducing

    print(f"{args.dataset}, split seed {args.seed}, M = {M}; Gibbs: {args.chains} chains of "
          f"{args.warmup} + {args.samples} sweeps after the sparse CAVI's point; Sparse-LSM: "
          f"{args.lsm_iterations} stochastic CAVI iterations of 128 points")
    print(f"{'model':16s} {'N':>6s} {'acc':>6s} {'NLL':>6s} {'ECE':>6s} {'fit s':>7s}   "
          "diagnostics")
    for model in args.models:
        if model == "Sparse-LSM":
            run = run_split(args.dataset, "Sparse-LSM", args.seed, num_inducing=M,
                            progress=args.progress,
                            inference_options={"max_iter": args.lsm_iterations})
            extra = ""
        else:
            def make(seed, **options):
                return LogisticSoftmaxGPClassifier(seed=seed, **options)

            options = {"num_warmup": args.warmup, "num_samples": args.samples,
                       "num_chains": args.chains}
            # (a registry name for run_split; the factory builds the estimator)
            run = run_split(args.dataset, "Sparse-LSM", args.seed, factory=make, num_inducing=M,
                            inference="gibbs", progress=args.progress,
                            inference_options=options)
            est = run.estimator
            res = est.result_
            start = time.perf_counter()
            X_test = benchmark_split(args.dataset, args.seed).X_test
            probs = np.asarray(res.predict_proba_draws(X_test))     # raw X; (chain, draw, n, C)
            v = np.asarray(res.inducing)                               # (chain, draw, M, C)
            y_test = est.encode_classes(benchmark_split(args.dataset, args.seed).y_test,
                                       X_test.shape[0])
            chain_nll = [metrics.nll(p / p.sum(1, keepdims=True), y_test)
                         for p in probs.mean(axis=1)]
            count = np.asarray(res.sample_stats["mean_count"])         # (chain, draw)
            tenth = max(1, count.shape[1] // 10)
            info = res.info
            extra = "\n    ".join([
                "",
                _summary("test probabilities", probs),
                _summary("v", v),
                _summary("level mean_c v", v.mean(-1)),
                _summary("contrasts v - mean_c v", v - v.mean(-1, keepdims=True)),
                "test NLL by chain: " + ", ".join(f"{x:.4f}" for x in chain_nll),
                "mean count by chain, first / last tenth of the draws: " + ", ".join(
                    f"{c[:tenth].mean():.2f} / {c[-tenth:].mean():.2f}" for c in count),
                f"kernel variance {float(np.ravel(res.hypers['kernel_variance'])[0]):.2f}; "
                f"preliminary fit: {info.hyperparameters}, "
                f"{info.cavi and info.cavi.iterations} iterations; diagnostics "
                f"{time.perf_counter() - start:.0f} s"])
        n_train = run.estimator.result_.data.X.shape[0]
        print(f"{model:16s} {n_train:6d} {run.accuracy:6.3f} {run.nll:6.3f} {run.ece:6.3f} "
              f"{run.fit_seconds:7.1f}   {extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

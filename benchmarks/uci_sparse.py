"""The ILR paper's sparse-setting UCI benchmark: Collapsed-ILR, sparse GPD, SVGPC,
Uncollapsed-ILR and the logistic-softmax GP (Sparse-LSM), 200 inducing points.

For each dataset and seed: the paper's test size (``DATASETS[name].paper_n_test``, stratified
``paper_split``), the classifier is fitted on the rest (optionally subsampled with
``--max-train``) with its smoothing parameter at the value the paper's validation selected
(``ppgpc.experiments.PAPER_SPARSE_OPTIONS``), inducing inputs from k-means++ and optimised
with the kernel hyperparameters (type-II ML of Titsias's bound, by L-BFGS or with
``--hyper-optimizer adam`` by ``--max-iter`` Adam steps; SVGPC and Uncollapsed-ILR
maximise their ELBO by minibatch SVI: Adam at the paper's learning rate 0.01, warm-up and
cosine decay, ``--svi-epochs`` epochs of ``--batch-size`` minibatches, at least
``--min-svi-steps`` steps; Sparse-LSM runs ``--lsm-iterations`` iterations of the
stochastic CAVI, minibatches of 128 points, ``LogisticSoftmaxGPClassifier(inference=
"cavi")`` with a ``batch_size``). Prints accuracy, NLL and
top-label ECE (10 bins), fit seconds, and the paper's row. Datasets come from
``PPGPC_DATA_DIR``.

    PPGPC_DATA_DIR=/path/to/uci python benchmarks/uci_sparse.py --max-train 2000
    python benchmarks/uci_sparse.py --datasets magic --seeds 1          # full data
    python benchmarks/uci_sparse.py --datasets letter --models Collapsed-ILR --per-latent \
        --learn-noise-scale --hyper-optimizer adam --max-iter 100       # letter, 19 min
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ppgpc.estimators import SoftmaxSVGPClassifier
from ppgpc.experiments import (PAPER_COMPARISON_HEADER, PAPER_SPARSE, PAPER_SPARSE_OPTIONS,
                               SPARSE_CLASSIFIERS, SVI_SPARSE_MODELS, paper_comparison_cells,
                               print_table_header, run_split, summarize)


def _svi_options(args, dataset: str) -> dict:
    """SVGPC / Uncollapsed-ILR options: steps from the epochs at the training size."""
    from ppgpc.datasets import DATASETS, load

    n = len(load(dataset)[1]) - DATASETS[dataset].paper_n_test
    n = min(n, args.max_train) if args.max_train else n
    steps = max(args.min_svi_steps, int(args.svi_epochs * n / min(args.batch_size, n)))
    inference_options = {"batch_size": min(args.batch_size, n), "max_iter": steps,
                         "learning_rate": args.learning_rate, "num_draws": args.num_draws,
                         "tol": None}
    if args.natural_gradient is not None:
        inference_options["natural_gradient"] = args.natural_gradient
    if args.validation_fraction is not None:
        inference_options["validation_fraction"] = args.validation_fraction
    options = {"num_inducing": args.num_inducing, "progress": args.progress,
               "shared_kernel": not args.per_latent, "shared_inducing": not args.per_latent,
               "kernel": _kernel(args), "kernel_prior": args.kernel_prior,
               "inference_options": inference_options}
    prepare = {k: v for k, v in (("ell_estimator", args.ell_estimator),
                                 ("variance_prior_on", args.variance_prior_on),
                                 ("initial_lengthscale", args.initial_lengthscale),
                                 ("initial_variance", args.initial_variance))
               if v != PREPARE_DEFAULTS[k]}
    if prepare:  # options of the model's prepare that are no estimator options
        options["prepare_options"] = prepare
    return options


PREPARE_DEFAULTS = {"ell_estimator": None, "variance_prior_on": "kernel",
                    "initial_lengthscale": None, "initial_variance": 1.0}
"""The ``--ell-estimator`` ... flags at which the estimator's own choice applies."""


class SVGPWithPrepareOptions(SoftmaxSVGPClassifier):
    """``SoftmaxSVGPClassifier`` whose SVI fits also pass ``prepare_options`` to the model's
    ``prepare`` (``ppgpc.models.svgp.prepare``): the options this benchmark measured
    and that left the estimator's API (``ell_estimator``, ``variance_prior_on``,
    ``initial_lengthscale``, ``initial_variance``). Not saveable (not one of ppgpc's
    estimators)."""

    def __init__(self, *, prepare_options: dict | None = None, **params):
        super().__init__(**params)
        self.prepare_options = prepare_options

    def _svi_model_options(self, num_samples: int, natural_gradient) -> dict:
        return {**super()._svi_model_options(num_samples, natural_gradient),
                **(self.prepare_options or {})}


def _svgp_factory(link: str):
    """A ``run_split`` factory of ``SVGPWithPrepareOptions`` with ``link``."""
    def make(seed: int, **options):
        return SVGPWithPrepareOptions(seed=seed, link=link, **options)
    return make


def _kernel(args):
    """The SVI models' kernel: the ``--kernel`` name, or that kernel with its lengthscale
    prior's width set when ``--lengthscale-prior-scale`` differs from the default."""
    from ppgpc.gp.kernels import make_kernel

    if args.lengthscale_prior_scale == 1.0:
        return args.kernel
    return dataclasses.replace(make_kernel(args.kernel),
                               lengthscale_prior_scale=args.lengthscale_prior_scale)


def _hyper_optimizer(args) -> str:
    if args.hyper_optimizer == "adam":
        return f"{args.max_iter} Adam steps at learning rate {args.hyper_learning_rate}"
    return f"L-BFGS, at most {args.max_iter} iterations"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["letter", "magic", "htru2", "eeg"])
    parser.add_argument("--models", nargs="+", default=list(SPARSE_CLASSIFIERS))
    parser.add_argument("--seeds", type=int, default=1, help="how many seeded splits")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first split's seed (seeds first..first+seeds-1), to run the "
                             "seeds of one table as separate jobs")
    parser.add_argument("--num-inducing", type=int, default=200)
    parser.add_argument("--max-train", type=int, default=None,
                        help="subsample the training points (quick runs)")
    parser.add_argument("--max-iter", type=int, default=500,
                        help="collapsed models: L-BFGS iterations at most, or Adam steps")
    parser.add_argument("--hyper-optimizer", choices=["lbfgs", "adam"], default="lbfgs",
                        help="collapsed models: the type-II ML optimiser")
    parser.add_argument("--hyper-learning-rate", type=float, default=0.1,
                        help="collapsed models: Adam's step size (with --hyper-optimizer adam)")
    parser.add_argument("--num-draws", type=int, default=256, help="predictive draws")
    parser.add_argument("--batch-size", type=int, default=256, help="SVI minibatch size")
    parser.add_argument("--svi-epochs", type=float, default=20, help="SVI epochs")
    parser.add_argument("--min-svi-steps", type=int, default=3000, help="SVI steps at least")
    parser.add_argument("--learning-rate", type=float, default=0.01, help="SVI learning rate")
    parser.add_argument("--lsm-iterations", type=int, default=1000,
                        help="Sparse-LSM: stochastic CAVI iterations (one minibatch each)")
    parser.add_argument("--natural-gradient", type=float, default=None, metavar="GAMMA",
                        help="SVGPC / Uncollapsed-ILR: natural-gradient steps of size GAMMA "
                             "on q(u), Adam on the rest (Salimbeni et al. 2018)")
    parser.add_argument("--ell-estimator", choices=["marginal", "price", "joint"], default=None,
                        help="SVGPC / Uncollapsed-ILR: Monte Carlo form of the expected "
                             "log-likelihood (default: 'price' with --natural-gradient, "
                             "else 'marginal')")
    parser.add_argument("--progress", action="store_true", help="SVI progress bars (stderr)")
    parser.add_argument("--per-latent", action="store_true",
                        help="SVGPC / Uncollapsed-ILR: a kernel and M inducing inputs per "
                             "latent (GPyTorch's batch-shaped multitask SVGP, as the paper's "
                             "baselines), instead of one set shared by the latents; "
                             "Collapsed-ILR / Sparse-GPD: M inducing inputs per ILR "
                             "coordinate / class, one Titsias bound each "
                             "(shared_inducing=False)")
    parser.add_argument("--kernel", choices=["rbf-ard", "rbf", "matern52-ard", "matern52"],
                        default="rbf-ard",
                        help="SVGPC / Uncollapsed-ILR: RBF with a lengthscale per input "
                             "(default) or one shared lengthscale (GPyTorch's RBFKernel "
                             "without ard_num_dims); or the Matern-5/2 kernel, likewise")
    parser.add_argument("--kernel-prior", action="store_true",
                        help="SVGPC / Uncollapsed-ILR: type-II MAP of the kernel "
                             "hyperparameters (the ELBO plus the kernel's log prior) instead "
                             "of type-II ML")
    parser.add_argument("--variance-prior-on", choices=["kernel", "mixed"], default="kernel",
                        help="SVGPC / Uncollapsed-ILR with --kernel-prior: the variance "
                             "prior on each latent's kernel variance (default) or on its "
                             "amplitude after the mixing matrix, var_l |W[:, l]|^2")
    parser.add_argument("--lengthscale-prior-scale", type=float, default=1.0, metavar="S",
                        help="SVGPC / Uncollapsed-ILR with --kernel-prior: the standard "
                             "deviation of log lengthscale under the prior "
                             "LogNormal(log sqrt(D), S) (default 1)")
    parser.add_argument("--initial-lengthscale", type=float, default=None,
                        help="SVGPC / Uncollapsed-ILR: SVI's starting lengthscales (default: "
                             "sqrt(D); GPyTorch's start is 0.693)")
    parser.add_argument("--initial-variance", type=float, default=1.0,
                        help="SVGPC / Uncollapsed-ILR: SVI's starting kernel variance "
                             "(default 1; GPyTorch's start is 0.693)")
    parser.add_argument("--standardize", choices=["zscore", "robust", "minmax"],
                        default="zscore",
                        help="input scaling: z-scores, median / IQR (for eeg, whose few "
                             "extreme rows set the z-score scale) or min-max onto [0, 1] "
                             "(the paper's other preprocessing; its Table 3 names z-scores "
                             "only for some rows)")
    parser.add_argument("--learn-noise-scale", action="store_true",
                        help="Collapsed-ILR / Sparse-GPD: fit a factor on the noise "
                             "variance (one per class for GPD, per ILR coordinate with "
                             "--per-latent) with the hyperparameters (the paper's 'more "
                             "flexible likelihood')")
    parser.add_argument("--validation-fraction", type=float, default=None, metavar="F",
                        help="SVI models: hold out a stratified share F of the training "
                             "points, score their NLL every 100 steps and keep the iterate "
                             "with the lowest (the paper selects by validation NLL); the "
                             "trace is printed")
    parser.add_argument("--save-dir", default=None,
                        help="save each fitted estimator to SAVE_DIR/<dataset>_<model>_seed<k> "
                             "(netCDF and JSON, ppgpc.io.persistence) for later re-scoring")
    args = parser.parse_args(argv)
    scaling = {"standardize": args.standardize}

    last_seed = args.first_seed + args.seeds - 1
    print(f"{args.num_inducing} inducing points; max_train={args.max_train}; seeds "
          f"{args.first_seed}..{last_seed}; inputs scaled by {args.standardize}; "
          f"paper smoothing values; "
          f"type-II ML (collapsed models): {_hyper_optimizer(args)}; learned noise scale "
          f"(collapsed models): {args.learn_noise_scale}; per-latent kernels and inducing "
          f"inputs (SVI models; collapsed models: inducing inputs): {args.per_latent}; "
          f"natural-gradient step on q(u) (SVI models): {args.natural_gradient}; "
          f"validation hold-out (SVI models): {args.validation_fraction}; kernel (SVI "
          f"models): {args.kernel}, prior: {args.kernel_prior} (variance prior on "
          f"{args.variance_prior_on}; log-lengthscale s.d. {args.lengthscale_prior_scale}), "
          f"start: lengthscale "
          f"{args.initial_lengthscale or 'sqrt(D)'}, variance {args.initial_variance}; "
          f"Sparse-LSM: {args.lsm_iterations} stochastic CAVI iterations; 'ok' = "
          f"within one paper s.d. or better")
    print_table_header(f"{'dataset':8s} {'model':14s} {'N':>6s} {PAPER_COMPARISON_HEADER}")
    for dataset in args.datasets:
        for model in args.models:
            options = {"num_inducing": args.num_inducing,
                       "inference_options": {"max_iter": args.max_iter,
                                             "num_draws": args.num_draws,
                                             "optimizer": args.hyper_optimizer,
                                             "learning_rate": args.hyper_learning_rate},
                       "progress": args.progress,
                       **PAPER_SPARSE_OPTIONS.get((dataset, model), {})}
            if model in SVI_SPARSE_MODELS:
                options = _svi_options(args, dataset)
            elif model == "Sparse-LSM":
                options = {"num_inducing": args.num_inducing,
                           "inference_options": {"max_iter": args.lsm_iterations,
                                                 "num_draws": args.num_draws}}
            else:  # Collapsed-ILR, Sparse-GPD
                if args.learn_noise_scale:
                    options["learn_noise_scale"] = True
                if args.per_latent:
                    options["shared_inducing"] = False
            factory = None
            if "prepare_options" in options:
                factory = _svgp_factory("softmax" if model == "SVGPC" else "ilr")
            runs = [run_split(dataset, model, seed, max_train=args.max_train, **scaling,
                              factory=factory, **options)
                    for seed in range(args.first_seed, args.first_seed + args.seeds)]
            n_train = runs[0].estimator.result_.data.X.shape[0]
            if args.save_dir is not None:
                for run in runs:
                    run.estimator.save(Path(args.save_dir) / f"{dataset}_{model}_seed{run.seed}")
            cells = paper_comparison_cells(summarize(runs), PAPER_SPARSE.get((dataset, model)))
            print(f"{dataset:8s} {model:14s} {n_train:6d} {cells}", flush=True)
            if model in SVI_SPARSE_MODELS:
                for run in runs:
                    svi = run.estimator.result_.info.svi
                    held = run.estimator.result_.info.validation
                    print(f"    seed {run.seed}: final ELBO / N {svi.elbo / n_train:.4f} "
                          f"(mean of the last window), {svi.steps} steps, "
                          f"{svi.seconds_per_step:.3f} s/step", flush=True)
                    if held is not None:
                        trace = " ".join(f"{step}:{nll:.4f}" for step, nll in
                                         zip(held.steps, held.nll))
                        print(f"    seed {run.seed}: validation ({held.size} "
                              f"points) NLL best {held.best_nll:.4f} at step "
                              f"{held.best_step} (kept: {held.restored_best}); by "
                              f"step: {trace}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

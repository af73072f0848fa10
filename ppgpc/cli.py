"""The commands of the ``ppgpc`` command line (parsed by ``ppgpc_cli``, which imports this
module only after the arguments and output paths were checked).

Each command takes the parsed arguments and returns the exit code; a ValueError or OSError
it raises becomes ``ppgpc_cli``'s one-line error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from ppgpc.datasets import DATA_DIR_ENV, DATASETS, load, paper_split
from ppgpc.diagnostics import probability_map
from ppgpc.experiments import EXACT_CLASSIFIERS, run_split
from ppgpc.plotting import reliability_grid, save_figure

__all__ = ["COMMANDS", "compare", "fit", "datasets"]

_MODEL_ALIASES = {"ilr": "Exact-ILR", "exact-ilr": "Exact-ILR", "ilr_gp": "Exact-ILR",
                  "gpd": "GPD", "dirichlet_gp": "GPD", "lsm": "LSM", "logistic_softmax": "LSM",
                  "svgpc": "SVGPC", "svgp": "SVGPC", "softmax_svgp": "SVGPC"}


def _resolve_models(names, known) -> list[str]:
    """Model names (or their aliases) to keys of ``known``; a ValueError names unknown ones."""
    resolved = [_MODEL_ALIASES.get(n.lower(), n) for n in names]
    unknown = [n for n, r in zip(names, resolved) if r not in known]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; known: {list(known)} "
                         f"(aliases {sorted(_MODEL_ALIASES)})")
    return resolved


def _print_table(rows) -> None:
    header = f"{'model':12s} {'accuracy':>9s} {'NLL':>8s} {'ECE':>8s} {'Brier':>8s} {'fit s':>8s}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.model:12s} {r.accuracy:9.3f} {r.nll:8.3f} {r.ece:8.3f} {r.brier:8.3f} "
              f"{r.fit_seconds:8.1f}")


def compare(args) -> int:
    """``ppgpc compare``: every classifier (or ``--models``) on one split; a metrics table,
    a reliability diagram and an RGB probability map in ``--output-dir``."""
    rows = []
    models = list(EXACT_CLASSIFIERS) if args.models is None else _resolve_models(
        args.models, EXACT_CLASSIFIERS)
    for model in models:
        print(f"fitting {model} on {args.dataset} (seed {args.seed}) ...", flush=True)
        rows.append(run_split(args.dataset, model, args.seed, data_dir=args.data_dir,
                              max_train=args.max_train))
        print(f"  {model}: fitted in {rows[-1].fit_seconds:.1f} s", flush=True)
    print()
    print(f"{args.dataset}: {rows[0].y_test.shape[0]} test points; ECE is top-label for C > 2 "
          "and binary p(y=1) for C = 2, 10 equal-width bins")
    _print_table(rows)
    fig = reliability_grid({r.model: (r.probs, r.y_test) for r in rows})
    path = save_figure(fig, Path(args.output_dir) / f"reliability_{args.dataset}_seed{args.seed}.png")
    print(f"\nreliability diagram: {path}")
    path = _rgb_map(args, rows)
    print(f"RGB map of predictive probabilities: {path}")
    return 0


def _training_inputs(args):
    """The training inputs and label indices ``run_split`` fitted on (same split, seed and
    subsample), for the grid of the RGB map."""
    X, y = load(args.dataset, args.data_dir)
    split = paper_split(X, y, seed=args.seed, n_test=DATASETS[args.dataset].paper_n_test)
    X_fit = np.concatenate([split.X_train, split.X_val])
    y_fit = np.concatenate([split.y_train, split.y_val])
    if args.max_train is not None and X_fit.shape[0] > args.max_train:
        keep = np.random.default_rng(args.seed).choice(X_fit.shape[0], args.max_train,
                                                       replace=False)
        X_fit, y_fit = X_fit[keep], y_fit[keep]
    return X_fit, y_fit


def _rgb_map(args, rows) -> Path:
    """One RGB probability map per model over the training inputs (for D > 2, the plane of
    their first two principal components, as the figure title says)."""
    X_fit, y_fit = _training_inputs(args)
    codes = rows[0].estimator._encode_known(y_fit, X_fit.shape[0])
    fig = probability_map({r.model: r.estimator.predict_proba for r in rows}, X_fit, codes,
                          grid_size=args.grid_size)
    return save_figure(fig, Path(args.output_dir) / f"rgb_map_{args.dataset}_seed{args.seed}.png")


def fit(args) -> int:
    """``ppgpc fit``: one classifier on one split; its posterior to ``--save-idata``."""
    model = _resolve_models([args.model], EXACT_CLASSIFIERS)[0]
    options = {} if args.inference is None else {"inference": args.inference}
    if args.epsilon is not None:
        options["epsilon"] = args.epsilon
    run = run_split(args.dataset, model, args.seed, data_dir=args.data_dir,
                    max_train=args.max_train, **options)
    _print_table([run])
    est = run.estimator
    if getattr(est, "epsilon_", None) is not None:
        print(f"epsilon = {est.epsilon_}, sigma = {est.noise_std_:.4g}")
    if args.save_idata:
        idata = est.to_inference_data()
        path = Path(args.save_idata)
        path.parent.mkdir(parents=True, exist_ok=True)
        idata.to_netcdf(str(path))
        print(f"posterior written to {path}")
    return 0


def datasets(args) -> int:
    """``ppgpc datasets``: what can be loaded, and from where."""
    where = os.environ.get(DATA_DIR_ENV)
    print(f"{'name':9s} {'rows':>6s} {'features':>8s} {'classes':>7s}  source")
    for name, info in DATASETS.items():
        source = "shipped" if info.shipped else f"{DATA_DIR_ENV}/{info.filename}"
        print(f"{name:9s} {info.n:6d} {info.d:8d} {info.n_classes:7d}  {source}")
    print(f"\n{DATA_DIR_ENV} = {where!r}")
    return 0


COMMANDS = {"compare": compare, "fit": fit, "datasets": datasets}
"""The command of each ``ppgpc`` subcommand."""


if __name__ == "__main__":  # python -m ppgpc.cli: the console script's entry point
    import ppgpc_cli

    sys.exit(ppgpc_cli.main())

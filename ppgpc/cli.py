"""The ``ppgpc`` command line.

    ppgpc compare --dataset wine            # every classifier on the paper's split, a table,
                                            # a reliability-diagram PNG and an RGB map PNG
    ppgpc fit --model ilr --dataset glass   # one classifier; optionally save its posterior
    ppgpc datasets                          # what can be loaded, and from where

Parsing the arguments imports only the standard library (the package's face imports
nothing eagerly), so ``ppgpc --help`` or a mistyped flag answers at once. ``main`` parses
the arguments, checks that the output paths can be written (so a bad ``--output-dir`` or
``--save-idata`` is refused before minutes of fitting, not after), and only then runs the
command, which imports JAX and the models. A bad setting or any OS error ends in one line
on stderr, ``ppgpc: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser", "check_output_folder", "check_output_file", "COMMANDS"]


def _integer(minimum: int):
    """An argparse type: an integer of at least ``minimum`` (argparse names the flag)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def _epsilon(text: str):
    """An argparse type: 'auto' or a label-smoothing level in (0, 1)."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number in (0, 1), got "
                                         f"{text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="wine, glass, thyroid, letter, magic, "
                        "htru2 or eeg (the last four need PPGPC_DATA_DIR or --data-dir)")
    parser.add_argument("--seed", type=_integer(0), default=0,
                        help="split and model seed (default 0)")
    parser.add_argument("--data-dir", default=None, help="folder with the larger UCI CSVs")
    parser.add_argument("--max-train", type=_integer(2), default=None,
                        help="subsample the training points (quick runs on large sets)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``ppgpc`` command; ``args.command`` names the subcommand."""
    parser = argparse.ArgumentParser(prog="ppgpc", description="Calibrated multi-class GP "
                                     "classifiers: fit, compare and diagnose.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compare", help="fit every classifier on one split; print a metrics "
                       "table and write a reliability diagram and an RGB probability map")
    _common(p)
    p.add_argument("--output-dir", default="ppgpc-output", help="where PNGs go")
    p.add_argument("--models", nargs="+", default=None,
                   help="a subset of the classifiers (default: all; e.g. --models ilr gpd)")
    p.add_argument("--grid-size", type=_integer(2), default=50,
                   help="points per side of the RGB probability map (default 50)")

    p = sub.add_parser("fit", help="fit one classifier on one split")
    _common(p)
    p.add_argument("--model", default="ilr", help="ilr (Exact-ILR)")
    p.add_argument("--inference", default=None,
                   help="exact (type-II ML), map or nuts (default: the protocol's, map)")
    p.add_argument("--epsilon", type=_epsilon, default=None,
                   help="label smoothing in (0, 1), or 'auto'")
    p.add_argument("--save-idata", default=None, help="write the posterior to this netCDF file")

    sub.add_parser("datasets", help="list the datasets")
    return parser


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_folder(folder: Path, flag: str, given: Path) -> None:
    """``folder`` exists and is writable, or can be created: its nearest existing ancestor
    is a writable folder. Errors name ``flag`` and the path ``given`` with it."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        where = "it" if existing == given.absolute() else str(existing)
        raise ValueError(f"{flag} {given}: {where} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {given}: the folder {existing} is not writable")


def check_output_folder(path, flag: str) -> Path:
    """``path`` as a Path, if it is a folder that can be written, or one that can be created
    (its nearest existing ancestor is a writable folder); nothing is created.

    Raises:
        ValueError: naming ``flag``, the path and what is in the way.
    """
    path = Path(path)
    _check_folder(path, flag, path)
    return path


def check_output_file(path, flag: str) -> Path:
    """``path`` as a Path, if a file can be written there: not a folder, writable if it
    exists, in a folder that exists and is writable or can be created; nothing is created.

    Raises:
        ValueError: naming ``flag``, the path and what is in the way.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: it is a folder; give a file name, e.g. "
                         f"{path / 'posterior.nc'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {path}: the file exists and is not writable")
    _check_folder(path.parent, flag, path)
    return path


def _check_outputs(args) -> None:
    """Every output path of the command, checked before any work."""
    if getattr(args, "output_dir", None) is not None:
        check_output_folder(args.output_dir, "--output-dir")
    if getattr(args, "save_idata", None) is not None:
        check_output_file(args.save_idata, "--save-idata")


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
    from ppgpc.evaluation.plotting import reliability_grid, save_figure
    from ppgpc.experiments import EXACT_CLASSIFIERS, run_split

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
    name = f"reliability_{args.dataset}_seed{args.seed}.png"
    path = save_figure(fig, Path(args.output_dir) / name)
    print(f"\nreliability diagram: {path}")
    path = _rgb_map(args, rows)
    print(f"RGB map of predictive probabilities: {path}")
    return 0


def _training_inputs(args):
    """The training inputs and label indices ``run_split`` fitted on (same split, seed and
    subsample), for the grid of the RGB map."""
    import numpy as np

    from ppgpc.datasets import DATASETS, load, paper_split

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
    from ppgpc.evaluation.diagnostics import probability_map
    from ppgpc.evaluation.plotting import save_figure

    X_fit, y_fit = _training_inputs(args)
    codes = rows[0].estimator._encode_known(y_fit, X_fit.shape[0])
    fig = probability_map({r.model: r.estimator.predict_proba for r in rows}, X_fit, codes,
                          grid_size=args.grid_size)
    return save_figure(fig, Path(args.output_dir) / f"rgb_map_{args.dataset}_seed{args.seed}.png")


def fit(args) -> int:
    """``ppgpc fit``: one classifier on one split; its posterior to ``--save-idata``."""
    from ppgpc.experiments import EXACT_CLASSIFIERS, run_split

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
    from ppgpc.datasets import DATA_DIR_ENV, DATASETS

    where = os.environ.get(DATA_DIR_ENV)
    print(f"{'name':9s} {'rows':>6s} {'features':>8s} {'classes':>7s}  source")
    for name, info in DATASETS.items():
        source = "shipped" if info.shipped else f"{DATA_DIR_ENV}/{info.filename}"
        print(f"{name:9s} {info.n:6d} {info.d:8d} {info.n_classes:7d}  {source}")
    print(f"\n{DATA_DIR_ENV} = {where!r}")
    return 0


COMMANDS = {"compare": compare, "fit": fit, "datasets": datasets}
"""The command of each ``ppgpc`` subcommand."""


def main(argv=None) -> int:
    """Entry point of the ``ppgpc`` console script.

    Returns:
        0 on success; 2 after a one-line error (a bad setting, an unknown dataset or
        model, an output path that cannot be written, or any OS error).
    """
    args = build_parser().parse_args(argv)
    try:
        _check_outputs(args)
        return COMMANDS[args.command](args)
    except (ValueError, OSError) as err:
        message = " ".join(str(err).split())
        print(f"ppgpc: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m ppgpc.cli
    sys.exit(main())

"""The ``ppgpc`` command line.

    ppgpc fit --csv iris.csv --target species --save iris-model    # your table, one model
    ppgpc predict --model-dir iris-model --csv new.csv --output probs.csv
    ppgpc compare --csv iris.csv --target species                  # every model, scored
    ppgpc compare --dataset wine            # every classifier on the paper's split, a table,
                                            # a reliability-diagram PNG and an RGB map PNG
    ppgpc fit --model ilr --dataset glass   # one classifier on a bundled dataset's split
    ppgpc datasets                          # what can be loaded, and from where

Parsing the arguments imports only the standard library (the package's face imports
nothing eagerly), so ``ppgpc --help`` or a mistyped flag answers at once. ``main`` parses
the arguments, checks that the output paths can be written (so a bad ``--output-dir``,
``--save``, ``--output`` or ``--save-idata`` is refused before minutes of fitting, not
after), and only then runs the command, which imports JAX and the models. A bad setting,
a bad table or any OS error ends in one line on stderr, ``ppgpc: error: ...``, and exit
code 2. ``--quiet`` prints nothing but errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ppgpc.catalog import CLASSIFIERS

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


_SPELLINGS = {spelling: c for c in CLASSIFIERS
              for spelling in (c.name, c.row.lower(), c.model, *c.aliases)}
"""The lower-case names ``--model`` and ``--models`` take -> their classifier."""


def _models_help() -> str:
    return "; ".join(f"{c.name} ({c.line}; --inference {' | '.join(c.inferences)}, default "
                     f"{c.inferences[0]})" for c in CLASSIFIERS)


def _data_source(parser: argparse.ArgumentParser) -> None:
    """--csv FILE --target COLUMN, or --dataset NAME (one of the two), and their options."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--csv", default=None, metavar="FILE",
                       help="your table: a CSV file with a header row, numeric feature "
                            "columns and a column of class labels (--target)")
    group.add_argument("--dataset", default=None,
                       help="a bundled dataset: wine, glass, thyroid, letter, magic, htru2 or "
                            "eeg (the last four need PPGPC_DATA_DIR or --data-dir)")
    parser.add_argument("--target", default=None, metavar="COLUMN",
                        help="with --csv: the column of class labels (the other columns are "
                             "the features, but for --id and --drop)")
    _table_columns(parser)
    parser.add_argument("--seed", type=_integer(0), default=0,
                        help="split and model seed (default 0)")
    parser.add_argument("--data-dir", default=None, help="folder with the larger UCI CSVs")
    parser.add_argument("--max-train", type=_integer(2), default=None,
                        help="subsample the training points (quick runs on large sets)")
    parser.add_argument("--quiet", action="store_true",
                        help="print nothing but errors (no progress, no tables)")


def _table_columns(parser: argparse.ArgumentParser, predicting: bool = False) -> None:
    """--id COLUMN and --drop COLUMN ...: the columns of a --csv table that are no
    features."""
    parser.add_argument("--id", default=None, metavar="COLUMN", dest="id_column",
                        help=("the column that identifies the rows, written first into the "
                              "predictions (default: the one the model was fitted with)")
                        if predicting else
                        ("with --csv: the column that identifies the rows; kept out of the "
                         "features, and written first by ppgpc predict"))
    if not predicting:
        parser.add_argument("--drop", nargs="+", default=[], metavar="COLUMN",
                            help="with --csv: columns to leave out of the features (e.g. "
                                 "words or categories)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``ppgpc`` command; ``args.command`` names the subcommand."""
    parser = argparse.ArgumentParser(prog="ppgpc", description="Calibrated multi-class GP "
                                     "classifiers: fit, predict, compare and diagnose.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("compare", help="fit every classifier on one split of a table or "
                       "dataset; print a metrics table and write a reliability diagram and "
                       "an RGB probability map")
    _data_source(p)
    p.add_argument("--output-dir", default="ppgpc-output", help="where PNGs go")
    p.add_argument("--models", nargs="+", default=None,
                   help="a subset of the classifiers (default: all; e.g. --models ilr gpd)")
    p.add_argument("--grid-size", type=_integer(2), default=50,
                   help="points per side of the RGB probability map (default 50)")

    p = sub.add_parser("fit", help="fit one classifier: on all rows of your table (--csv), "
                       "or on a bundled dataset's paper split (--dataset)",
                       description="Models: " + _models_help() + ".")
    _data_source(p)
    p.add_argument("--model", default="ilr", choices=_SPELLINGS, metavar="NAME",
                   help="the classifier (default ilr): "
                        + ", ".join(c.name for c in CLASSIFIERS))
    p.add_argument("--inference", default=None,
                   help="the model's inference (default: the model's; see the list above)")
    p.add_argument("--epsilon", type=_epsilon, default=None,
                   help="ilr only: label smoothing in (0, 1), or 'auto'")
    p.add_argument("--save", default=None, metavar="DIR",
                   help="save the fitted model to this folder (for ppgpc predict)")
    p.add_argument("--save-idata", default=None, help="write the posterior to this netCDF file")

    p = sub.add_parser("predict", help="class probabilities of a saved model for the rows of "
                       "a table, one column per class")
    p.add_argument("--model-dir", required=True, metavar="DIR",
                   help="a folder written by ppgpc fit --save (or estimator.save)")
    p.add_argument("--csv", required=True, metavar="FILE",
                   help="the table to predict: it needs the feature columns the model was "
                        "fitted on (other columns are ignored)")
    p.add_argument("--output", required=True, metavar="FILE",
                   help="the CSV file to write, one row per input row in order: the id "
                        "column (when there is one), 'predicted' (the most probable label), "
                        "then one probability column per class, named after the class "
                        "labels")
    _table_columns(p, predicting=True)
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")

    p = sub.add_parser("datasets", help="list the datasets")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
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


def check_output_file(path, flag: str, example: str = "posterior.nc") -> Path:
    """``path`` as a Path, if a file can be written there: not a folder, writable if it
    exists, in a folder that exists and is writable or can be created; nothing is created.

    Raises:
        ValueError: naming ``flag``, the path and what is in the way.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: it is a folder; give a file name, e.g. "
                         f"{path / example}")
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
    if getattr(args, "save", None) is not None:
        check_output_folder(args.save, "--save")
    if getattr(args, "output", None) is not None:
        check_output_file(args.output, "--output", "probabilities.csv")


def _check_arguments(args) -> None:
    """What argparse cannot check alone: --target goes with --csv, and a --model's
    --inference is one of its own."""
    if getattr(args, "csv", None) is not None and hasattr(args, "target") and not args.target:
        raise ValueError("--csv needs --target COLUMN, the column of class labels")
    if getattr(args, "dataset", None) is not None and getattr(args, "target", None):
        raise ValueError("--target goes with --csv; a bundled --dataset has its own labels")
    if getattr(args, "dataset", None) is not None and (args.id_column or args.drop):
        raise ValueError("--id and --drop go with --csv; a bundled --dataset has only "
                         "features and labels")
    if args.command == "fit" and args.inference is not None:
        methods = _SPELLINGS[args.model].inferences
        if args.inference not in methods:
            raise ValueError(f"--inference {args.inference!r} is not an inference of model "
                             f"{args.model!r}; its inferences: {list(methods)}")


def _rows(names) -> list[str]:
    """Model names, in any spelling, to their rows in ``ppgpc.experiments``; a ValueError
    names unknown ones."""
    unknown = [n for n in names if n.lower() not in _SPELLINGS]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; known: {[c.row for c in CLASSIFIERS]} "
                         f"(aliases {sorted(_SPELLINGS)})")
    return [_SPELLINGS[n.lower()].row for n in names]


def _print_table(rows) -> None:
    header = f"{'model':12s} {'accuracy':>9s} {'NLL':>8s} {'ECE':>8s} {'Brier':>8s} {'fit s':>8s}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.model:12s} {r.accuracy:9.3f} {r.nll:8.3f} {r.ece:8.3f} {r.brier:8.3f} "
              f"{r.fit_seconds:8.1f}")


def _say(args, *text) -> None:
    if not args.quiet:
        print(*text, flush=True)


def _split(args):
    """(name, split) that ``compare`` and ``fit --dataset`` score on: the paper's split of a
    bundled dataset, or ``table_split`` of the user's table."""
    from ppgpc.experiments import benchmark_split, table_split

    if args.dataset is not None:
        return args.dataset, benchmark_split(args.dataset, args.seed, data_dir=args.data_dir)
    from ppgpc.datasets import read_table

    table = read_table(args.csv, args.target, id_column=args.id_column, drop=args.drop)
    return Path(args.csv).stem, table_split(table.X.to_numpy(), table.y, args.seed)


def compare(args) -> int:
    """``ppgpc compare``: every classifier (or ``--models``) on one split of a bundled
    dataset or of the user's table; a metrics table, a reliability diagram (equal-mass bins
    with consistency bands and counts) and an RGB probability map in ``--output-dir``."""
    from ppgpc.evaluation.plotting import close, reliability_bands_grid, save_figure
    from ppgpc.experiments import fit_and_score

    models = _rows(args.models or [c.name for c in CLASSIFIERS])
    name, split = _split(args)
    rows = []
    for model in models:
        _say(args, f"fitting {model} on {name} (seed {args.seed}) ...")
        rows.append(fit_and_score(model, args.seed, split, dataset=name,
                                  max_train=args.max_train, quiet=args.quiet))
        _say(args, f"  {model}: fitted in {rows[-1].fit_seconds:.1f} s")
    fig = reliability_bands_grid({r.model: (r.probs, r.y_test) for r in rows})
    reliability = Path(args.output_dir) / f"reliability_{name}_seed{args.seed}.png"
    save_figure(fig, reliability)
    close(fig)
    rgb = _rgb_map(args, name, split, rows)
    if not args.quiet:
        print(f"\n{name}: {rows[0].y_test.shape[0]} test points; ECE is top-label for C > 2 "
              "and binary p(y=1) for C = 2, 10 equal-width bins; the diagram has equal-mass "
              "bins with consistency bands")
        _print_table(rows)
        print(f"\nreliability diagram: {reliability}")
        print(f"RGB map of predictive probabilities: {rgb}")
    return 0


def _rgb_map(args, name, split, rows) -> Path:
    """One RGB probability map per model over the fitting inputs (for D > 2, the plane of
    their first two principal components, as the figure title says)."""
    from ppgpc.evaluation.maps import plot_probability_maps
    from ppgpc.evaluation.plotting import close, save_figure
    from ppgpc.experiments import fit_points

    X_fit, y_fit = fit_points(split, args.seed, args.max_train)
    codes = rows[0].estimator.encode_classes(y_fit, X_fit.shape[0])
    fig = plot_probability_maps({r.model: r.estimator.predict_proba for r in rows}, X_fit,
                                codes, grid_size=args.grid_size)
    path = save_figure(fig, Path(args.output_dir) / f"rgb_map_{name}_seed{args.seed}.png")
    close(fig)
    return path


def fit(args) -> int:
    """``ppgpc fit``: one classifier. With ``--csv``, at its defaults on every row of the
    user's table; with ``--dataset``, with the paper protocol's settings on its split, and
    scored on the test points. ``--save`` keeps the model, ``--save-idata`` its posterior."""
    table = None
    if args.csv is not None:
        est = _fit_table(args)
        table = {"target": str(args.target), "id_column": args.id_column,
                 "dropped": [str(c) for c in args.drop]}
    else:
        from ppgpc.experiments import fit_and_score

        model = _SPELLINGS[args.model].row
        settings = {} if args.inference is None else {"inference": args.inference}
        if args.epsilon is not None:
            settings["epsilon"] = args.epsilon
        name, split = _split(args)
        run = fit_and_score(model, args.seed, split, dataset=name, max_train=args.max_train,
                            quiet=args.quiet, **settings)
        if not args.quiet:
            _print_table([run])
        est = run.estimator
    if getattr(est, "epsilon_", None) is not None:
        _say(args, f"epsilon = {est.epsilon_}, sigma = {est.noise_std_:.4g}")
    if args.save:
        from ppgpc.estimators import ESTIMATORS
        from ppgpc.io.persistence import save_estimator

        path = save_estimator(est, args.save, ESTIMATORS, table=table)
        _say(args, f"model saved to {path} (ppgpc predict --model-dir {args.save} ...)")
    if args.save_idata:
        idata = est.to_inference_data()
        path = Path(args.save_idata)
        path.parent.mkdir(parents=True, exist_ok=True)
        idata.to_netcdf(str(path))
        _say(args, f"posterior written to {path}")
    return 0


def _fit_table(args):
    """The ``--model`` estimator at its defaults (``--inference``, ``--epsilon`` and
    ``--seed`` if given) fitted on every row of the user's table."""
    import time

    from ppgpc import estimators
    from ppgpc.datasets import read_table

    table = read_table(args.csv, args.target, id_column=args.id_column, drop=args.drop)
    if args.max_train is not None and len(table.y) > args.max_train:
        raise ValueError("--max-train subsamples a bundled dataset's split; fit a table "
                         "with fewer rows instead")
    classifier = _SPELLINGS[args.model]
    settings = {"seed": args.seed, "progress": not args.quiet}
    if args.inference is not None:
        settings["inference"] = args.inference
    if args.epsilon is not None:
        if classifier.name != "ilr":
            raise ValueError(f"--epsilon is the ILR-GP's label smoothing; model {args.model!r} "
                             "has none")
        settings["epsilon"] = args.epsilon
    est = getattr(estimators, classifier.estimator)(**settings)
    _say(args, f"fitting {classifier.estimator} "
               f"({settings.get('inference', classifier.inferences[0])}) on "
               f"{len(table.y)} rows and {table.X.shape[1]} features of {args.csv} ...")
    start = time.perf_counter()
    est.fit(table.X, table.y)
    report = est.convergence_
    trust = ("converged" if report is None or report.converged
             else "not converged: see the warning above")
    _say(args, f"fitted in {time.perf_counter() - start:.1f} s; classes: "
               f"{[str(c) for c in est.classes_]}; {trust}")
    return est


def predict(args) -> int:
    """``ppgpc predict``: a saved estimator's predictions for every row of a table, in
    order, written as CSV: the id column (``--id``, or the one the model was fitted with),
    ``predicted`` (the most probable label), then one probability column per class, named
    after the class labels."""
    import numpy as np
    import pandas as pd

    from ppgpc.datasets import read_features
    from ppgpc.estimators import ESTIMATORS, GPClassifierBase
    from ppgpc.io.persistence import load_with_table

    model, table = load_with_table(args.model_dir, ESTIMATORS)
    if not isinstance(model, GPClassifierBase):
        raise ValueError(f"--model-dir {args.model_dir} holds a driver fit (a FitResult), not "
                         "a fitted classifier; save one with ppgpc fit --save")
    columns = getattr(model, "feature_names_in_", None)
    if columns is None:
        raise ValueError(f"--model-dir {args.model_dir}: the model was fitted without column "
                         "names, so the table's columns cannot be matched to its features; "
                         "fit it with ppgpc fit --csv or on a pandas DataFrame")
    id_column = args.id_column or (table or {}).get("id_column")
    rows = read_features(args.csv, columns, id_column=id_column)
    probs = model.predict_proba(rows.X)
    names = [str(c) for c in model.classes_]
    first = ([] if id_column is None else [str(id_column)]) + ["predicted"]
    clash = [c for c in first if c in names]
    if clash:
        raise ValueError(f"a class is named {clash[0]!r}, as the column {clash[0]!r} of the "
                         "predictions would be; rename the class or the id column")
    out = pd.DataFrame(probs, columns=names)
    out.insert(0, "predicted", model.classes_[np.argmax(probs, axis=1)])
    if id_column is not None:
        out.insert(0, str(id_column), rows.ids.to_numpy())
    path = Path(args.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
    ids = "" if id_column is None else f"their {id_column!r}, "
    _say(args, f"{len(out)} rows ({ids}the predicted label and {len(names)} class "
               f"probabilities) written to {path}")
    return 0


def datasets(args) -> int:
    """``ppgpc datasets``: what can be loaded, and from where."""
    from ppgpc.datasets import DATA_DIR_ENV, DATASETS

    if args.quiet:
        return 0
    where = os.environ.get(DATA_DIR_ENV)
    print(f"{'name':9s} {'rows':>6s} {'features':>8s} {'classes':>7s}  source")
    for name, info in DATASETS.items():
        source = "shipped" if info.shipped else f"{DATA_DIR_ENV}/{info.filename}"
        print(f"{name:9s} {info.n:6d} {info.d:8d} {info.n_classes:7d}  {source}")
    print(f"\n{DATA_DIR_ENV} = {where!r}")
    return 0


COMMANDS = {"compare": compare, "fit": fit, "predict": predict, "datasets": datasets}
"""The command of each ``ppgpc`` subcommand."""


def main(argv=None) -> int:
    """Entry point of the ``ppgpc`` console script.

    Returns:
        0 on success; 2 after a one-line error (a bad setting, an unknown dataset or
        model, a bad table, an output path that cannot be written, or any OS error).
    """
    args = build_parser().parse_args(argv)
    try:
        _check_arguments(args)
        _check_outputs(args)
        return COMMANDS[args.command](args)
    except (ValueError, OSError) as err:
        message = " ".join(str(err).split())
        print(f"ppgpc: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m ppgpc.cli
    sys.exit(main())

"""The ``ppgpc`` command line: argument parsing and output checks, before any fitting.

    ppgpc compare --dataset wine            # every classifier on the paper's split, a table,
                                            # a reliability-diagram PNG and an RGB map PNG
    ppgpc fit --model ilr --dataset glass   # one classifier; optionally save its posterior
    ppgpc datasets                          # what can be loaded, and from where

This module sits outside the ``ppgpc`` package and imports only the standard library:
importing anything from ``ppgpc`` runs the package's ``__init__``, which imports JAX and the
models (seconds), and ``ppgpc --help`` or a mistyped flag should answer at once. ``main``
parses the arguments, checks that the output paths can be written (so a bad
``--output-dir`` or ``--save-idata`` is refused before minutes of fitting, not after), and
only then imports the commands (``ppgpc.cli``). A bad setting or any OS error ends in one
line on stderr, ``ppgpc: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser", "check_output_folder", "check_output_file"]


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


def main(argv=None) -> int:
    """Entry point of the ``ppgpc`` console script.

    Returns:
        0 on success; 2 after a one-line error (a bad setting, an unknown dataset or
        model, an output path that cannot be written, or any OS error).
    """
    args = build_parser().parse_args(argv)
    try:
        _check_outputs(args)
        # the commands import JAX and the models: only now that the arguments are good
        from ppgpc import cli

        return cli.COMMANDS[args.command](args)
    except (ValueError, OSError) as err:
        message = " ".join(str(err).split())
        print(f"ppgpc: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ppgpc command line, run in-process."""

import numpy as np
import pytest

from ppgpc.cli import main


def test_compare_prints_a_table_and_writes_a_png(tmp_path, capsys):
    # One model on a subsample keeps this fast; CI's main job (.ci/run) runs the full
    # `ppgpc compare --dataset wine` with every classifier.
    assert main(["compare", "--dataset", "wine", "--output-dir", str(tmp_path),
                 "--grid-size", "30", "--models", "ilr", "--max-train", "80"]) == 0
    out = capsys.readouterr().out
    assert "Exact-ILR" in out and "accuracy" in out and "ECE" in out
    png = tmp_path / "reliability_wine_seed0.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rgb = tmp_path / "rgb_map_wine_seed0.png"  # wine has 13 inputs: the principal plane
    assert rgb.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "RGB map of predictive probabilities" in out
    row = [line for line in out.splitlines() if line.startswith("Exact-ILR")][0].split()
    accuracy = float(row[1])
    assert accuracy > 0.9  # wine is easy: the paper reports 0.98


def test_fit_saves_a_posterior_that_arviz_reads(tmp_path, capsys):
    import arviz as az

    path = tmp_path / "post.nc"
    code = main(["fit", "--dataset", "thyroid", "--epsilon", "0.99", "--save-idata", str(path)])
    assert code == 0
    idata = az.from_netcdf(str(path))
    assert "posterior" in idata.groups() and "log_likelihood" in idata.groups()
    assert idata.posterior.attrs["ppgpc_model"] == "ilr_gp"


def test_errors_are_reported_without_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PPGPC_DATA_DIR", raising=False)
    assert main(["compare", "--dataset", "letter", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "ppgpc: error:" in err and "letter" in err
    assert main(["fit", "--dataset", "wine", "--model", "nope"]) == 2
    capsys.readouterr()
    assert main(["compare", "--dataset", "wine", "--models", "ilr", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown model(s) ['nope']" in err and "Exact-ILR" in err


def test_datasets_listing(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "wine" in out and "letter" in out

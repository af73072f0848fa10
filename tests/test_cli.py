"""The ppgpc command line, run in-process (and once in a subprocess, for its imports)."""

import os
import subprocess
import sys

import pytest

import numpy as np

import ppgpc
from arviz_versions import group_names
from ppgpc.catalog import CLASSIFIERS
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
    assert {"posterior", "log_likelihood"} <= set(group_names(idata))
    assert idata.posterior.attrs["ppgpc_model"] == "ilr_gp"


def test_errors_are_reported_without_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PPGPC_DATA_DIR", raising=False)
    assert main(["compare", "--dataset", "letter", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "ppgpc: error:" in err and "letter" in err
    with pytest.raises(SystemExit) as stop:  # argparse's own check of --model's choices
        main(["fit", "--dataset", "wine", "--model", "nope"])
    assert stop.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
    assert main(["compare", "--dataset", "wine", "--models", "ilr", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown model(s) ['nope']" in err and "Exact-ILR" in err


def test_datasets_listing(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "wine" in out and "letter" in out


# ------------------------------------------- outputs checked first, errors in one line
@pytest.fixture
def no_fits(monkeypatch):
    """Any fit now fails the test: the outputs must be refused before one starts."""
    from ppgpc import experiments

    def no_fit(*args, **kwargs):
        raise AssertionError("a fit ran before the output path was checked")

    monkeypatch.setattr(experiments, "run_split", no_fit)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("ppgpc: error: ")
    return err


@pytest.mark.parametrize("argv, message", [
    (["fit", "--dataset", "wine", "--save-idata", "/dev/null/posterior.nc"],
     "--save-idata /dev/null/posterior.nc: /dev/null is not a folder"),
    (["fit", "--dataset", "wine", "--save-idata", "{tmp}"],
     "--save-idata {tmp}: it is a folder; give a file name, e.g. {tmp}/posterior.nc"),
    (["fit", "--dataset", "wine", "--save-idata", "{tmp}/a_file/deeper/posterior.nc"],
     "--save-idata {tmp}/a_file/deeper/posterior.nc: {tmp}/a_file is not a folder"),
    (["compare", "--dataset", "wine", "--output-dir", "{tmp}/a_file"],
     "--output-dir {tmp}/a_file: it is not a folder"),
    (["compare", "--dataset", "wine", "--output-dir", "{tmp}/a_file/pngs"],
     "--output-dir {tmp}/a_file/pngs: {tmp}/a_file is not a folder"),
])
def test_outputs_that_cannot_be_written_are_refused_before_fitting(tmp_path, capsys, no_fits,
                                                                   argv, message):
    (tmp_path / "a_file").write_text("x")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    assert message.format(tmp=tmp_path) in _one_line_error(capsys)
    assert (tmp_path / "a_file").read_text() == "x"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root may write into any folder, so none is unwritable for this test")
def test_an_unwritable_output_folder_is_refused_before_fitting(tmp_path, capsys, no_fits):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["compare", "--dataset", "wine", "--output-dir", str(locked / "pngs")]) == 2
    assert f"the folder {locked} is not writable" in _one_line_error(capsys)


def test_an_os_error_is_one_line_and_exit_code_2(capsys, monkeypatch):
    from ppgpc import cli

    def full_disk(args):
        raise OSError(28, "No space left on device", "reliability_wine_seed0.png")

    monkeypatch.setitem(cli.COMMANDS, "datasets", full_disk)
    assert main(["datasets"]) == 2
    assert "[Errno 28] No space left on device: 'reliability_wine_seed0.png'" in \
        _one_line_error(capsys)


def test_help_does_not_import_jax():
    """The console script parses its arguments with the standard library alone (the
    package's face imports nothing eagerly): `ppgpc --help` answers at once, without JAX or
    NumPy. Run through the installed entry point."""
    code = ("import sys\n"
            "from importlib.metadata import entry_points\n"
            "main = entry_points(group='console_scripts')['ppgpc'].load()\n"
            "try:\n"
            "    main(['fit', '--help'])\n"
            "except SystemExit as stop:\n"
            "    assert stop.code == 0, stop.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'ppgpc',"
            " 'numpy')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "--save-idata" in out
    assert out.strip().splitlines()[-1] == "['ppgpc', 'ppgpc.catalog', 'ppgpc.cli']"


# ------------------------------------------------------------- the user's own table
@pytest.fixture(scope="module")
def iris_csv(tmp_path_factory):
    """The iris data as a user has it: a CSV with named feature columns and a ``species``
    column of strings."""
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    frame["species"] = load_iris().target_names[frame.pop("target")]
    path = tmp_path_factory.mktemp("iris") / "iris.csv"
    frame.to_csv(path, index=False)
    return path


def test_fit_a_table_quietly_then_predict_it(tmp_path, iris_csv, capfd):
    import pandas as pd

    model = tmp_path / "model"
    assert main(["fit", "--csv", str(iris_csv), "--target", "species", "--save", str(model),
                 "--quiet"]) == 0
    assert capfd.readouterr().out == ""
    output = tmp_path / "out" / "p.csv"
    assert main(["predict", "--model-dir", str(model), "--csv", str(iris_csv),
                 "--output", str(output), "--quiet"]) == 0
    assert capfd.readouterr().out == ""
    written = pd.read_csv(output)
    assert list(written.columns) == ["predicted", "setosa", "versicolor", "virginica"]
    probs = written.drop(columns="predicted")
    assert probs.shape == (150, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    assert (written["predicted"] == probs.idxmax(axis=1)).all()
    truth = pd.read_csv(iris_csv)["species"]
    assert (written["predicted"] == truth).mean() > 0.9


@pytest.fixture(scope="module")
def shop_csv(tmp_path_factory):
    """A table as a user has it: a string ``id``, a string category ``color`` that is no
    feature, two numeric features and string labels."""
    import pandas as pd

    rng = np.random.default_rng(5)
    kind = np.repeat(["apple", "pear", "plum"], 20)
    centre = {"apple": (0.0, 0.0), "pear": (3.0, 0.0), "plum": (0.0, 3.0)}
    xy = np.array([centre[k] for k in kind]) + 0.5 * rng.normal(size=(60, 2))
    frame = pd.DataFrame({"id": [f"r{i:03d}" for i in rng.permutation(60)],
                          "color": rng.choice(["red", "green"], size=60),
                          "weight": xy[:, 0], "size": xy[:, 1], "fruit": kind})
    path = tmp_path_factory.mktemp("shop") / "shop.csv"
    frame.sample(frac=1.0, random_state=0).to_csv(path, index=False)
    return path


def test_a_table_with_an_id_and_a_word_column_end_to_end(tmp_path, shop_csv, capsys):
    """``fit --id id --drop color`` keeps both out of the features and saves the id column
    with the model; ``predict`` then writes id, predicted and the probabilities, rows in
    the input's order, on a table whose rows come in another order."""
    import pandas as pd

    model = tmp_path / "model"
    assert main(["fit", "--csv", str(shop_csv), "--target", "fruit", "--id", "id",
                 "--drop", "color", "--model", "gpd", "--save", str(model), "--quiet"]) == 0
    saved = ppgpc.load(model)
    assert saved.feature_names_in_.tolist() == ["weight", "size"]
    shuffled = pd.read_csv(shop_csv).sample(frac=1.0, random_state=1)
    shuffled.to_csv(tmp_path / "new.csv", index=False)
    output = tmp_path / "p.csv"
    assert main(["predict", "--model-dir", str(model), "--csv", str(tmp_path / "new.csv"),
                 "--output", str(output), "--quiet"]) == 0
    written = pd.read_csv(output)
    assert list(written.columns) == ["id", "predicted", "apple", "pear", "plum"]
    assert written["id"].tolist() == shuffled["id"].tolist()
    probs = saved.predict_proba(shuffled[["weight", "size"]])
    np.testing.assert_allclose(written[["apple", "pear", "plum"]].to_numpy(), probs,
                               rtol=1e-12)
    assert (written["predicted"] == shuffled["fruit"].to_numpy()).mean() > 0.9
    # without --drop, the word column is named, with how to leave it out
    assert main(["fit", "--csv", str(shop_csv), "--target", "fruit", "--id", "id",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "feature column 'color' must be numeric" in err and "--drop color" in err


def test_compare_on_a_table(tmp_path, iris_csv, capsys):
    assert main(["compare", "--csv", str(iris_csv), "--target", "species", "--models", "gpd",
                 "--output-dir", str(tmp_path), "--grid-size", "20"]) == 0
    out = capsys.readouterr().out
    assert "GPD" in out and "iris: 30 test points" in out
    assert (tmp_path / "reliability_iris_seed0.png").exists()


@pytest.mark.parametrize("argv, message", [
    (["fit", "--csv", "{csv}", "--target", "kind"], "has no column 'kind' for the labels"),
    (["fit", "--csv", "{csv}"], "--csv needs --target COLUMN"),
    (["fit", "--csv", "{bad}", "--target", "species"],
     "feature column 'petal width (cm)' must be numeric: row 3 is 'wide'"),
    (["fit", "--csv", "{few}", "--target", "species"], "'virginica' has 1"),
    (["fit", "--csv", "{csv}", "--target", "species", "--model", "lsm", "--inference", "map"],
     "--inference 'map' is not an inference of model 'lsm'"),
    (["predict", "--model-dir", "{tmp}", "--csv", "{csv}", "--output", "{tmp}/p.csv"],
     "is not a saved ppgpc model"),
    (["fit", "--csv", "{csv}", "--target", "species", "--id", "name"],
     "has no id column(s) ['name']"),
    (["fit", "--csv", "{csv}", "--target", "species", "--drop", "species"],
     "column 'species' is dropped and is also the label column"),
    (["fit", "--csv", "{csv}", "--target", "species", "--id", "species"],
     "the id column 'species' is the label column"),
    (["fit", "--dataset", "wine", "--id", "species"], "--id and --drop go with --csv"),
])
def test_table_errors_are_one_line(argv, message, tmp_path, iris_csv, capsys):
    import pandas as pd

    frame = pd.read_csv(iris_csv)
    bad = frame.astype({"petal width (cm)": object})
    bad.loc[1, "petal width (cm)"] = "wide"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    few = pd.concat([frame[frame.species != "virginica"], frame[frame.species == "virginica"][:1]])
    few.to_csv(tmp_path / "few.csv", index=False)
    names = {"csv": iris_csv, "bad": tmp_path / "bad.csv", "few": tmp_path / "few.csv",
             "tmp": tmp_path}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppgpc: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err


def test_help_lists_every_model_and_its_inference(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for c in CLASSIFIERS:
        assert f"{c.name} (" in out and " | ".join(c.inferences) in out


def test_the_catalog_is_the_estimators():
    """Each record names its estimator's class, default model, inference settings (the
    default first) and sparse-setting options that the estimator takes; every estimator a
    save may name is in the catalog."""
    import ppgpc
    from ppgpc.estimators import ESTIMATORS
    from ppgpc.models import available

    assert sorted(ESTIMATORS) == sorted(c.estimator for c in CLASSIFIERS)
    for c in CLASSIFIERS:
        cls = getattr(ppgpc, c.estimator)
        assert list(c.inferences) == [str(m) for m in cls.inference_choices], c.name
        assert c.inferences[0] == cls().inference, c.name
        assert c.model == cls().model_name and c.model in available(), c.name
        for row, options in c.sparse_rows.items():
            assert cls(**options).get_params()["inference"] in c.inferences, row


def test_predict_refuses_a_saved_driver_fit(tmp_path, iris_csv, capsys):
    import pandas as pd

    frame = pd.read_csv(iris_csv)
    X = frame.drop(columns="species").to_numpy()
    y = pd.factorize(frame["species"])[0]
    ppgpc.save(ppgpc.fit("ilr_gp", X[::5], y[::5], num_draws=10), tmp_path / "fit")
    assert main(["predict", "--model-dir", str(tmp_path / "fit"), "--csv", str(iris_csv),
                 "--output", str(tmp_path / "p.csv")]) == 2
    assert "holds a driver fit (a FitResult), not a fitted classifier" in capsys.readouterr().err

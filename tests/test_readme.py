"""The README's Python examples run as printed: the block of "Your own data" on a CSV of
the iris data in a fresh folder (as a user would have it), and the first block of "A short
example"."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from arviz_versions import group_names

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of the README's section titled ``section``."""
    text = README.read_text("utf-8")
    match = re.search(rf"(?ms)^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text)
    assert match, f"README has no section {section!r}"
    return re.findall(r"(?ms)^```python\n(.*?)^```", match.group(1))


@pytest.fixture
def iris_csv(tmp_path, monkeypatch):
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    frame["species"] = np.asarray(load_iris().target_names)[frame.pop("target")]
    frame.to_csv(tmp_path / "iris.csv", index=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_your_own_data_runs_as_printed(iris_csv, capsys):
    (block,) = python_blocks("Your own data")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing the user did not ask for
        exec(compile(block, "README: Your own data", "exec"), namespace)
    assert namespace["probs"].shape == (150, 3)
    assert namespace["draws"].shape[1:] == (150, 3)
    assert any(k.startswith("kernel_lengthscale[") for k in namespace["clf"].hyperparameters_)
    assert (iris_csv / "iris-model").is_dir()
    out = capsys.readouterr().out
    assert "kernel_lengthscale[sepal length (cm)]" in out


def test_the_short_example_runs_as_printed():
    block = python_blocks("A short example")[0]
    namespace: dict = {}
    exec(compile(block, "README: A short example", "exec"), namespace)
    assert namespace["probs"].shape == (50, 6)
    np.testing.assert_allclose(namespace["probs"].sum(axis=1), 1.0, atol=1e-9)
    assert "posterior" in group_names(namespace["idata"])


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_INDEX = re.compile(r"\[[\d, ]+\]")


def _numbers_close(printed: str, actual: str, spread: float = 0.5) -> None:
    """The same text up to its numbers, and each number within ``spread`` of the other
    relative to the larger: a sampler of 100 draws reaches another R-hat and ESS on
    another machine's floating-point kernels (its worst entry's index aside)."""
    printed, actual = _INDEX.sub("[...]", printed), _INDEX.sub("[...]", actual)
    assert _NUMBER.sub("#", printed) == _NUMBER.sub("#", actual)
    for a, b in zip(_NUMBER.findall(printed), _NUMBER.findall(actual)):
        a, b = float(a), float(b)
        assert abs(a - b) <= spread * max(abs(a), abs(b)), (a, b)


def test_the_trust_example_prints_what_the_readme_shows():
    """The comment lines under the "Whether to trust a fit" statements are what they print
    (the warning's summary and advice, the print): rewritten by
    ``python docs/readme_examples.py --write``, checked here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_examples", README.parent / "docs" / "readme_examples.py")
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    text = README.read_text("utf-8")
    (start, end), = examples.section_blocks(text, examples.TRUST)
    actual = examples.trust_block(text)
    assert "# ConvergenceWarning: the LogisticSoftmaxGPClassifier fit may not be trusted" \
        in actual
    _numbers_close(text[start:end], actual)

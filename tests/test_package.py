"""The package's face: a quick, silent import, every public name reachable, and source
files that hold no lab notes' references."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import ppgpc

ROOT = Path(__file__).resolve().parent.parent


def test_import_is_silent_and_imports_none_of_jax_arviz_matplotlib():
    code = ("import sys, ppgpc\n"
            "print(sorted(m for m in ('jax', 'numpy', 'arviz', 'matplotlib', 'xarray', 'sklearn')"
            " if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                         text=True, check=True)
    assert run.stderr == ""
    assert run.stdout.strip() == "[]"


def test_every_public_name_resolves_and_is_listed():
    for name in ppgpc.__all__:
        assert getattr(ppgpc, name) is not None, name
    assert set(ppgpc.__all__) <= set(dir(ppgpc))
    assert ppgpc.fit is ppgpc.infer.fit
    assert ppgpc.ILRGPClassifier is ppgpc.estimators.ILRGPClassifier


def test_an_unknown_name_is_an_attribute_error_naming_it():
    try:
        ppgpc.metrics  # noqa: B018  (a name of the old flat layout, kept by no alias)
    except AttributeError as err:
        assert "'metrics'" in str(err)
    else:
        raise AssertionError("ppgpc.metrics resolved")


def test_float64_is_on_whichever_of_ppgpcs_jax_code_and_jax_is_imported_first():
    code = ("import {first}, {second}\n"
            "import jax.numpy as jnp\n"
            "print(jnp.ones(1).dtype)\n")
    for first, second in (("ppgpc.gp", "jax"), ("jax", "ppgpc.gp")):
        out = subprocess.run([sys.executable, "-c", code.format(first=first, second=second)],
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == "float64", (first, second)


ISSUE_OR_SESSION = re.compile(r"\b(issue|session)s?\s*#?\d+", re.IGNORECASE)


def test_no_issue_or_session_numbers_in_the_library():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in ("ppgpc", "models") for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if ISSUE_OR_SESSION.search(line)]
    assert not found, "\n".join(found)


def test_the_issue_number_check_sees_one():
    assert ISSUE_OR_SESSION.search("as issue 36 asked") and ISSUE_OR_SESSION.search("Session #4")
    assert not ISSUE_OR_SESSION.search("one session of a notebook, 36 issues")


def test_every_subpackage_is_listed_for_installation():
    """A subpackage missing from ``[tool.setuptools] packages`` is absent from a
    non-editable install (``pip install .``, as CI installs): ``import`` fails there only."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"])
    found = {".".join(("ppgpc", *p.parent.relative_to(ROOT / "ppgpc").parts)).rstrip(".")
             for p in (ROOT / "ppgpc").rglob("__init__.py")}
    found |= {".".join(("ppgpc.models", *p.parent.relative_to(ROOT / "models").parts))
              for p in (ROOT / "models").rglob("__init__.py")}
    assert found - listed == set()

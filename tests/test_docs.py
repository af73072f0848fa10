"""The documentation site's API reference is complete, and the docstring examples run.

* Every public module (no part of its name starts with ``_``) has a page
  ``docs/api/<module>.rst`` that documents every name of its ``__all__`` defined there
  (``.. autoclass:: name`` and the like) and links every other name to the page of the
  module that defines it; a page of a module that no longer exists fails too.
* Every public name has a docstring of its own: a class's, not the one NamedTuple or a
  dataclass writes for it; a constant's, the string literal after its assignment.
* Every docstring example (``>>>``) of a public module runs as a doctest.

The docs build itself (``python -m sphinx -W --keep-going -n -b html docs docs/_build/html``,
in ``.ci/run``) needs the ``docs`` extra; these tests need only the package.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
SOURCES = {"ppgpc": ROOT / "ppgpc", "ppgpc.models": ROOT / "models"}
DIRECTIVE = re.compile(r"^\.\. auto(?:class|exception|function|data):: (\w+)$", re.M)
# a name documented elsewhere: in a table of its module's names on the page that makes it public
AUTOSUMMARY = (r"^\.\. currentmodule:: {module}\n\n\.\. autosummary::\n   :nosignatures:\n\n"
               r"(   \w+\n)*   {name}$")

# The estimators' own examples are filled in by ``shared_doc`` and fit on the wine data;
# tests/estimators/test_estimator.py runs them (test_the_shared_docstring_example_runs_for_
# every_estimator), so they are not run twice.
RUN_ELSEWHERE = {"ppgpc.estimators.ilr", "ppgpc.estimators.gpd",
                 "ppgpc.estimators.logistic_softmax", "ppgpc.estimators.svgp"}


def public_modules() -> dict[str, Path]:
    """Every public module of the package, read from the source tree: name -> file."""
    found = {}
    for package, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(part.startswith("_") for part in parts):
                continue
            found[".".join((package, *parts))] = path
    return found


MODULES = public_modules()


def assigned_names(path: Path) -> dict[str, str | None]:
    """The names a module assigns at its top level -> the docstring after each (or None)."""
    body = ast.parse(path.read_text()).body
    names = {}
    for node, following in zip(body, [*body[1:], None]):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = ast.get_docstring(node)
            continue
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        doc = None
        if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            doc = inspect.cleandoc(following.value.value)
        for target in targets:
            if isinstance(target, ast.Name):
                names[target.id] = doc
    return names


def home(module: str, name: str) -> str:
    """The public module that defines ``module.name``: where the reference documents it."""
    value = getattr(importlib.import_module(module), name)
    if isinstance(value, types.ModuleType):
        return value.__name__
    if name in assigned_names(MODULES[module]) or (
            module == "ppgpc.infer.driver" and name == "METHODS"):  # a PEP 562 name
        return module
    defined_in = getattr(value, "__module__", None)
    if (inspect.isclass(value) or callable(value)) and defined_in in MODULES:
        return defined_in
    for other, path in MODULES.items():  # a constant imported from elsewhere
        if name in assigned_names(path) and getattr(
                importlib.import_module(other), name, None) is value:
            return other
    raise AssertionError(f"{module}.{name}: no public module defines it")


def in_toctree(module: str, page: str) -> bool:
    """Whether a toctree of the page lists the module's page (``   title <module>`` or
    ``   module``)."""
    return re.search(rf"^   (\S+ <)?{re.escape(module)}>?$", page, re.M) is not None


def own_docstring(module: str, name: str) -> str | None:
    """The docstring ``module.name`` has of its own, or None."""
    value = getattr(importlib.import_module(module), name)
    if inspect.isclass(value):
        doc = value.__dict__.get("__doc__")
        generated = re.fullmatch(rf"{re.escape(value.__name__)}\(.*\)", doc or "", re.S)
        inherited = any(doc == base.__doc__ for base in value.__mro__[1:])
        return None if generated or inherited else doc
    if callable(value) and getattr(value, "__module__", None) == module:
        doc = getattr(value, "__doc__", None)
        return None if doc == type(value).__doc__ else doc
    return assigned_names(MODULES[module]).get(name)


def test_the_public_modules_are_found():
    assert {"ppgpc", "ppgpc.estimators.ilr", "ppgpc.infer.driver", "ppgpc.models.spec",
            "ppgpc.models.logistic_softmax.gibbs"} <= set(MODULES)
    assert not any("._" in name for name in MODULES)


def test_every_public_module_has_a_page_and_every_page_a_module():
    pages = {path.stem for path in API.glob("*.rst")} - {"index"}
    assert sorted(set(MODULES) - pages) == [], "public modules without a docs/api page"
    assert sorted(pages - set(MODULES)) == [], "docs/api pages of no public module"
    index = (API / "index.rst").read_text()
    for module in MODULES:
        parent = module.rpartition(".")[0]
        toctree = index if module == "ppgpc" or parent == "ppgpc" else (
            API / f"{parent}.rst").read_text()
        assert in_toctree(module, toctree), \
            f"{module} is in no table of contents (docs/api/{parent or 'index'}.rst)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_name_in_all_is_in_the_reference(module):
    """A name defined in the module is documented on its page; one defined elsewhere is
    linked to the page that documents it."""
    page = (API / f"{module}.rst").read_text()
    assert f".. automodule:: {module}\n" in page
    documented = set(DIRECTIVE.findall(page))
    missing = []
    for name in importlib.import_module(module).__all__:
        where = home(module, name)
        if where == module:
            if name not in documented:
                missing.append(f".. auto...:: {name}")
        elif isinstance(getattr(importlib.import_module(module), name), types.ModuleType):
            if not in_toctree(where, page) and f":py:mod:`{where}`" not in page:
                missing.append(f"the module {where} in the toctree")
        elif not re.search(AUTOSUMMARY.format(module=re.escape(where), name=name), page, re.M):
            missing.append(f"{name} in an autosummary after .. currentmodule:: {where}")
        elif name not in DIRECTIVE.findall((API / f"{where}.rst").read_text()):
            missing.append(f"{name} documented on docs/api/{where}.rst")
    assert missing == [], f"docs/api/{module}.rst lacks: {missing}"
    public = set(importlib.import_module(module).__all__)
    assert documented <= public, f"documented but not in __all__: {documented - public}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_name_has_a_docstring(module):
    """The module, and each name of its ``__all__`` it defines, has a docstring of its own."""
    imported = importlib.import_module(module)
    missing = [] if (imported.__doc__ or "").strip() else [module]
    for name in imported.__all__:
        if home(module, name) == module and not isinstance(getattr(imported, name),
                                                           types.ModuleType):
            if not (own_docstring(module, name) or "").strip():
                missing.append(f"{module}.{name}")
    assert missing == [], f"names without a docstring of their own (write one): {missing}"


def test_an_undocumented_name_is_found(tmp_path, monkeypatch):
    """The docstring check sees what it should: a constant without a string after it, a
    NamedTuple without its own docstring, a function without one."""
    source = tmp_path / "probe.py"
    source.write_text('"""Module."""\nfrom typing import NamedTuple\n'
                      'A = 1\n"""A constant."""\nB = {}\n'
                      'class P(NamedTuple):\n    x: int\n'
                      'def f():\n    return 1\n'
                      'def g():\n    """Documented."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(MODULES, "probe", source)
    assert own_docstring("probe", "A") == "A constant."
    assert [own_docstring("probe", name) for name in ("B", "P", "f")] == [None] * 3
    assert own_docstring("probe", "g") == "Documented."


def has_examples(path: Path) -> bool:
    """Whether a docstring in the file (of the module, a class or a function) has a ``>>>``."""
    nodes = [node for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return any(">>>" in (ast.get_docstring(node) or "") for node in nodes)


EXAMPLES = sorted(module for module, path in MODULES.items()
                  if has_examples(path) and module not in RUN_ELSEWHERE)


def test_the_entry_points_have_examples():
    assert {"ppgpc.infer.driver", "ppgpc.infer.arviz_export", "ppgpc.evaluation.metrics",
            "ppgpc.evaluation.calibration", "ppgpc.estimators",
            "ppgpc.io.persistence"} <= set(EXAMPLES)


@pytest.mark.parametrize("module", EXAMPLES)
def test_docstring_examples_run(module):
    tests = [test for test in doctest.DocTestFinder().find(importlib.import_module(module))
             if test.examples]
    assert tests, f"{module} has '>>>' but no docstring example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, "".join(report)
    assert attempted > 0

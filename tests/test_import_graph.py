"""The import graph of ``ppgpc`` (and ``models``, installed as ``ppgpc.models``) has layers
with imports only downward, and no cycle.

The graph is read from the source with ``ast``, not by importing: every ``import`` and
``from ... import`` anywhere in a module counts, at module level or inside a function (a
function-local import that would close a loop or reach upward is the same dependency, only
hidden). ``from ppgpc import x`` where ``x`` is a module is an edge to that module; where
``x`` is a name of the package's ``__init__`` it is an edge to the package. Importing
``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``: those implicit edges are not
counted, because a package's ``__init__`` is the facade that re-exports its modules and
sits at the top of what it re-exports (``LAYERS`` places ``ppgpc.infer`` and ``ppgpc``).
Imports of anything outside ``ppgpc`` are ignored.

Each module gets a layer from ``LAYERS`` (lowest first; a name ending in ``.*`` covers a
package's modules). A module may import its own layer or a lower one; an import from a
lower layer to a higher one, a cycle, or a module that no layer names fails the test,
naming the offending edge or module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"ppgpc": ROOT / "ppgpc", "ppgpc.models": ROOT / "models"}
"""Package name -> its source folder (``models/`` is installed as ``ppgpc.models``)."""

LAYERS = [
    ("configuration and input checks", ["ppgpc._config", "ppgpc.validation"]),
    ("runtime", ["ppgpc.runtime", "ppgpc.runtime.*"]),
    ("GP algebra and samplers", ["ppgpc.gp", "ppgpc.gp.*", "ppgpc.polyagamma",
                                 "ppgpc.polyagamma.*"]),
    ("data", ["ppgpc.datasets", "ppgpc.datasets.*"]),
    ("model contract", ["ppgpc.models.spec"]),
    ("models", ["ppgpc.models", "ppgpc.models.*"]),
    ("evaluation", ["ppgpc.evaluation", "ppgpc.evaluation.*"]),
    ("inference methods", ["ppgpc.infer.convergence", "ppgpc.infer.records",
                           "ppgpc.infer.common", "ppgpc.infer.optimize", "ppgpc.infer.natgrad",
                           "ppgpc.infer.sites", "ppgpc.infer.adaptation", "ppgpc.infer.mcmc",
                           "ppgpc.infer.exact",
                           "ppgpc.infer.nuts", "ppgpc.infer.gibbs", "ppgpc.infer.cavi",
                           "ppgpc.infer.svi", "ppgpc.infer.dims"]),
    ("method table", ["ppgpc.infer.methods"]),
    ("results", ["ppgpc.infer.predictive", "ppgpc.infer.results", "ppgpc.infer.loo"]),
    ("driver", ["ppgpc.infer.driver"]),
    ("export", ["ppgpc.infer.arviz_export", "ppgpc.infer.elpd", "ppgpc.infer"]),
    ("save format", ["ppgpc.io", "ppgpc.io.*"]),
    ("classifier catalog", ["ppgpc.catalog"]),
    ("estimators", ["ppgpc.estimators", "ppgpc.estimators.*"]),
    ("protocols and command line", ["ppgpc.experiments", "ppgpc.cli"]),
    ("package", ["ppgpc"]),
]
"""The layers, lowest first: a module may import only its own layer and those below."""


# ------------------------------------------------------------------ the checker
def module_files(sources: dict) -> dict[str, Path]:
    """Module name -> source file, for every ``.py`` file under each package's folder."""
    modules = {}
    for package, folder in sources.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from`` import names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, source: str, is_package: bool, known: set) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in ``source``."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c of a name: its module
                target = target.rpartition(".")[0]
            if target and target != module:
                out.add(target)
    return out


def import_graph(sources: dict) -> dict[str, set[str]]:
    """Module -> the package modules it imports, read from the source with ``ast``."""
    files = module_files(sources)
    known = set(files)
    return {module: imports_of(module, path.read_text(), path.name == "__init__.py", known)
            for module, path in files.items()}


def layer_table(layers: list) -> dict[str, int]:
    """Module name (or ``package.*`` pattern) -> the index of its layer."""
    table = {}
    for index, (_, names) in enumerate(layers):
        for name in names:
            assert name not in table, f"{name} is in two layers"
            table[name] = index
    return table


def layer_of(module: str, table: dict) -> int | None:
    """The layer of ``module``: its own entry, else the nearest ``package.*`` above it."""
    if module in table:
        return table[module]
    parts = module.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        pattern = ".".join(parts[:cut]) + ".*"
        if pattern in table:
            return table[pattern]
    return None


def find_cycle(graph: dict) -> list[str] | None:
    """One cycle of ``graph`` as [m0, m1, ..., m0], or None (iterative depth-first search)."""
    state = {}  # module -> 1 on the current path, 2 done
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [], [(root, iter(sorted(graph.get(root, ()))))]
        state[root] = 1
        path.append(root)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def problems(graph: dict, layers: list) -> list[str]:
    """Every module without a layer, every import from a lower layer to a higher one, and
    one cycle if there is any, as messages naming the module or edge."""
    table = layer_table(layers)
    names = [name for name, _ in layers]
    out = [f"{module} has no layer: add it to LAYERS" for module in sorted(graph)
           if layer_of(module, table) is None]
    for module in sorted(graph):
        low = layer_of(module, table)
        for target in sorted(graph[module]):
            high = layer_of(target, table)
            if low is not None and high is not None and high > low:
                out.append(f"upward import {module} -> {target} ({names[low]!r} imports "
                           f"{names[high]!r})")
    cycle = find_cycle(graph)
    if cycle:
        out.append("import cycle " + " -> ".join(cycle))
    return out


def private_imports(sources: dict) -> list[str]:
    """Every ``from M import _name`` in which ``_name`` (a private function, class or module)
    belongs to a package that does not hold the importing module: a private name may be
    used anywhere inside its own package (its subpackages included), never outside."""
    files = module_files(sources)
    known = set(files)
    out = []
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _absolute(node, module, is_package)
            if not base.startswith("ppgpc"):
                continue
            for alias in node.names:
                if not alias.name.startswith("_") or alias.name.startswith("__"):
                    continue
                full = f"{base}.{alias.name}"
                holder = base if full in known else (
                    base if base in known and files[base].name == "__init__.py"
                    else base.rpartition(".")[0])
                if not (module == holder or module.startswith(holder + ".")):
                    out.append(f"{module} imports {alias.name} from {base}, private to {holder}")
    return out


# ------------------------------------------------------------------ the tests
def test_ppgpc_imports_only_downward_and_has_no_cycle():
    graph = import_graph(SOURCES)
    assert {"ppgpc.models.spec", "ppgpc.models.ilr_gp", "ppgpc.infer.driver"} <= set(graph)
    assert "ppgpc.models.spec" in graph["ppgpc.models.ilr_gp"]  # models/ read as ppgpc.models
    found = problems(graph, LAYERS)
    assert not found, "\n".join(found)


def test_no_module_imports_a_private_name_from_another_package():
    found = private_imports(SOURCES)
    assert not found, "\n".join(found)


def test_the_private_name_check_fails_on_a_name_taken_across_packages(tmp_path):
    pkg = tmp_path / "ppgpc"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_config.py").write_text("")
    (pkg / "a" / "one.py").write_text("def _helper():\n    pass\n")
    (pkg / "a" / "two.py").write_text("from ppgpc.a.one import _helper\n"
                                      "from ppgpc import _config\n")
    (pkg / "b" / "three.py").write_text("from ppgpc.a.one import _helper\n")
    assert private_imports({"ppgpc": pkg}) == [
        "ppgpc.b.three imports _helper from ppgpc.a.one, private to ppgpc.a"]


def test_every_layer_names_modules_that_exist():
    graph = import_graph(SOURCES)
    for _, names in LAYERS:
        for name in names:
            if name.endswith(".*"):
                assert any(m.startswith(name[:-1]) for m in graph), name
            else:
                assert name in graph, f"LAYERS names {name}, which is not a module"


def test_the_reader_sees_function_local_and_from_package_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.high import thing\n")
    (pkg / "low.py").write_text("def f():\n    from pkg import high\n    return high\n")
    (pkg / "high.py").write_text("from pkg.sub import deep\nthing = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("from .. import low\nfrom pkg import thing\n")
    graph = import_graph({"pkg": pkg})
    assert graph == {"pkg": {"pkg.high"}, "pkg.low": {"pkg.high"},
                     "pkg.high": {"pkg.sub.deep"}, "pkg.sub": set(),
                     "pkg.sub.deep": {"pkg.low", "pkg"}}


def test_the_checker_fails_on_a_cycle_an_upward_edge_and_a_module_without_a_layer():
    layers = [("bottom", ["a", "b"]), ("top", ["c"])]
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert problems(graph, layers) == ["import cycle a -> b -> a"]
    found = problems({"a": {"c"}, "b": set(), "c": {"b"}}, layers)
    assert found == ["upward import a -> c ('bottom' imports 'top')"]
    found = problems({"a": {"c"}, "b": set(), "c": {"a"}}, layers)
    assert found == ["upward import a -> c ('bottom' imports 'top')",
                     "import cycle a -> c -> a"]
    found = problems({"a": set(), "b": set(), "c": set(), "d": {"a"}}, layers)
    assert found == ["d has no layer: add it to LAYERS"]
    assert problems({"a": {"b"}, "b": set(), "c": {"a", "b"}}, layers) == []


@pytest.mark.parametrize("graph, cycle", [
    ({"x": {"y"}, "y": {"z"}, "z": {"x"}}, ["x", "y", "z", "x"]),
    ({"x": {"y"}, "y": {"z"}, "z": set()}, None),
    ({"x": {"x2"}, "x2": {"y"}, "y": {"x2"}}, ["x2", "y", "x2"]),
])
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle

"""Counts of the library's structure that the driver's layout is judged by.

    python benchmarks/structure_counts.py

Prints, for ``ppgpc/`` and ``models/`` (the library; tests and benchmarks aside):

* ``while`` loops in the inference, runtime and model code (the windowed loops of
  iterative methods were one each in five modules; ``ppgpc.runtime.loop.run_windows`` is
  now the one), each with its place;
* string-keyed option lookups, ``opts["..."]`` or ``options["..."]``;
* estimator classes that override ``_fit_driver``;
* functions of 60 lines or more, longest first;
* private members reached from outside their object: ``x._name`` where ``x`` is not
  ``self``, ``cls`` or ``super()``, ``_name`` is not a module's private name (a
  module-private helper shared inside its subpackage is allowed) and not a NamedTuple's
  ``_replace``/``_asdict``;
* lines of Python.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("ppgpc", "models")
LOOP_PLACES = ("ppgpc/infer", "ppgpc/runtime", "models")
LONG = 60
NAMEDTUPLE = ("_replace", "_asdict", "_fields", "_make")
"""A NamedTuple's public methods (underscored only to keep clear of field names)."""
OPTION_LOOKUP = re.compile(r"""\b(?:opts|options)\[["']""")


def files() -> list[Path]:
    return sorted(p for top in LIBRARY for p in (ROOT / top).rglob("*.py"))


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound by imports in a module (``x`` in ``x._private`` is a module there)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def main() -> None:
    loops, lookups, overrides, long, private, lines = [], 0, [], [], [], 0
    for path in files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text("utf-8")
        lines += text.count("\n")
        lookups += len(OPTION_LOOKUP.findall(text))
        tree = ast.parse(text)
        modules = _module_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.While) and rel.startswith(LOOP_PLACES):
                loops.append(f"{rel}:{node.lineno}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length >= LONG:
                    long.append((length, f"{rel}:{node.lineno} {node.name}"))
            if isinstance(node, ast.ClassDef):
                if any(isinstance(b, ast.FunctionDef) and b.name == "_fit_driver"
                       for b in node.body) and node.name != "GPClassifierBase":
                    overrides.append(f"{rel} {node.name}")
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and node.attr not in NAMEDTUPLE:
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) \
                        and owner.func.id == "super":
                    continue
                if isinstance(owner, ast.Name) and owner.id in modules:
                    continue
                if isinstance(owner, ast.Attribute):   # a.b._c: a module path, or a field
                    continue
                private.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    print(f"while loops in {', '.join(LOOP_PLACES)}: {len(loops)}")
    for place in loops:
        print(f"  {place}")
    print(f"string-keyed option lookups: {lookups}")
    print(f"_fit_driver overrides: {len(overrides)}")
    for place in overrides:
        print(f"  {place}")
    print(f"functions of {LONG} lines or more: {len(long)}")
    for length, place in sorted(long, reverse=True):
        print(f"  {length:4d} {place}")
    print(f"private members reached from outside their object: {len(private)}")
    for place in private:
        print(f"  {place}")
    print(f"lines of Python in {' and '.join(LIBRARY)}: {lines}")


if __name__ == "__main__":
    main()

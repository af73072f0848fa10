"""The output the README prints under its examples, from running them.

The README's "Whether to trust a fit" block shows, as comment lines under the statements
that give them, the ``ConvergenceWarning`` its short Gibbs fit raises and what its
``print`` writes. This script runs the README's own blocks (the first block of "A short
example" for ``split``, then that one) and writes those comment lines from what they gave:

    python docs/readme_examples.py           # show the block as it would be written
    python docs/readme_examples.py --write   # write it into README.md

``tests/test_readme.py`` runs the same and fails when the README's lines drift from what
the code prints (numbers compared within the run-to-run spread of a short sampler on
another machine, everything else exactly).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import textwrap
import warnings
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
TRUST = "Whether to trust a fit"
WIDTH = 88
OUTPUT = "# "
"""Prefix of an output line under the statement that printed it."""


def section_blocks(text: str, section: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the bodies of the ```python blocks of ``section``."""
    match = re.search(rf"(?ms)^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text)
    if match is None:
        raise ValueError(f"README has no section {section!r}")
    return [(match.start(1) + m.start(1), match.start(1) + m.end(1))
            for m in re.finditer(r"(?ms)^```python\n(.*?)^```", match.group(1))]


def _statements(block: str) -> list[str]:
    """The block's lines without its output lines (comment lines right under a statement
    that begin with ``OUTPUT`` and follow the marker statements)."""
    kept, skipping = [], False
    for line in block.splitlines():
        if skipping and line.startswith(OUTPUT):
            continue
        skipping = line.startswith(("clf.fit(", "print("))
        kept.append(line)
    return kept


def _comment(text: str) -> list[str]:
    return [OUTPUT + line for line in textwrap.wrap(text, WIDTH - len(OUTPUT))]


def trust_block(text: str | None = None) -> str:
    """The "Whether to trust a fit" block with its output lines from a run of it."""
    text = README.read_text("utf-8") if text is None else text
    (short_start, short_end), *_ = section_blocks(text, "A short example")
    (start, end), = section_blocks(text, TRUST)
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(text[short_start:short_end], "README: A short example", "exec"),
             namespace)
    lines = _statements(text[start:end])
    source = "\n".join(lines) + "\n"
    outputs: dict[int, list[str]] = {}
    for node in ast.parse(source).body:
        code = compile(ast.Module([node], []), "README: " + TRUST, "exec")
        printed = io.StringIO()
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("always")
            exec(code, namespace)
        if not lines[node.lineno - 1].startswith(("clf.fit(", "print(")):
            continue
        shown = [line for warning in caught
                 if warning.category.__name__ == "ConvergenceWarning"
                 for line in _comment(f"ConvergenceWarning: {warning.message}")]
        if printed.getvalue().strip():
            shown += _comment(printed.getvalue().strip())
        outputs[node.end_lineno] = shown
    out = []
    for number, line in enumerate(lines, start=1):
        out += [line] + outputs.get(number, [])
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    text = README.read_text("utf-8")
    block = trust_block(text)
    if "--write" in argv:
        (start, end), = section_blocks(text, TRUST)
        README.write_text(text[:start] + block + text[end:], "utf-8")
        print(f"wrote the {TRUST!r} block of {README}")
    else:
        print(block, end="")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Execute every notebook in ``notebooks/`` at the small size; fail if any cell errors.

The kernel is the running interpreter's: a kernel spec installed in ``sys.prefix`` whose
command is this Python (or the bare ``python`` that jupyter_client maps to
``sys.executable``). A fresh virtual environment has ipykernel's ``python3`` spec there; if
none is found, one is installed with ``python -m ipykernel install --sys-prefix``.

The committed copies must hold the outputs of a full-size run (``build_notebooks.py
--execute``), and those outputs must read the same on any machine: no path of the machine
that ran them (a user's home, a temporary folder, a virtual environment) and no flood of
progress bars. Both are checked too, without executing anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ppgpc._config import compilation_cache_dir

nbformat = pytest.importorskip("nbformat", reason="the test extra (nbformat) is needed")
nbclient = pytest.importorskip("nbclient", reason="the test extra (nbclient) is needed")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
EXPECTED = ["01_quickstart", "02_toy_mixture", "03_mcmc_vs_conjugate", "04_arviz_diagnostics",
            "05_uci_calibration", "06_checking_probabilities", "07_your_own_table",
            "08_beside_pymc"]
TIMEOUT = 600  # per cell, seconds

MACHINE_PATH = re.compile(r"/home/|/root/|/tmp/|/work/|/Users/|/private/var/|site-packages"
                          r"|\.venv|\b[A-Za-z]:\\")
"""What gives away the machine that executed a notebook: an absolute path under a home,
temporary or work folder, an installed package's folder, a virtual environment, or a
Windows drive."""
PROGRESS_BAR = re.compile(r"\d%\||\|█|[?\d.]+ ?(?:it|s|step)/(?:s|it|step)\b")
"""tqdm's signature in a line: ``" 45%|████▌"``, ``"[00:05<01:44, 18.22step/s]"``,
``"1.68s/it"``, ``"?it/s"``."""
MAX_STDERR_LINES = 20
"""More lines of stderr than this in one cell is a flood (of progress lines or warnings)."""


def _is_this_python(argv0: str) -> bool:
    names = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}
    if argv0 in names:  # jupyter_client replaces these by sys.executable
        return True
    try:
        return Path(argv0).resolve() == Path(sys.executable).resolve()
    except OSError:
        return False


def _local_kernel() -> str | None:
    from jupyter_client.kernelspec import KernelSpecManager

    prefix = Path(sys.prefix).resolve()
    for name, info in sorted(KernelSpecManager().get_all_specs().items()):
        spec = info["spec"]
        if (spec.get("language") == "python"
                and prefix in Path(info["resource_dir"]).resolve().parents
                and spec.get("argv") and _is_this_python(spec["argv"][0])):
            return name
    return None


@pytest.fixture(scope="session")
def kernel_name() -> str:
    name = _local_kernel()
    if name is None:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix"],
                       check=True, capture_output=True)
        name = _local_kernel()
    assert name is not None, f"no Jupyter kernel for {sys.executable} in {sys.prefix}"
    return name


def _output_texts(output) -> list[tuple[str, str]]:
    """(kind, text) of what an output shows as text: a stream's text, an error's name,
    value and traceback, a result's ``text/plain``."""
    kind = output.get("output_type")
    if kind == "stream":
        return [(output.get("name", "stream"), output.get("text", ""))]
    if kind == "error":
        parts = [output.get("ename", ""), output.get("evalue", ""),
                 *output.get("traceback", [])]
        return [("error", "\n".join(parts))]
    if kind in ("execute_result", "display_data"):
        return [("text/plain", output.get("data", {}).get("text/plain", ""))]
    return []


def output_problems(nb) -> list[str]:
    """What the outputs of ``nb`` (an nbformat notebook) should not hold, one line per problem:
    a path of the machine that executed it (``MACHINE_PATH``), a line of a progress bar
    (``PROGRESS_BAR``), or more than ``MAX_STDERR_LINES`` lines of stderr in one cell."""
    problems = []
    code_cells = (c for c in nb.cells if c.cell_type == "code")
    for number, cell in enumerate(code_cells, start=1):
        stderr_lines = 0
        for output in cell.get("outputs", []):
            for kind, text in _output_texts(output):
                text = "".join(text) if isinstance(text, list) else text
                lines = text.splitlines()  # "\r" ends a line too: tqdm redraws with it
                if kind == "stderr":
                    stderr_lines += len(lines)
                for line in lines:
                    for what, pattern in (("a machine path", MACHINE_PATH),
                                          ("a progress bar", PROGRESS_BAR)):
                        if pattern.search(line):
                            problems.append(f"code cell {number}, {kind}: {what} in "
                                            f"{line.strip()[:120]!r}")
        if stderr_lines > MAX_STDERR_LINES:
            problems.append(f"code cell {number}: {stderr_lines} lines of stderr "
                            f"(more than {MAX_STDERR_LINES}: a progress flood?)")
    return problems


def test_every_notebook_is_present():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_holds_a_full_run(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert cells, f"{path.name} has no code cells"
    unrun = [i for i, c in enumerate(cells) if c.execution_count is None]
    assert not unrun, f"{path.name}: code cells {unrun} were not executed in the committed copy"
    errors = [i for i, c in enumerate(cells)
              if any(o.get("output_type") == "error" for o in c.outputs)]
    assert not errors, f"{path.name}: code cells {errors} hold errors"
    first = "".join(o.get("text", "") for o in cells[0].outputs)
    assert "size: full" in first, f"{path.name} was not executed at full size: {first!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_outputs_hold_no_machine_paths_or_progress_floods(path):
    problems = output_problems(nbformat.read(path, as_version=4))
    assert not problems, (f"{path.name}: outputs that differ from machine to machine (run "
                          "every fit with progress=False; the SETUP cell filters tqdm's "
                          "warning and prints warnings without paths):\n"
                          + "\n".join(problems[:20]))


def test_output_check_finds_paths_and_progress_bars():
    """The check above fails on the outputs that once were committed (tqdm's warning with the
    path of a virtual environment, a tqdm bar, a flood of stderr) and passes clean ones."""
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    def notebook(*outputs):
        return new_notebook(cells=[new_code_cell("pass", outputs=list(outputs))])

    def stderr(text):
        return new_output("stream", name="stderr", text=text)

    warning = ("/work/venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: "
               "IProgress not found. Please update jupyter and ipywidgets.\n")
    bar = "\rSVI:  25%|██▌       | 500/2000 [00:07<00:13, 112.97step/s, elbo=-163.4]"
    assert output_problems(notebook(stderr(warning)))
    assert output_problems(notebook(stderr(bar)))
    assert output_problems(notebook(stderr("sample: 100%|██████████| 450/450 [00:12, "
                                           "36.78it/s]")))
    assert output_problems(notebook(stderr("tau 0.1: leave-one-out NLL 0.02\n" * 21)))
    assert output_problems(notebook(new_output("execute_result", data={
        "text/plain": "PosixPath('/tmp/tmpab12cd/ilr-model')"})))
    assert output_problems(notebook(new_output("error", ename="ValueError", evalue="bad",
                                               traceback=["File /home/user/x.py, line 1"])))
    clean = notebook(
        new_output("stream", name="stdout", text="size: full; ppgpc 0.1.0\nExact-ILR 1.7 s\n"),
        stderr("ConvergenceWarning: ILRGPClassifier may not be trusted: epsilon at its grid's "
               "edge\n"),
        new_output("execute_result", data={"text/plain": "   hdi_3%  hdi_97%  r_hat\n"
                                                          "f   0.12     0.93   1.00"}))
    assert output_problems(clean) == []


@pytest.fixture(scope="session")
def compilation_cache(tmp_path_factory) -> str:
    """One JAX persistent compilation cache for all notebook kernels of the session.

    The notebooks fit the same models on the same data shapes (wine in 01, 04 and 05), and
    XLA compilation dominates their run time at the small size; sharing compiled programs
    between the kernels cuts a Gibbs fit from about 34 s to 10 s of CPU time. A cache
    folder already chosen for the run is kept: ``JAX_COMPILATION_CACHE_DIR``, or a folder
    given in ``PPGPC_COMPILATION_CACHE`` (as CI does), so the kernels share it with the
    test workers.
    """
    chosen = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not chosen and os.environ.get("PPGPC_COMPILATION_CACHE"):
        folder = compilation_cache_dir()
        chosen = None if folder is None else str(folder)
    return chosen or str(tmp_path_factory.mktemp("jax-cache"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_at_small_size(path, kernel_name, compilation_cache, monkeypatch):
    monkeypatch.setenv("PPGPC_NOTEBOOK_SIZE", "small")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", compilation_cache)
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=kernel_name, timeout=TIMEOUT,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    seconds = time.perf_counter() - start
    first = next(c for c in nb.cells if c.cell_type == "code")
    text = "".join(o.get("text", "") for o in first.outputs)
    assert "size: small" in text, f"the notebook ignored PPGPC_NOTEBOOK_SIZE: {text!r}"
    print(f"{path.name}: {seconds:.1f} s at small size")

"""Execute every notebook in ``notebooks/`` at the small size; fail if any cell errors.

The kernel is the running interpreter's: a kernel spec installed in ``sys.prefix`` whose
command is this Python (or the bare ``python`` that jupyter_client maps to
``sys.executable``). A fresh virtual environment has ipykernel's ``python3`` spec there; if
none is found, one is installed with ``python -m ipykernel install --sys-prefix``.

The committed copies must hold the outputs of a full-size run (``build_notebooks.py
--execute``); that is checked too, without executing anything.
"""

from __future__ import annotations

import os
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
            "05_uci_calibration", "06_checking_probabilities"]
TIMEOUT = 600  # per cell, seconds


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
        if (spec.get("language") == "python" and prefix in Path(info["resource_dir"]).resolve().parents
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

"""ppgpc's process-wide settings (``ppgpc._config``): float64, no thread count, the
persistent compilation cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppgpc._config import compilation_cache_dir


@pytest.mark.parametrize("environ, want", [
    ({"HOME": "/h"}, Path("/h/.cache/ppgpc/jax")),
    ({"XDG_CACHE_HOME": "/x"}, Path("/x/ppgpc/jax")),
    ({"PPGPC_COMPILATION_CACHE": "/elsewhere"}, Path("/elsewhere")),
    ({"PPGPC_COMPILATION_CACHE": "0", "XDG_CACHE_HOME": "/x"}, None),
    ({"PPGPC_COMPILATION_CACHE": "off"}, None),
    ({"PPGPC_COMPILATION_CACHE": "1", "XDG_CACHE_HOME": "/x"}, Path("/x/ppgpc/jax")),
    ({"PPGPC_COMPILATION_CACHE": "on", "XDG_CACHE_HOME": "/x"}, Path("/x/ppgpc/jax")),
    ({"JAX_COMPILATION_CACHE_DIR": "/users/own"}, None),
])
def test_cache_folder_follows_the_environment(environ, want, monkeypatch):
    monkeypatch.setenv("HOME", environ.get("HOME", "/h"))
    assert compilation_cache_dir(environ) == want


def _cache_dir_in_fresh_process(tmp_path, **env):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("JAX_COMPILATION_CACHE_DIR", "PPGPC_COMPILATION_CACHE")}
    environ.update(env, XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import ppgpc.infer, jax; "
                          "print(jax.config.jax_compilation_cache_dir)"],
                         env=environ, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_importing_ppgpcs_jax_code_turns_the_cache_on_and_the_variable_turns_it_off(
        tmp_path):
    assert _cache_dir_in_fresh_process(tmp_path) == str(tmp_path / "ppgpc" / "jax")
    assert _cache_dir_in_fresh_process(tmp_path, PPGPC_COMPILATION_CACHE="0") == "None"
    assert _cache_dir_in_fresh_process(
        tmp_path, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "mine")) == str(tmp_path / "mine")


def _printed(code: str, environ: dict) -> list[str]:
    """The words a fresh Python process running ``code`` prints."""
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, check=True)
    return out.stdout.split()


def test_import_sets_float64_and_no_thread_count_and_float32_can_be_scoped():
    """What the user guide's "Process-wide settings" (docs/guide.md) promise, in a fresh
    process: importing an estimator (before NumPy) turns float64 on, leaves
    OPENBLAS_NUM_THREADS unset, and a ``jax.enable_x64(False)`` block still gets float32
    defaults."""
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    code = ("from ppgpc import ILRGPClassifier; import os, jax, jax.numpy as jnp\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), jnp.ones(2).dtype)\n"
            "with jax.enable_x64(False):\n"
            "    x = jnp.ones(2); print(x.dtype, jax.jit(lambda a: a * 2.0)(x).dtype)\n"
            "print(jnp.asarray([1.0], dtype=jnp.float32).dtype, jnp.ones(2).dtype)\n")
    assert _printed(code, environ) == ["None", "float64", "float32", "float32", "float32",
                                       "float64"]


@pytest.mark.parametrize("first", ["import jax; import ppgpc", "import ppgpc; import jax"])
def test_import_ppgpc_alone_imports_no_jax_and_changes_nothing(first):
    """``import ppgpc`` (before or after JAX) leaves JAX's settings and Python's import
    machinery as they were; the first import of ppgpc's JAX code sets float64 and the cache."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("JAX_COMPILATION_CACHE_DIR", "PPGPC_COMPILATION_CACHE")}
    code = ("import sys\nhooks = list(sys.meta_path)\n"
            f"{first}\n"
            "print(sys.meta_path == hooks, jax.config.jax_enable_x64,\n"
            "      jax.config.jax_compilation_cache_dir)\n"
            "import ppgpc.gp\n"
            "print(sys.meta_path == hooks, jax.config.jax_enable_x64,\n"
            "      jax.config.jax_compilation_cache_dir is not None)\n")
    assert _printed(code, environ) == ["True", "False", "None", "True", "True", "True"]


def test_no_module_of_ppgpc_patches_the_import_machinery():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = [str(p.relative_to(root)) for folder in ("ppgpc", "models")
             for p in (root / folder).rglob("*.py") if "meta_path" in p.read_text()]
    assert found == []

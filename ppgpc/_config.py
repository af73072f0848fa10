"""Process-wide configuration that ppgpc needs, applied once, when ppgpc's own JAX code is
first imported (each subpackage that holds JAX code imports this module before anything
else; ``import ppgpc`` alone imports no JAX and sets nothing).

1. float64. GP algebra (Cholesky factors of kernel matrices, log-determinants, triangular
   solves) loses several digits in float32: a 1000 x 1000 RBF Gram matrix with a small noise
   term has a condition number around 1e8, which float32 cannot factorise reliably. ppgpc
   turns on JAX's 64-bit mode (``jax_enable_x64``). This is a global JAX setting: arrays
   created afterwards default to float64 in the whole process. Code elsewhere in the process
   that wants float32 can ask for it explicitly (``jnp.asarray(x, dtype=jnp.float32)``; a
   float32 array stays float32 with Python scalars, and is promoted only by float64
   arrays) or run inside ``with jax.enable_x64(False):``, which restores 32-bit defaults
   for that block only (ppgpc's own functions must not be called inside such a block).

   ppgpc sets no thread count (``OPENBLAS_NUM_THREADS`` is left to the user; docs/records/speed.md).

2. A persistent compilation cache. XLA compiles each jitted function once per shape, and a
   first fit compiles a few hundred small programs. ppgpc points JAX's persistent cache at
   ``$XDG_CACHE_HOME/ppgpc/jax`` (``~/.cache/ppgpc/jax`` when XDG_CACHE_HOME is unset), so a
   second ``ppgpc`` process reads the compiled programs back instead of compiling them
   again. Every program is stored (``CACHE_MIN_COMPILE_SECONDS`` = 0): a default fit builds
   about a hundred small ones, and reading them back is cheaper than compiling them
   (docs/records/speed.md). This applies only where the user has not chosen a cache: a
   ``JAX_COMPILATION_CACHE_DIR`` variable, or a cache folder configured in JAX before ppgpc
   was imported, is left as it is. ``PPGPC_COMPILATION_CACHE=0`` turns it
   off; ``PPGPC_COMPILATION_CACHE=/some/folder`` puts it there instead.
"""

import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

__all__: list[str] = ["CACHE_ENV", "CACHE_MIN_COMPILE_SECONDS", "compilation_cache_dir"]

CACHE_ENV = "PPGPC_COMPILATION_CACHE"
"""Environment variable: ``0`` (or ``off``, ``false``, ``no``) turns ppgpc's persistent
compilation cache off, ``1`` (``on``, ``true``, ``yes``) or unset leaves it on in its
default folder; any other value is the folder to use."""

CACHE_MIN_COMPILE_SECONDS = 0.0
"""Compiled programs that took less than this are not written to the persistent cache
(none: every program is stored)."""


def compilation_cache_dir(environ=os.environ) -> Path | None:
    """The folder ppgpc gives JAX's persistent compilation cache, or None when it leaves
    the cache alone (turned off by ``PPGPC_COMPILATION_CACHE``, or the user chose one
    through ``JAX_COMPILATION_CACHE_DIR``)."""
    setting = environ.get(CACHE_ENV, "").strip()
    if setting.lower() in ("0", "off", "false", "no"):
        return None
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    if setting and setting.lower() not in ("1", "on", "true", "yes"):
        return Path(setting).expanduser()
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ppgpc" / "jax"


def _enable_compilation_cache() -> None:
    if jax.config.jax_compilation_cache_dir:  # chosen by the user before importing ppgpc
        return
    folder = compilation_cache_dir()
    if folder is None:
        return
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_SECONDS)


_enable_compilation_cache()

"""A bound on the compiled programs a long process keeps.

XLA compiles each jitted function once per shape of its arguments, and JAX keeps every
compiled program for the life of the process. On the CPU each program's machine code lives
in LLVM's JIT memory, whose mappings count against the kernel's ``vm.max_map_count``
(65,530 by default); a process that keeps compiling programs for new shapes (a learning
curve, a grid search whose folds differ in size, a service refitting on growing data) grows
by a thousand or more mappings per new training shape until LLVM aborts it ("Unable to
allocate section memory", SIGABRT), losing everything the process held.

The driver (``ppgpc.infer.fit``) calls ``use_training_shape`` with the shape signature of
every fit's prepared data before it runs. A signature seen before compiles nothing new. A
new one first checks what the process holds: when it holds more than ``MAX_MEMORY_MAPS``
memory mappings (``/proc/self/maps``, on Linux) or the programs of ``MAX_TRAINING_SHAPES``
training shapes (the bound that counts on a GPU, whose programs' code does not take host
mappings, and where mappings cannot be read), ppgpc's compiled programs are released
(``release``: each of ppgpc's jitted functions drops its own programs and traces, then a
garbage collection so that the executables are freed, and on glibc ``malloc_trim(0)``,
which hands the freed heap back to the system: without it the resident memory stays at its
peak) and the record starts again from the new signature. A fit at a signature already
held releases only when the process holds more than ``CEILING_MEMORY_MAPS``: programs that
no later fit reuses (a model's programs compiled for every fit, such as the Gibbs
samplers' at every new number of training points, which are not padded) grow a process
without any new shape. The mappings are the resource that runs out, and what one shape
costs differs threefold between models (an ILR fit padded to a bucket about 1,000 mappings, a
logistic-softmax NUTS fit about 3,000), so a bound on them releases only when needed: a
learning curve that cycles through a few sizes keeps all of them.

What a long process should expect: fits at a training shape already held compile nothing;
a fit at a new shape compiles its programs (from ppgpc's persistent compilation cache when
they were compiled before, ``ppgpc._config``); the process's mappings stay below about
``MAX_MEMORY_MAPS`` plus one fit's, and after a release the shapes released compile again.

A release touches only what ppgpc compiled: every jitted function of ppgpc is made by
``jit`` (``jax.jit``, and the function is entered in a weak registry), and a release calls
``clear_cache()`` on each of them. JAX's process-wide caches (``jax.clear_caches()``) are
left alone, so the programs of a user's own jitted functions survive any number of fits.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import threading
import weakref
from typing import Any, Callable, Hashable

import jax

__all__ = ["MAX_MEMORY_MAPS", "CEILING_MEMORY_MAPS", "MAX_TRAINING_SHAPES", "jit", "release",
           "training_signature", "use_training_shape", "memory_maps",
           "live_training_shapes", "releases"]

MAX_MEMORY_MAPS = 12_000
"""Memory mappings above which a fit at a new training shape first releases every compiled
program (a fifth of the kernel's default ``vm.max_map_count``, 65,530; module docstring).
A fresh process holds about 2,500 after its first fit."""

CEILING_MEMORY_MAPS = 24_000
"""Memory mappings above which any fit, at a training shape held or not, first releases
every compiled program (module docstring)."""

MAX_TRAINING_SHAPES = 16
"""The training shapes whose programs a process keeps at most, whatever its mappings: on a
GPU, and where mappings cannot be read (no ``/proc/self/maps``), the programs' memory is
bounded by this."""

_live: "collections.OrderedDict[Hashable, None]" = collections.OrderedDict()
_lock = threading.Lock()
_releases = 0
_owned: "weakref.WeakSet[Any]" = weakref.WeakSet()


def jit(fun: Callable, /, **options) -> Callable:
    """``jax.jit(fun, **options)``, entered in ppgpc's registry of jitted functions so that
    ``release`` can drop its compiled programs (and only ppgpc's).

    Used as ``jax.jit`` is: ``@jit``, ``functools.partial(jit, static_argnames=...)`` or
    ``jit(fun, static_argnums=...)``. The registry holds the function weakly: a jitted
    closure built per fit goes when nothing else holds it.
    """
    jitted = jax.jit(fun, **options)
    with _lock:
        _owned.add(jitted)
    return jitted


def release() -> None:
    """Drop every program and trace ppgpc's jitted functions hold (``clear_cache()`` on
    each), collect the garbage so that the executables are freed, and hand the freed heap
    back to the system. Programs of jitted functions ppgpc did not make are kept."""
    with _lock:
        functions = list(_owned)
    for f in functions:
        f.clear_cache()
    gc.collect()
    _trim_heap()


def training_signature(data: Any, static: Any = ()) -> tuple:
    """A hashable signature of a fit's programs for ``use_training_shape``: the tree
    structure of ``data`` (which holds its static fields), each array leaf's shape and
    dtype and each Python scalar leaf's type (traced, so its value compiles nothing new);
    and ``static`` (method options, names) by value."""
    leaves, treedef = jax.tree_util.tree_flatten(data)
    described = tuple((tuple(leaf.shape), str(leaf.dtype)) if hasattr(leaf, "shape")
                      else type(leaf).__name__ for leaf in leaves)
    static_leaves, static_def = jax.tree_util.tree_flatten(static)
    static_described = tuple(
        (tuple(leaf.shape), str(leaf.dtype)) if hasattr(leaf, "shape") and hasattr(
            leaf, "dtype") else (leaf if isinstance(leaf, Hashable) else repr(leaf))
        for leaf in static_leaves)
    return (str(treedef), described, str(static_def), static_described)


def use_training_shape(signature: Hashable) -> bool:
    """Record a fit at the training shape ``signature`` (``training_signature``); when it is
    new and the process holds more than ``MAX_MEMORY_MAPS`` mappings or the programs of
    ``MAX_TRAINING_SHAPES`` shapes, or whatever the shape when it holds more than
    ``CEILING_MEMORY_MAPS``, release ppgpc's compiled programs first (``release``).

    Returns:
        Whether this call released the compiled programs.
    """
    global _releases
    with _lock:
        maps = memory_maps()
        if signature in _live:
            _live.move_to_end(signature)
            if maps is None or maps <= CEILING_MEMORY_MAPS:
                return False
            released = True
        else:
            released = len(_live) >= MAX_TRAINING_SHAPES or (
                maps is not None and maps > MAX_MEMORY_MAPS)
        if released:
            _live.clear()
            _releases += 1
        _live[signature] = None
    if released:
        release()
    return released


def memory_maps() -> int | None:
    """The process's memory mappings (lines of ``/proc/self/maps``), None where that file
    does not exist."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def _trim_heap() -> None:
    """Hand freed heap memory back to the system (glibc's ``malloc_trim``; nothing
    elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def live_training_shapes() -> int:
    """How many training shapes' programs the process holds now (since its last release)."""
    with _lock:
        return len(_live)


def releases() -> int:
    """How many times this process released its compiled programs."""
    return _releases

"""A bound on the compiled programs a long process keeps.

XLA compiles each jitted function once per shape of its arguments, and JAX keeps every
compiled program for the life of the process. On the CPU each program's machine code lives
in LLVM's JIT memory, whose mappings count against the kernel's ``vm.max_map_count``
(65,530 by default); a process that keeps compiling programs for new shapes (a learning
curve, a grid search whose folds differ in size, a service refitting on growing data) grows
by a thousand or more mappings per new training shape until LLVM aborts it ("Unable to
allocate section memory", SIGABRT), losing everything the process held.

The driver (``ppgpc.infer.fit``) calls ``use_training_shape`` with the shape signature of
every fit's prepared data before it runs. The signatures of the last
``MAX_TRAINING_SHAPES`` distinct training shapes are kept, least recently used first; when
a fit brings a signature that is not among them and the bound is reached, every compiled
program of the process is released first (``jax.clear_caches()``, then a garbage
collection so that the executables are freed, and on glibc ``malloc_trim(0)``, which hands
the freed heap back to the system: without it the resident memory stays at its peak) and
the record starts again from the new signature. A process therefore holds the programs of at most ``MAX_TRAINING_SHAPES``
training shapes at a time, whatever it fits, and the number of memory mappings and the
compiled code stay bounded.

What a long process should expect: fits at a training shape already held compile nothing;
a fit at a new shape compiles its programs (from ppgpc's persistent compilation cache when
the programs were compiled before, ``ppgpc._config``), and one fit in every
``MAX_TRAINING_SHAPES`` new shapes releases all programs, so that the next fits at the
shapes released compile again. JAX's caches are process-wide: a release also drops the
programs of the user's own jitted functions, which compile again on their next call.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import threading
from typing import Any, Hashable

import jax

__all__ = ["MAX_TRAINING_SHAPES", "training_signature", "use_training_shape",
           "live_training_shapes", "releases"]

MAX_TRAINING_SHAPES = 4
"""Training shapes whose compiled programs a process keeps at most (module docstring). A
default ``LogisticSoftmaxGPClassifier`` fit (two training shapes: its CAVI start and NUTS)
holds about 3,000 memory mappings and 150 MiB of programs per shape
(``benchmarks/long_session.py``)."""

_live: "collections.OrderedDict[Hashable, None]" = collections.OrderedDict()
_lock = threading.Lock()
_releases = 0


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
    """Record a fit at the training shape ``signature`` (``training_signature``), releasing
    every compiled program first when the signature is new and ``MAX_TRAINING_SHAPES``
    others are held.

    Returns:
        Whether this call released the compiled programs.
    """
    global _releases
    with _lock:
        if signature in _live:
            _live.move_to_end(signature)
            return False
        release = len(_live) >= MAX_TRAINING_SHAPES
        if release:
            _live.clear()
            _releases += 1
        _live[signature] = None
    if release:
        jax.clear_caches()
        gc.collect()
        _trim_heap()
    return release


def _trim_heap() -> None:
    """Hand freed heap memory back to the system (glibc's ``malloc_trim``; nothing
    elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def live_training_shapes() -> int:
    """How many training shapes' programs the process holds now (at most
    ``MAX_TRAINING_SHAPES``)."""
    with _lock:
        return len(_live)


def releases() -> int:
    """How many times this process released its compiled programs."""
    return _releases

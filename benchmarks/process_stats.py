"""What a benchmark reads of its own process: memory mappings, resident memory, and the
name of the event JAX records for each XLA compilation (Linux: ``/proc/self``)."""

from __future__ import annotations

BUILD_EVENT = "/jax/core/compile/backend_compile_duration"
"""The ``jax.monitoring`` duration event of every backend compilation (a program read back
from the persistent compilation cache included)."""


def memory_maps() -> int:
    """Lines of ``/proc/self/maps``: the process's memory mappings, which the kernel limits
    to ``vm.max_map_count``."""
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def resident_mib() -> float:
    """Resident memory (``VmRSS``), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")

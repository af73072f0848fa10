"""Counting XLA compilations in a test (``with count_compilations() as compiled: ...``).

JAX records every backend compilation (a jitted function, or an eager op, on its first call
with a new shape, dtype or static argument) as a ``jax.monitoring`` duration event
``/jax/core/compile/backend_compile_duration`` carrying the function's name; a listener on
it sees each one, whatever the logging configuration. A call that finds its program in
memory records nothing; a program read back from the persistent compilation cache is
recorded too (JAX still builds the executable from it).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import jax

__all__ = ["BACKEND_COMPILE_EVENT", "TRACE_EVENT", "count_compilations", "count_traces"]

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


@contextlib.contextmanager
def _events(name: str) -> Iterator[list[str]]:
    seen: list[str] = []

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == name:
            seen.append(str(kwargs.get("fun_name", "?")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def count_traces():
    """The names of the functions JAX traced to a program inside the ``with`` block (a
    jitted function called with new shapes, dtypes or static arguments, or a new function
    object), whether or not a cache then served the compiled program.

    Example:
        >>> f = jax.jit(lambda x, n: x * n)
        >>> x = jax.numpy.ones(3)
        >>> with count_traces() as traced:
        ...     _ = f(x, 2), f(x, 3)
        >>> traced
        ['<lambda>']
    """
    return _events(TRACE_EVENT)


def count_compilations():
    """The names of the functions XLA compiled inside the ``with`` block, in order.

    Example:
        >>> f = jax.jit(lambda x: x + 1)
        >>> x, y = jax.numpy.ones(3), jax.numpy.zeros(3)
        >>> with count_compilations() as compiled:
        ...     _ = f(x), f(y)
        >>> compiled
        ['jit(<lambda>)']
    """
    return _events(BACKEND_COMPILE_EVENT)

"""One BLAS thread inside ppgpc's own fits, restored afterwards.

JAX's CPU Cholesky factorisations and triangular solves call the OpenBLAS that SciPy ships,
and OpenBLAS's idle worker threads spin while they wait for the next call. One process
alone barely notices; two processes on the same cores (two notebooks, a fit beside a test
run) each spin a full pool against the other's work and run many times slower
(``benchmarks/side_by_side.py``; the measurements in docs/records/speed.md). A fit's
matrices are small enough that one thread costs little alone.

``blas_limited`` is a context manager (and decorator) that sets every loaded BLAS library
to one thread with threadpoolctl (scikit-learn's own dependency) for the duration of a fit,
prediction or search and restores the user's settings when it ends, also on an error.
Nested uses set the limit once. It changes nothing when ``PPGPC_BLAS_THREADS=0`` is set
in the environment (ppgpc then leaves the BLAS pools as the user set them), and another
count there is used instead of one.

Reference: threadpoolctl's ``threadpool_limits`` (https://github.com/joblib/threadpoolctl).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Callable, Iterator

__all__ = ["blas_limited", "blas_threads"]

_lock = threading.Lock()
_depth = 0


def blas_threads() -> int | None:
    """The BLAS threads of a fit: ``PPGPC_BLAS_THREADS`` (0: no limit, None returned),
    default 1."""
    value = os.environ.get("PPGPC_BLAS_THREADS", "1").strip() or "1"
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"PPGPC_BLAS_THREADS must be a whole number (0 for no limit), got "
                         f"{value!r}") from None
    if count < 0:
        raise ValueError(f"PPGPC_BLAS_THREADS must be >= 0 (0 for no limit), got {count}")
    return None if count == 0 else count


@contextlib.contextmanager
def _limited() -> Iterator[None]:
    global _depth
    threads = blas_threads()
    with _lock:
        outer = _depth == 0
        _depth += 1
    limiter = None
    try:
        if outer and threads is not None:
            from threadpoolctl import threadpool_limits

            limiter = threadpool_limits(limits=threads, user_api="blas")
        yield
    finally:
        if limiter is not None:
            limiter.restore_original_limits()
        with _lock:
            _depth -= 1


def blas_limited(fn: Callable | None = None):
    """``with blas_limited():`` or ``@blas_limited``: BLAS at ``blas_threads()`` threads
    inside, the user's settings restored afterwards (module docstring)."""
    if fn is None:
        return _limited()

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with _limited():
            return fn(*args, **kwargs)

    return wrapped

"""Progress on stderr for the long loops of a fit: one helper, silent when disabled.

Two forms, both written to ``sys.stderr`` (a terminal shows them in place; a notebook shows
stderr under the cell) and both doing nothing at all when ``enabled`` is False:

* ``bar(total, desc, enabled)``: a tqdm bar for loops that run on the host in windows
  (SVI windows, CAVI windows, Adam windows). tqdm is already a dependency of NumPyro, whose
  MCMC progress bars use it too.
* ``counter(desc, unit, enabled)``: a tqdm counter without a total, for loops whose length
  is not known in advance (the iterations of an L-BFGS fit, run in windows); it appears
  only once the loop has run ``COUNTER_DELAY`` seconds, so short fits stay quiet.
* ``note(message, enabled)``: one line, for steps that run as one device call and cannot
  report from inside, and for one value of a grid search.

Example:
    >>> from ppgpc.runtime.progress import bar, note
    >>> with bar(3, "steps", enabled=False) as b:
    ...     for _ in range(3):
    ...         b.update(1)
    >>> note("epsilon 0.99: NLL 0.21", enabled=False)
"""

from __future__ import annotations

import sys
import time

__all__ = ["bar", "counter", "note", "time_left", "Timer", "COUNTER_DELAY"]

COUNTER_DELAY = 2.0
"""Seconds a ``counter`` waits before it first shows."""


class _Silent:
    """A bar that does nothing (``bar(..., enabled=False)``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        """Nothing."""

    def set_postfix(self, *args, **kwargs) -> None:
        """Nothing."""

    def close(self) -> None:
        """Nothing."""

    n = 0
    """Units counted (always 0)."""


def bar(total: int, desc: str, enabled: bool, unit: str = "step"):
    """A progress bar of ``total`` units on stderr, or a silent stand-in.

    Args:
        total: the units the loop will run (its ``update`` calls add up to this).
        desc: the label in front of the bar.
        enabled: False gives an object with the same methods that writes nothing.
        unit: what one unit is called.

    Returns:
        A context manager with ``update(n)``, ``set_postfix(**values)`` and ``close()``.
    """
    if not enabled:
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=int(total), desc=desc, unit=unit, leave=False, file=sys.stderr,
                dynamic_ncols=True)


def counter(desc: str, unit: str, enabled: bool):
    """A running count of steps (named ``unit``) on stderr with no total, or a silent
    stand-in.

    Shown from ``COUNTER_DELAY`` seconds on (tqdm's ``delay``) and removed when it closes.

    Returns:
        A context manager with ``update(n)``, ``set_postfix(values)``, ``close()`` and the
        count so far as ``n``.
    """
    if not enabled:
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=None, desc=desc, unit=unit, leave=False, file=sys.stderr,
                dynamic_ncols=True, delay=COUNTER_DELAY)


def note(message: str, enabled: bool) -> None:
    """Write ``message`` as one line to stderr when ``enabled``."""
    if enabled:
        sys.stderr.write(message.rstrip("\n") + "\n")
        sys.stderr.flush()


def time_left(seconds: float, done: int, total: int) -> str:
    """``", about 12 s left"``: the time ``total - done`` more steps take at the mean pace
    of the ``done`` taken in ``seconds`` (the first step's compilation included, so early
    estimates run high); empty when none are left or they take under a second.

    Example:
        >>> time_left(6.0, 2, 5), time_left(0.2, 1, 4)
        (', about 9 s left', '')
    """
    left = seconds / done * (total - done) if 0 < done < total else 0.0
    return f", about {left:.0f} s left" if left >= 1.0 else ""


class Timer:
    """Seconds since construction, for the lines ``note`` writes: ``f"{timer}"`` reads
    ``"1.2 s"``."""

    def __init__(self):
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        """Seconds elapsed."""
        return time.perf_counter() - self.start

    def __format__(self, spec: str) -> str:
        return f"{self.seconds:.1f} s"

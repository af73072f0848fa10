"""Progress on stderr for the long loops of a fit: one helper, silent when disabled.

Two forms, both written to ``sys.stderr`` (a terminal shows them in place; a notebook shows
stderr under the cell) and both doing nothing at all when ``enabled`` is False:

* ``bar(total, desc, enabled)``: a tqdm bar for loops that run on the host in windows
  (SVI windows, CAVI windows, Adam windows). tqdm is already a dependency of NumPyro, whose
  MCMC progress bars use it too.
* ``note(message, enabled)``: one line, for steps that run as one device call and cannot
  report from inside (an L-BFGS hyperparameter fit) and for one value of a grid search.

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

__all__ = ["bar", "note", "Timer"]


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


def note(message: str, enabled: bool) -> None:
    """Write ``message`` as one line to stderr when ``enabled``."""
    if enabled:
        sys.stderr.write(message.rstrip("\n") + "\n")
        sys.stderr.flush()


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

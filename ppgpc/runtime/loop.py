"""The one loop every iterative method of a fit runs in: compiled windows of steps on the
device, the algorithm's own check between them, one progress display, one record of why
the run stopped.

An algorithm supplies a window, ``window(state, n) -> (state, Window)``: at most ``n``
more units (SVI steps, CAVI iterations, L-BFGS iterations, MCMC transitions) in one or a
few device calls, and a ``Window`` saying how many it ran, what to show, and whether its
check says stop (``Window.stop``: the check's reason, e.g. ``"elbo"``, ``"converged"``).
``run_windows`` calls it until the check stops the run or ``cap`` units have run, and
returns the state with a ``Stopped`` record: the reason, the units run, and whether the
check (not the cap) ended it. Windows are either a fixed number of units (``size``) or,
with ``size=None``, sized from the measured time per unit to take about
``WINDOW_SECONDS`` each (the first window is one unit), so a display updates about twice a
second whatever a step costs.

The display (``ppgpc.runtime.progress``) is a bar of ``cap`` units when ``total`` is True
(a window may move its end: ``Window.total``), else a counter that appears only once the
run has taken ``COUNTER_DELAY`` seconds; nothing at all when ``progress`` is False.

Example:
    >>> from ppgpc.runtime.loop import Window, run_windows
    >>> def halve(x, n):   # n halvings, stop when below 1e-3
    ...     for _ in range(n):
    ...         x = x / 2
    ...     return x, Window(n, {"x": x}, "small" if x < 1e-3 else None)
    >>> x, stopped = run_windows(halve, 1.0, cap=100, size=4, desc="halve", unit="it",
    ...                          progress=False, cap_reason="max_iter")
    >>> stopped
    Stopped(reason='small', units=12, converged=True)
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ppgpc.runtime.progress import Timer, bar, counter

__all__ = ["Window", "Stopped", "run_windows", "relative_change_below", "WINDOW_SECONDS"]

def relative_change_below(new, old, tol):
    """The stop test of an objective (an ELBO) between two evaluations:
    |new - old| < tol |new|. False while ``old`` is NaN; Python floats, NumPy or JAX values
    (inside a compiled loop: a traced boolean).

    Used by the full CAVI (on the device), the stochastic CAVI and SVI (host side).
    """
    return abs(new - old) < tol * abs(new)


WINDOW_SECONDS = 0.5
"""Seconds a window sized by time (``size=None``) aims to take."""


class Window(NamedTuple):
    """What one window of an algorithm reports to ``run_windows``."""

    units: int
    """Units (steps, iterations, transitions) the window ran, at most the ``n`` asked."""
    postfix: dict
    """Values to show beside the progress, by label (empty: none)."""
    stop: str | None = None
    """Stop now, for this reason: the algorithm's check passed, or (the loop's
    ``cap_reason``) the algorithm reached a cap of its own; None: go on."""
    total: int | None = None
    """A new end of the progress bar (an MCMC run's next checkpoint), or None."""


class Stopped(NamedTuple):
    """Why a run ended: the one record of it."""

    reason: str
    """The check's reason (``Window.stop``), or the loop's ``cap_reason`` at the cap."""
    units: int
    """Units run in all."""
    converged: bool
    """True when the algorithm's check ended the run, False at a cap."""


def _next_size(size: int | None, per_unit: float | None) -> int:
    if size is not None:
        return size
    if per_unit is None:
        return 1
    return max(int(WINDOW_SECONDS / max(per_unit, 1e-6)), 1)


def run_windows(window: Callable[[Any, int], tuple[Any, Window]], state, *, cap: int,
                size: int | None, desc: str, unit: str, progress: bool, cap_reason: str,
                total: bool | int = True) -> tuple[Any, Stopped]:
    """Run ``window`` until the algorithm's check stops it or ``cap`` units have run.

    Args:
        window: ``(state, n) -> (state, Window)``, at most ``n`` more units.
        state: the algorithm's state at the start.
        cap: the most units in all (at least 1).
        size: units per window, or None to size windows by time (``WINDOW_SECONDS``).
        desc, unit: the display's label and unit.
        progress: show progress on stderr.
        cap_reason: ``Stopped.reason`` when the run reaches ``cap`` (a window that stops
            for this reason stopped at a cap too: not converged).
        total: a bar of ``cap`` units (True), of this many units (an int; windows may move
            its end, ``Window.total``), or a delayed counter (False).

    Returns:
        (state, Stopped): the last state and why the run ended.
    """
    cap = int(cap)
    if total is False:
        display = counter(desc, unit, progress)
    else:
        display = bar(cap if total is True else int(total), desc, progress, unit=unit)
    done, per_unit = 0, None
    with display as shown:
        while done < cap:
            asked = min(_next_size(size, per_unit), cap - done)
            timer = Timer()
            state, report = window(state, asked)
            if report.units > 0:
                per_unit = timer.seconds / report.units
            done += report.units
            if report.postfix:
                shown.set_postfix(report.postfix, refresh=False)
            if report.total is not None and hasattr(shown, "total"):
                shown.total = report.total
                shown.refresh()
            shown.update(report.units)
            if report.stop is not None:
                return state, Stopped(report.stop, done, report.stop != cap_reason)
            if report.units == 0:
                raise RuntimeError(f"{desc}: a window ran no {unit} and its check did not "
                                   "stop the run")
    return state, Stopped(cap_reason, done, False)

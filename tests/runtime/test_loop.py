"""The one loop of every iterative method (``ppgpc.runtime.loop.run_windows``): it stops
when the algorithm's check says so or at the cap, and records which."""

import pytest

from ppgpc.runtime import loop
from ppgpc.runtime.loop import Window, run_windows


def _count_to(target):
    """A window that adds its units to a counter and whose check passes at ``target``."""
    asked = []

    def window(total, n):
        asked.append(n)
        total += n
        return total, Window(n, {"total": total}, "reached" if total >= target else None)

    return window, asked


@pytest.mark.parametrize("target, cap, size, stopped, asked", [
    (7, 100, 3, loop.Stopped("reached", 9, True), [3, 3, 3]),
    (1000, 10, 4, loop.Stopped("max_iter", 10, False), [4, 4, 2]),
], ids=["the check stops it, converged", "the cap stops it, the last window cut to fit"])
def test_the_run_stops_at_its_check_or_its_cap_and_records_which(target, cap, size, stopped,
                                                                  asked):
    window, seen = _count_to(target)
    total, record = run_windows(window, 0, cap=cap, size=size, desc="t", unit="it",
                                progress=False, cap_reason="max_iter")
    assert (total, record) == (stopped.units, stopped)
    assert seen == asked


def test_windows_sized_by_time_start_at_one_unit_and_grow(monkeypatch):
    monkeypatch.setattr(loop, "WINDOW_SECONDS", 1e6)
    window, asked = _count_to(50)
    run_windows(window, 0, cap=50, size=None, desc="t", unit="it", progress=False,
                cap_reason="max_iter")
    assert asked[0] == 1 and len(asked) == 2 and sum(asked) == 50


def test_a_window_that_runs_nothing_and_does_not_stop_is_an_error():
    with pytest.raises(RuntimeError, match="ran no it"):
        run_windows(lambda s, n: (s, Window(0, {})), 0, cap=5, size=1, desc="stuck",
                    unit="it", progress=False, cap_reason="max_iter")


def test_progress_shows_the_postfix_and_the_moved_end(capsys):
    def window(total, n):
        total += n
        return total, Window(n, {"elbo": "-1.5"}, "done" if total >= 4 else None, total=8)

    run_windows(window, 0, cap=8, size=2, desc="SVI", unit="step", progress=True,
                cap_reason="max_iter")
    err = capsys.readouterr().err
    assert "SVI" in err and "elbo=-1.5" in err and "/8" in err

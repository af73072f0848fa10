"""Saving is atomic: a save cut short at any moment leaves the earlier save or the new one.

Two fitted ILR-GP estimators that predict differently are saved over one another while
saves are interrupted (an exception, KeyboardInterrupt, SIGKILL at random moments) or run
in two processes at once; after each, the folder must load and predict exactly like one
of the two, and what saves leave beside it must be cleaned up or ignored.
"""

import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ppgpc
from fitted_cases import initial_hyperparameters, toy
from ppgpc import ILRGPClassifier
from ppgpc.io import folders


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two fitted estimators (epsilon 0.99 and 0.9 on the same 30 points), each saved to a
    folder of its own, and their predictions on fixed inputs."""
    X, y = toy()
    options = {"hyperparameters": initial_hyperparameters("ilr_gp"), "num_draws": 20}
    fits = [ILRGPClassifier(epsilon=epsilon, seed=4, progress=False,
                            inference_options=options).fit(X, y) for epsilon in (0.99, 0.9)]
    sources = [fit.save(tmp_path_factory.mktemp("sources") / name)
               for fit, name in zip(fits, "ab")]
    predictions = [fit.predict_proba(X) for fit in fits]
    assert not np.array_equal(*predictions)
    return fits, sources, X, predictions


def _which(path, X, predictions) -> int:
    """Which of ``predictions`` the save at ``path`` predicts exactly (an AssertionError if
    it predicts neither)."""
    proba = ppgpc.load(path).predict_proba(X)
    matches = [i for i, expected in enumerate(predictions) if np.array_equal(proba, expected)]
    assert matches, f"{path} loads a model that predicts like neither save"
    return matches[0]


def _beside(path) -> list[str]:
    """The names in the folder that holds ``path``."""
    return sorted(os.listdir(path.parent))


def _write_part_then_raise(error):
    """A stand-in for the arrays.nc writer that writes the first group and then raises."""
    def write(path, groups):
        first = next(iter(groups))
        folders.dataset(groups[first]).to_netcdf(path, group=first, engine="h5netcdf")
        assert path.stat().st_size > 0
        raise error
    return write


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()],
                         ids=["exception", "KeyboardInterrupt"])
def test_an_interrupted_write_leaves_the_earlier_save(tmp_path, models, monkeypatch, error):
    (a, b), _, X, predictions = models
    path = a.save(tmp_path / "m")
    monkeypatch.setattr(folders, "write_arrays", _write_part_then_raise(error))
    with pytest.raises(type(error)):
        b.save(path)
    assert _which(path, X, predictions) == 0
    assert _beside(path) == ["m"]                 # no temporary folder, no lock file


def test_a_save_interrupted_between_its_renames_keeps_the_earlier_save(tmp_path, models,
                                                                       monkeypatch):
    """A KeyboardInterrupt after the earlier save was renamed away and before the new one
    took its place: the earlier save is put back."""
    (a, b), _, X, predictions = models
    path = a.save(tmp_path / "m")
    rename = os.rename

    def interrupted(src, dst):
        if str(dst) == str(path) and ".m.tmp-" in str(src):
            assert not path.exists()              # the earlier save is the backup now
            raise KeyboardInterrupt
        rename(src, dst)

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        b.save(path)
    monkeypatch.undo()
    assert _which(path, X, predictions) == 0
    assert _beside(path) == ["m"]


def test_leftovers_of_killed_saves_are_ignored_by_load_and_cleaned_by_the_next_save(
        tmp_path, models):
    (a, b), _, X, predictions = models
    path = a.save(tmp_path / "m")
    # a save killed while writing: a half-written temporary folder, and its lock file
    half = tmp_path / ".m.tmp-12345-0123abcd"
    half.mkdir()
    (half / "arrays.nc").write_bytes(b"\x89HDF\r\n")
    (half / "settings.json").write_text('{"format_version": 2, "kind": "estimator"}')
    (tmp_path / ".m.lock").touch()
    assert _which(path, X, predictions) == 0
    b.save(path)
    assert _which(path, X, predictions) == 1
    assert _beside(path) == ["m"]
    # a save killed between its two renames: the earlier save is the backup, and the new
    # complete one is still a temporary folder; load reads the backup, never the latter
    backup = tmp_path / ".m.old-12345-89abcdef"
    os.rename(path, backup)
    os.rename(a.save(tmp_path / "new"), tmp_path / ".m.tmp-12345-456789ab")
    assert _which(path, X, predictions) == 1
    a.save(path)
    assert _which(path, X, predictions) == 0
    assert _beside(path) == ["m"]
    # a temporary folder alone is not a save
    os.rename(path, tmp_path / ".m.tmp-12345-fedcba98")
    with pytest.raises(FileNotFoundError, match="is not a saved ppgpc model: it does not "
                                                "exist"):
        ppgpc.load(path)
    # refusals stay, and leave nothing behind
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    with pytest.raises(ValueError, match="holds other files"):
        a.save(tmp_path / "notes")
    assert sorted(os.listdir(tmp_path / "notes")) == ["todo.txt"]
    assert not (tmp_path / ".notes.lock").exists()


# A process that imports ppgpc once and then, for each line it reads, forks a saver that
# loads the two saves and saves them alternately over the target until it is killed; it
# answers "ready <pid>" from the saver, then the saver's wait status. Importing ppgpc does
# not start JAX's runtime (each saver starts its own), so forking is safe, and the import
# (seconds) is paid once, not once a kill.
_SAVER_SERVER = r"""
import itertools, os, sys
import ppgpc

first, second, target = sys.argv[1:]
for _ in sys.stdin:
    pid = os.fork()
    if pid == 0:
        models = [ppgpc.load(first), ppgpc.load(second)]
        print("ready", os.getpid(), flush=True)
        for i in itertools.count():
            models[i % 2].save(target)
    print(os.waitpid(pid, 0)[1], flush=True)
"""

_ENV = dict(os.environ, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
"""The environment of the saving processes: CPU JAX, one BLAS thread (a process that forks
has no other threads)."""


def _answer(process, timeout: float = 120.0) -> str:
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, f"no answer from the saving process in {timeout} s"
    return process.stdout.readline().decode().strip()


KILLS = 6
"""Saves killed per run of the test below. Each costs a forked saver's start (its JAX runtime
and two loads, about 2.5 s); every one of 12 kills landed while a save was writing, so 6 land
there with near certainty."""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the saver processes are forked")
def test_a_save_killed_at_random_moments_leaves_the_earlier_or_the_new_save(tmp_path, models):
    (a, _), (source_a, source_b), X, predictions = models
    path = a.save(tmp_path / "m")
    log = tmp_path.parent / f"{tmp_path.name}-server.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen([sys.executable, "-c", _SAVER_SERVER, str(source_b),
                                   str(source_a), str(path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=stderr, bufsize=0, env=_ENV)
    rng = np.random.default_rng(20240607)
    seen, mid_write = set(), 0
    try:
        for delay in rng.uniform(0.0, 0.4, size=KILLS):
            server.stdin.write(b"save\n")
            answer = _answer(server)
            assert answer.startswith("ready"), f"{answer}: {log.read_text()[-2000:]}"
            time.sleep(delay)
            os.kill(int(answer.split()[1]), signal.SIGKILL)
            status = int(_answer(server))
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
                f"the saver ended by itself (status {status}): {log.read_text()[-2000:]}")
            mid_write += any(".m.tmp-" in name for name in _beside(path))
            seen.add(_which(path, X, predictions))
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert mid_write, "no kill landed while a save was writing"
    a.save(path)
    assert _which(path, X, predictions) == 0
    assert _beside(path) == ["m"]
    print(f"after the kills the folder held save(s) {sorted(seen)}; {mid_write} of {KILLS} "
          "kills left a half-written temporary folder")


_CONCURRENT_SAVER = r"""
import os, sys, time
import ppgpc

source, target, go, count = sys.argv[1:]
model = ppgpc.load(source)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
for _ in range(int(count)):
    model.save(target)
"""


def test_two_processes_saving_to_one_folder_end_with_one_complete_save(tmp_path, models):
    """Each process saves its model 8 times over the folder, at the same time; meanwhile
    every load reads one complete save, and at the end the folder holds one of the two."""
    (a, _), sources, X, predictions = models
    path = a.save(tmp_path / "m")
    go = tmp_path.parent / f"{tmp_path.name}-go"
    savers = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_SAVER, str(source),
                                str(path), str(go), "8"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, bufsize=0, env=_ENV)
              for source in sources]
    try:
        for saver in savers:
            assert _answer(saver) == "ready", saver.stderr.read().decode()[-2000:]
        go.touch()
        loads = []
        while any(saver.poll() is None for saver in savers):
            loads.append(_which(path, X, predictions))
        for saver in savers:
            assert saver.wait() == 0, saver.stderr.read().decode()[-2000:]
    finally:
        for saver in savers:
            if saver.poll() is None:
                saver.kill()
                saver.wait()
    _which(path, X, predictions)
    assert _beside(path) == ["m"]
    print(f"{len(loads)} loads during the saves read saves {sorted(set(loads))}")

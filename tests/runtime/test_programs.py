"""The bound on compiled programs over a long process (``ppgpc.runtime.programs``).

The unit tests check the record of training shapes (least recently used, a release on the
first new shape past the bound); the soak test runs a process that fits the default
``ILRGPClassifier`` at many training sizes and reads its memory mappings, which grow by
about a thousand per new training size when programs are never released.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import SMALL
from ppgpc.runtime import padding, programs


@pytest.fixture
def fresh_record(monkeypatch):
    """An empty record with a bound of 3 shapes, mappings that never reach their bound,
    and ``programs.release`` counted, not run."""
    cleared = []
    monkeypatch.setattr(programs, "_live", type(programs._live)())
    monkeypatch.setattr(programs, "MAX_TRAINING_SHAPES", 3)
    monkeypatch.setattr(programs, "memory_maps", lambda: 10)
    monkeypatch.setattr(programs, "release", lambda: cleared.append(1))
    return cleared


def test_a_new_shape_over_the_mapping_bound_releases(fresh_record, monkeypatch):
    cleared = fresh_record
    maps = [10]
    monkeypatch.setattr(programs, "memory_maps", lambda: maps[0])
    programs.use_training_shape("a")
    maps[0] = programs.MAX_MEMORY_MAPS + 1
    assert programs.use_training_shape("a") is False  # held: compiles nothing
    assert programs.use_training_shape("b") is True and cleared == [1]
    assert programs.live_training_shapes() == 1


def test_any_fit_over_the_ceiling_releases(fresh_record, monkeypatch):
    """Programs that no later fit reuses (NumPyro's MCMC loop of the Gibbs samplers) grow a
    process at a shape it holds: above the ceiling, a fit at that shape releases too."""
    cleared = fresh_record
    maps = [10]
    monkeypatch.setattr(programs, "memory_maps", lambda: maps[0])
    programs.use_training_shape("a")
    maps[0] = programs.CEILING_MEMORY_MAPS
    assert programs.use_training_shape("a") is False and cleared == []
    maps[0] = programs.CEILING_MEMORY_MAPS + 1
    assert programs.use_training_shape("a") is True and cleared == [1]
    assert programs.live_training_shapes() == 1


def test_mappings_are_read_on_linux():
    if os.path.exists("/proc/self/maps"):
        assert programs.memory_maps() > 0
    else:
        assert programs.memory_maps() is None


def test_signatures_follow_shapes_not_values():
    def signature(X, n=3, epsilon=0.9, name="ilr_gp", draws=10):
        return programs.training_signature({"X": X, "n": n, "epsilon": epsilon},
                                           (name, {"num_draws": draws}))

    a = signature(jnp.zeros((5, 2)))
    assert a == signature(jnp.ones((5, 2)), n=4, epsilon=0.99)  # traced values
    assert a != signature(jnp.zeros((6, 2)))
    assert a != signature(np.zeros((5, 2), dtype=np.float32))
    assert a != signature(jnp.zeros((5, 2)), name="gpd")
    assert a != signature(jnp.zeros((5, 2)), draws=20)  # a static option


def test_a_new_shape_past_the_bound_releases_every_program(fresh_record):
    cleared = fresh_record
    assert [programs.use_training_shape(s) for s in "abc"] == [False] * 3
    assert programs.use_training_shape("a") is False  # held: nothing compiles
    assert cleared == []
    assert programs.use_training_shape("d") is True
    assert cleared == [1]
    assert programs.live_training_shapes() == 1
    assert [programs.use_training_shape(s) for s in "dbc"] == [False] * 3
    assert programs.use_training_shape("e") is True
    assert len(cleared) == 2


def test_the_record_is_least_recently_used(fresh_record):
    for s in "abc":
        programs.use_training_shape(s)
    programs.use_training_shape("a")  # now the most recent
    assert list(programs._live) == ["b", "c", "a"]


def test_the_driver_records_each_fit(fresh_record, monkeypatch):
    from ppgpc.infer import fit

    seen = []
    monkeypatch.setattr("ppgpc.infer.driver.use_training_shape",
                        lambda signature: seen.append(signature) or False)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(70, 2)), np.arange(70) % 2
    for n in (10, 12, 70):  # 10 and 12 padded to one bucket (ppgpc.runtime.padding)
        fit("ilr_gp", X[:n], y[:n], method="map", num_draws=10)
    assert len(seen) == 3 and seen[0] == seen[1] and seen[1] != seen[2]


COUNTERS = """
import json, warnings
import jax, jax.numpy as jnp
import numpy as np
import ppgpc
from ppgpc.runtime import programs
warnings.simplefilter("ignore", ppgpc.ConvergenceWarning)
compiles = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiles.__setitem__(0, compiles[0] + (
        event == "/jax/core/compile/backend_compile_duration")))

def maps():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)
"""
"""The start of the soak scripts below: ``compiles[0]``, the XLA compilations so far, and
``maps()``, the process's memory mappings."""


SOAK = COUNTERS + """
programs.MAX_MEMORY_MAPS = {bound}

users = jax.jit(lambda x: jnp.tanh(x) @ x.T)  # a user's program, compiled before the fits
x = jnp.ones((5, 5))
users(x).block_until_ready()
rng = np.random.default_rng(0)
rows = []
for n in range(20, 20 + 30 * {fits}, 30):
    y = np.arange(n) % 3
    X = rng.normal(size=(n, 3)) + 2.0 * np.eye(3)[y]
    ppgpc.ILRGPClassifier(progress=False).fit(X, y)
    rows.append(maps())
before = compiles[0]
users(x).block_until_ready()
print(json.dumps({{"maps": rows, "releases": programs.releases(),
                  "user_compiles": compiles[0] - before, "user_cache": users._cache_size()}}))
"""


SOAK_ALL = COUNTERS + """
programs.MAX_MEMORY_MAPS = programs.CEILING_MEMORY_MAPS = 10 ** 9  # no release: growth
programs.MAX_TRAINING_SHAPES = 10 ** 9                                # would show

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

ESTIMATORS = {{
    "ILR": lambda: ppgpc.ILRGPClassifier(progress=False),
    "GPD": lambda: ppgpc.DirichletGPClassifier(progress=False),
    "LSM": lambda: ppgpc.LogisticSoftmaxGPClassifier(progress=False, inference="cavi"),
    "LSM-NUTS": lambda: ppgpc.LogisticSoftmaxGPClassifier(progress=False, inference_options={{
        "num_warmup": 100, "num_samples": 100, "max_samples": 100}}),
    "SVGPC": lambda: ppgpc.SoftmaxSVGPClassifier(progress=False, inference_options={{
        "max_iter": 200}}),
}}
rng = np.random.default_rng(0)
first = [(n, 3, 3) for n in {first}] + ([(40, 5, 3)] if {five_features} else []) + [(40, 3, 4)]
sizes = {sizes}
rng.shuffle(sizes)
rest = [(n, 3, 3) for n in sizes] + [(n, 5, 3) for n in {five_features}] + [
    (n, 3, 4) for n in {four_classes}]
out = {{}}
for name, make in ESTIMATORS.items():
    rows = []
    # NUTS, its CAVI fit of the kernel included, is the slowest: every third size of the rest
    every = 3 if name == "LSM-NUTS" else 1
    for phase, cases in (("first", first), ("rest", rest[::every])):
        for n, d, c in cases:
            y = np.arange(n) % c
            X = rng.normal(size=(n, d)) + 2.0 * np.eye(c, d)[y]
            before = compiles[0]
            make().fit(X, y).predict_proba(X[:7])
            rows.append([phase, n, d, c, maps(), rss(), compiles[0] - before])
    out[name] = rows
print(json.dumps(out))
"""


def _soak(bound: int, fits: int) -> dict:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SOAK.format(
        bound=bound, fits=fits))], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"),
                    reason="memory mappings are read from /proc/self/maps (Linux)")
def test_a_process_fitting_many_sizes_stops_growing_and_keeps_a_users_program():
    """ILRGPClassifier() at 8 training sizes from 20 to 230 in one process (padded to 7
    buckets, ``ppgpc.runtime.padding``), programs released above 4,000 mappings: the process never
    holds more than 4,000 plus one fit's (about 1,000), where without releases the 7
    buckets add about 5,700 to the 2,500 of the first fit. A user's ``jax.jit`` function,
    compiled before the fits, compiles nothing when called after them: the releases drop
    ppgpc's programs only."""
    record = _soak(bound=4000, fits=8)
    maps = record["maps"]
    assert record["releases"] >= 2
    assert max(maps) < 4000 + 1500, maps
    assert record["user_compiles"] == 0 and record["user_cache"] == 1, record


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"),
                    reason="memory mappings are read from /proc/self/maps (Linux)")
def test_every_estimator_at_sizes_of_held_buckets_compiles_and_grows_nothing():
    """One process fits each of the four estimators (defaults, but the logistic-softmax GP
    by its full CAVI, and 200 SVI steps; and the logistic-softmax GP's default NUTS, its
    CAVI fit of the kernel included, at 100 draws per chain so that every fit keeps the
    same number of draws; every third of the sizes below), releases off:

    * at ``PPGPC_TEST_SIZE=full``, every training size from 20 to 84 (three buckets: 64, 80
      and 96), and three sizes each at 5 features and at 4 classes;
    * at the small size, four sizes in two buckets (three of 64, one of 80) and one at 4
      classes.

    Once each bucket and count has been fitted (the first fits, one per bucket and count),
    the other fits (71, or 5 at the small size) and their predictions compile nothing, and
    the process's mappings and resident memory stay within what one fit's arrays come and
    go by (200 mappings, 80 MiB) of where they stood."""
    if SMALL:
        first, sizes, five_features, four_classes = (20, 70), [20, 41, 62, 71], (), (45,)
    else:
        first, sizes = (20, 70, 90), list(range(20, 85))
        five_features, four_classes = (30, 50, 60), (25, 45, 64)
    assert {padding.bucket(n) for n in sizes} == {padding.bucket(n) for n in first}
    extra = len(five_features) + len(four_classes)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SOAK_ALL.format(
        first=first, sizes=sizes, five_features=five_features, four_classes=four_classes))],
        capture_output=True, text=True, env=env, timeout=1500)
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout.strip().splitlines()[-1])
    for name, rows in record.items():
        first = [r for r in rows if r[0] == "first"]
        rest = [r for r in rows if r[0] == "rest"]
        if name == "LSM-NUTS":  # every third of the rest (the child's ``every``)
            assert len(rest) == len(range(0, len(sizes) + extra, 3)), name
        else:
            assert {r[1] for r in rest} >= set(sizes) and len(rest) == len(sizes) + extra, name
        assert sum(r[6] for r in rest) == 0, (name, [r for r in rest if r[6]])
        maps, mib = first[-1][4], first[-1][5]
        assert max(r[4] for r in rest) <= maps + 200, (name, maps, [r[4] for r in rest])
        assert max(r[5] for r in rest) <= mib + 80, (name, mib, [r[5] for r in rest])


def test_a_release_drops_ppgpcs_programs_and_keeps_the_users():
    """``release`` empties the caches of ppgpc's jitted functions (``programs.jit``) and
    leaves a user's own ``jax.jit`` function with its compiled program."""
    import jax

    users = jax.jit(lambda x: 2.0 * x + 1.0)
    ours = programs.jit(lambda x: 3.0 * x - 1.0)
    users(jnp.ones(3))
    ours(jnp.ones(3))
    assert users._cache_size() == 1 and ours._cache_size() == 1
    programs.release()
    assert ours._cache_size() == 0
    assert users._cache_size() == 1

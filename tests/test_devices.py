"""The collapsed sparse models on several devices (``devices``; ``ppgpc.blocks``).

JAX fixes its devices when it starts, so the multi-device checks run ``device_checks.py``
in subprocesses: four forced host devices in one process, and two processes joined by
``jax.distributed`` on localhost (CPU collectives over gloo).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from device_checks import DISTRIBUTED_FIT, toy
from ppgpc import DirichletGPClassifier, SoftmaxSVGPClassifier
from ppgpc.infer import fit

SCRIPT = Path(__file__).with_name("device_checks.py")
TIMEOUT = 900


def _environment(num_devices: int | None) -> dict:
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    if num_devices is not None:
        env["XLA_FLAGS"] = (f"{env.get('XLA_FLAGS', '')} "
                            f"--xla_force_host_platform_device_count={num_devices}").strip()
    return env


def _records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_four_devices_give_the_one_device_bound_gradient_posterior_and_predictions():
    run = subprocess.run([sys.executable, str(SCRIPT), "single"], capture_output=True,
                         text=True, env=_environment(4), timeout=TIMEOUT)
    assert run.returncode == 0, run.stderr[-3000:]
    records = _records(run.stdout)
    bounds = [r for r in records if r["check"] == "bound"]
    assert {r["case"] for r in bounds} == {"ilr shared", "ilr per coordinate",
                                           "gpd two-level", "gpd class kernels",
                                           "gpd per class"}
    for r in bounds:
        assert r["devices"] == 4, r
        assert r["value"] <= 1e-10 and r["gradient"] <= 1e-10 and r["posterior"] <= 1e-10, r
    fits = [r for r in records if r["check"] in ("fit", "estimator")]
    assert len(fits) == 4
    for r in fits:
        assert r["devices"] == 4, r
        assert r["proba"] <= 1e-8, r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_with_jax_distributed_fit_as_one_process():
    if not hasattr(jax.config, "jax_cpu_collectives_implementation"):
        pytest.skip("this jaxlib has no CPU collectives (jax_cpu_collectives_implementation), "
                    "so two CPU processes cannot be joined")
    port = _free_port()
    runs = [subprocess.Popen([sys.executable, str(SCRIPT), "distributed", str(i), "2",
                              str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=_environment(None)) for i in range(2)]
    outputs = [run.communicate(timeout=TIMEOUT) for run in runs]
    for run, (_, err) in zip(runs, outputs):
        assert run.returncode == 0, err[-3000:]
    X, y = toy()
    want = fit("ilr_gp_sparse", X, y, **DISTRIBUTED_FIT).predict_proba(toy(40, seed=7)[0])
    for i, (out, _) in enumerate(outputs):
        (record,) = _records(out)
        assert (record["process"], record["global_devices"], record["devices"]) == (i, 2, 2)
        np.testing.assert_allclose(record["proba"], want, rtol=0, atol=1e-8)


# ------------------------------------------------------------ one device, and bad values
def test_one_device_mesh_is_the_default_fit():
    X, y = toy(60)
    runs = [fit("dirichlet_gp_sparse", X, y, model_options={"num_inducing": 5}, max_iter=5,
                num_draws=2, devices=devices) for devices in (None, 1)]
    assert runs[1].info["devices"] == 1 and "devices" not in runs[0].info
    np.testing.assert_allclose(runs[1].predict_proba(X[:5]), runs[0].predict_proba(X[:5]),
                               rtol=0, atol=1e-12)


def test_devices_are_refused_where_they_cannot_be_used():
    X, y = toy(30)
    with pytest.raises(ValueError, match=r"method 'svi' cannot split.*\['exact', 'map'\]"):
        fit("softmax_svgp", X, y, method="svi", devices=1)
    with pytest.raises(ValueError, match=r"model 'ilr_gp' cannot split.*'ilr_gp_sparse', "
                                         r"'dirichlet_gp_sparse'"):
        fit("ilr_gp", X, y, method="exact", devices=1)
    with pytest.raises(ValueError, match=r"devices=\d+ but JAX sees"):
        fit("ilr_gp_sparse", X, y, devices=len(jax.devices()) + 1)
    no_data_axis = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    with pytest.raises(ValueError, match="axis named 'data'"):
        fit("ilr_gp_sparse", X, y, devices=no_data_axis)
    with pytest.raises(ValueError, match="positive integer or a jax.sharding.Mesh"):
        fit("ilr_gp_sparse", X, y, devices="all")
    with pytest.raises(ValueError, match=r"method 'svi' cannot split"):
        SoftmaxSVGPClassifier(inference_options={"devices": 1}, progress=False).fit(X, y)
    with pytest.raises(ValueError, match=r"model 'dirichlet_gp' cannot split"):
        DirichletGPClassifier(alpha_eps=0.01, inference="map", progress=False,
                              inference_options={"devices": 1}).fit(X, y)

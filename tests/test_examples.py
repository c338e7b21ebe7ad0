"""The examples (gpugraph.examples: the programs of the pages gpugraph follows) run and validate, in-process and
from the command line."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import gpugraph
from gpugraph.examples import conditional_solver, data_parallel, explicit_graph


def test_explicit_graph_validates(device):
    result = explicit_graph.run(device)
    assert result.name == "explicit_graph"
    assert result.validated, result.detail
    assert result.seconds >= 0.0


@pytest.mark.parametrize("host", ["ordinary", "pinned"])
def test_explicit_graph_h_array_is_all_7(device, stream, host):
    """The host vector of the "HIP graphs" program as an ordinary NumPy array (its std::vector) or page-locked
    memory: 7 everywhere."""
    h_array = (np.zeros if host == "ordinary" else device.pinned)(explicit_graph.ARRAY_SIZE, np.float64)
    h_array[:] = 0.0
    g = explicit_graph.build(device, h_array)
    assert len(g) == 10
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert explicit_graph.EXPECTED == 7.0
    assert np.all(h_array == 7.0)


def test_demo_command_line():
    src = str(pathlib.Path(gpugraph.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "gpugraph", "demo", "--backend", "cpu"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "explicit_graph" in proc.stdout
    assert "yes" in proc.stdout


def test_data_parallel_over_processes_matches_numpy(device):
    """The same steps with each rank in a process of its own (a unique id; one device per process)."""
    if device.backend != "cpu" and importlib.util.find_spec("nccl") is None:
        pytest.skip(f"{device.backend}: collectives need nccl4py (pip install '.[nccl]' in a gpugraph checkout)")
    processes = min(2, device._backend.device_count())
    result = data_parallel.run_processes(device.backend, processes, steps=5)
    assert result.validated, result.detail
    assert result.detail.startswith(f"{processes} processes, one device each, 5 steps eager and as graph launches")


def test_data_parallel_steps_eager_and_graphed_match_numpy(device):
    """The data-parallel example: every device of the backend trains on its shard; eager and graphed steps both
    match NumPy's."""
    if device.backend != "cpu" and importlib.util.find_spec("nccl") is None:
        pytest.skip(f"{device.backend}: collectives need nccl4py (pip install '.[nccl]' in a gpugraph checkout)")
    result = data_parallel.run(device, steps=5)
    assert result.validated, result.detail
    count = device._backend.device_count()
    assert result.detail.startswith(f"{count} devices, 5 steps eager and as graph launches")


def test_the_conditional_solver_converges_in_one_launch_as_numpy_does(device):
    result = conditional_solver.run(device)
    assert result.validated, result.detail
    assert result.detail.startswith("460 sweeps in one launch (NumPy: 460)")


def test_the_host_driven_solver_sweeps_as_numpy_does_until_a_read_back_meets_the_tolerance(device, stream):
    n = 512
    problem = conditional_solver.Problem(device, n)
    sweeps, busy = conditional_solver.solve_from_host(problem, stream, every=10)
    x, counted, change = problem.result()
    _, needed = conditional_solver.reference(n)
    assert counted == sweeps and sweeps % 20 == 0 and needed <= sweeps < needed + 20 and busy > 0
    assert change <= conditional_solver.TOLERANCE
    # The same sweeps in NumPy (a tolerance of 0: it stops at the limit) give the same x, bit for bit.
    np.testing.assert_array_equal(x, conditional_solver.reference(n, tolerance=0.0, limit=sweeps)[0])

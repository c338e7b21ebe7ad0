"""The benchmark suite runs on every backend, its workloads check what they time, and a wrong result stops
it (timings are never asserted)."""

import json

import numpy as np
import pytest

import gpugraph as gg
from gpugraph import bench
from gpugraph.bench import _rk4, _workloads

FAST = bench.Options(repeats=2, warmup=1, nodes=16, width=2)


def test_rk4_reference_is_the_known_solution():
    """The float64 reference integrates logistic growth to within RK4's error of the exact solution."""
    y0, r = _rk4.initial()
    t = _rk4.STEPS * _rk4.DT
    exact = 1 / (1 + (1 / y0.astype(np.float64) - 1) * np.exp(-r.astype(np.float64) * t))
    np.testing.assert_allclose(_rk4.reference(y0, r), exact, rtol=1e-6)  # RK4 error: about 4e-7


@pytest.mark.parametrize("name", ["chain", "rk4", "axpy"])
def test_workload_rows(device, name):
    rows = bench.run(device, [name], FAST)
    assert rows and all(row.workload == name and row.repeats == FAST.repeats for row in rows)
    assert all(row.median > 0 and row.low <= row.median <= row.high for row in rows)
    assert any(row.unit == "×" for row in rows)  # each compares two paths of the same run


def test_rk4_refuses_a_wrong_result(device, monkeypatch):
    right = _rk4.reference
    monkeypatch.setattr(_rk4, "reference", lambda y0, r: right(y0, r) * 1.001)
    with pytest.raises(bench.ValidationError, match=r"^rk4 eager: the result is off the float64 reference"):
        bench.run(device, ["rk4"], FAST)


def test_axpy_refuses_a_wrong_kernel(device, monkeypatch):
    """A kernel that computes something else stops the workload before any figure is reported."""
    monkeypatch.setattr(_workloads, "AXPY", gg.Kernel(_workloads.AXPY_SOURCE.replace("+ y[i]", "- y[i]"), "axpy"))
    with pytest.raises(bench.ValidationError, match=r"^axpy: the kernel path's result is off 2\*x \+ y"):
        bench.run(device, ["axpy"], FAST)


def test_gpu_workloads_report_nothing_on_the_cpu():
    cpu = gg.Device("cpu")
    assert bench.run(cpu, ["launch", "graphs", "manage", "dynamic", "memory"], FAST) == []


def test_main_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(["--backend", "cpu", "--workload", "rk4", "--repeats", "2", "--warmup", "0",
                       "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    figures = [row["figure"] for row in written["rows"]]
    assert "eager / graph (gpugraph)" in figures
    machine = written["machine"]  # what the reference tables name for the run (tools/dev/bench_tables.py)
    assert machine["compiler"] and machine["driver"] is None and machine["date"] and machine["command"]
    assert isinstance(machine["versions"], dict)
    assert "rk4" in capsys.readouterr().out

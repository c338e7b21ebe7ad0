"""Several devices of one backend used from one process: each device's memory, streams, default stream and
graph memory are its own, and a device synchronize waits for its own streams only. The CPU backend offers
several devices (cpu:0 .. cpu:N-1, $GPUGRAPH_CPU_DEVICES) so that these rules are tested without GPUs; on a
GPU backend the tests need two devices."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import gpugraph as gg
from gpugraph.backends import get_backend
from gpugraph.backends.cpu import DEVICES, MAX_DEVICES

SCALE = gg.Kernel(r"""
__global__ void scale(float* x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}""", "scale")


def test_the_cpu_backend_offers_several_devices():
    count = get_backend("cpu").device_count()
    assert count == int(os.environ.get("GPUGRAPH_CPU_DEVICES") or DEVICES) >= 2
    devices = [gg.Device(f"cpu:{i}") for i in range(count)]
    assert [d.index for d in devices] == list(range(count)) and len(set(devices)) == count


def test_each_device_runs_its_own_work(pair):
    first, second = pair
    results = []
    for device, factor in ((first, 2.0), (second, 3.0)):
        stream = device.stream()
        x = device.asarray(np.arange(64, dtype=np.float32))
        graph = gg.Graph(device)
        tmp = graph.add_alloc(64, np.float32)
        copy_in = graph.add_memcpy(tmp.array, x, after=tmp)
        node = graph.add_kernel(SCALE, 1, 64, tmp.array, factor, 64, after=copy_in)
        copy_out = graph.add_memcpy(x, tmp.array, after=node)
        graph.add_free(tmp, after=copy_out)
        with graph.instantiate() as exe:
            exe.launch(stream)
            stream.synchronize()
        results.append(x.to_numpy())
    np.testing.assert_array_equal(results[0], np.arange(64) * 2.0)
    np.testing.assert_array_equal(results[1], np.arange(64) * 3.0)


def test_graph_memory_is_counted_per_device(pair):
    first, second = pair
    first.synchronize()
    second.synchronize()
    first.trim_graph_memory()
    second.trim_graph_memory()
    before = first.graph_memory().reserved
    graph = gg.Graph(second)
    alloc = graph.add_alloc(1 << 20, np.uint8)
    graph.add_free(alloc, after=graph.add_memset(alloc.array, 1, after=alloc))
    stream = second.stream()
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert second.graph_memory().reserved >= 1 << 20
    assert first.graph_memory().reserved == before
    second.trim_graph_memory()
    assert second.graph_memory().reserved == 0


def test_a_device_synchronize_waits_for_its_own_streams_only(pair):
    first, second = pair
    release = threading.Event()
    blocked = second.stream()
    blocked.host(release.wait, 30)  # (a GPU stream blocked on the host: a host node that waits)
    done = first.stream()
    x = first.zeros(4, np.float32)
    done.memset(x, 1.0)
    try:
        first.synchronize()  # returns although the other device's stream is blocked
        np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1, 1])
        assert not blocked.done
    finally:
        release.set()
    blocked.synchronize()


def test_each_device_has_its_own_legacy_default_stream(pair):
    """A blocking stream waits for its own device's legacy default stream, not another device's."""
    first, second = pair
    release = threading.Event()
    first.default_stream.host(release.wait, 30)
    stream = second.stream(non_blocking=False)
    y = second.zeros(4, np.float32)
    stream.memset(y, 2.0)
    try:
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), [2, 2, 2, 2])
    finally:
        release.set()
    first.default_stream.synchronize()


@pytest.mark.parametrize("value", ["0", str(MAX_DEVICES + 1), "two", "-1", "²"])
def test_a_wrong_number_of_cpu_devices_is_a_clear_error(value):
    script = ("import gpugraph as gg\ntry:\n    gg.Device('cpu')\n"
              "except gg.BackendUnavailableError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={**os.environ, "GPUGRAPH_CPU_DEVICES": value})
    assert f"$GPUGRAPH_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, got '{value}'" in done.stdout


def test_the_number_of_cpu_devices_is_set_by_the_environment():
    done = subprocess.run([sys.executable, "-m", "gpugraph", "info"], capture_output=True, text=True, check=True,
                          env={**os.environ, "GPUGRAPH_CPU_DEVICES": "2"})
    assert "cpu:0" in done.stdout and "cpu:1" in done.stdout and "cpu:2" not in done.stdout

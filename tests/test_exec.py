"""Executable graphs: repeated launches, other streams, upload, close and context manager, independence
from the template, and errors of host nodes."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


def inc_graph(device, x):
    g = gg.Graph(device)
    g.add_kernel(K.inc, *K.launch_1d(x.size, 4), x, x.size)
    return g


@pytest.mark.parametrize("times", [1, 2, 7])
def test_launch_n_times_gives_n_times_the_effect(device, stream, times):
    x = device.zeros(10, np.float64)
    with inc_graph(device, x).instantiate() as exe:
        for _ in range(times):
            exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(10, float(times)))


def test_seed_kernels_graph_repeated(device, stream):
    ka = gg.Kernel(K.SEED_SOURCE, "kernelA", cpu=lambda launch, a, n: a.__imul__(2.0))
    kc = gg.Kernel(K.SEED_SOURCE, "kernelC", cpu=lambda launch, a, b, n: a.__iadd__(b))
    a = device.asarray(np.ones(8))
    b = device.asarray(np.full(8, 3, np.int32))
    g = gg.Graph(device)
    n1 = g.add_kernel(ka, 1, 8, a, 8)
    g.add_kernel(kc, 1, 8, a, b, 8, after=n1)
    with g.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(a.to_numpy(), np.full(8, (1 * 2 + 3) * 2 + 3.0))


def test_launch_on_different_streams(device):
    x = device.zeros(4, np.float64)
    s1, s2 = device.stream(), device.stream()
    with inc_graph(device, x).instantiate() as exe:
        exe.launch(s1)
        s1.synchronize()
        exe.launch(s2)
        s2.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2, 2])


def test_launches_of_one_exec_on_two_streams_do_not_overlap(device):
    """cudaGraphLaunch: each launch is ordered behind any previous launch of the same executable graph."""
    log, gate = [], threading.Event()

    def body():
        log.append("start")
        if log.count("start") == 1:
            gate.wait(10)   # released by a second run overlapping this one, else by the timer
        else:
            gate.set()
        log.append("end")

    g = gg.Graph(device)
    g.add_host(body)
    s1, s2 = device.stream(), device.stream()
    timer = threading.Timer(0.2, gate.set)
    try:
        with g.instantiate() as exe:
            exe.launch(s1)
            exe.launch(s2)
            timer.start()
            s1.synchronize()
            s2.synchronize()
    finally:
        gate.set()
        timer.cancel()
    assert log == ["start", "end", "start", "end"]


def test_launch_is_stream_ordered_with_other_work(device, stream):
    x = device.zeros(4, np.float64)
    snapshots = []
    with inc_graph(device, x).instantiate() as exe:
        stream.memset(x, 0.0)
        exe.launch(stream)
        host = np.zeros(4)
        stream.memcpy(host, x)
        stream.host(lambda: snapshots.append(host.copy()))
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(snapshots[0], [1, 1, 1, 1])
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2, 2])


def test_upload_then_launch(device, stream):
    x = device.zeros(4, np.float64)
    with inc_graph(device, x).instantiate(upload=stream) as exe:
        exe.upload(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1, 1])


def test_context_manager_closes(device, stream):
    x = device.zeros(4, np.float64)
    with inc_graph(device, x).instantiate() as exe:
        assert isinstance(exe, gg.GraphExec)
        assert not exe.closed
        assert exe.device is device
    assert exe.closed
    assert "closed" in repr(exe)


def test_close_is_idempotent(device):
    exe = inc_graph(device, device.zeros(1, np.float64)).instantiate()
    exe.close()
    exe.close()
    assert exe.closed


def test_exec_is_independent_of_later_template_edits(device, stream):
    log = []
    g = gg.Graph(device)
    a = g.add_host(log.append, "a")
    with g.instantiate() as exe:
        g.add_host(log.append, "added after instantiate", after=a)
        exe.launch(stream)
        stream.synchronize()
    assert log == ["a"]


def test_exec_outlives_dropped_template_reference(device, stream):
    x = device.zeros(3, np.float64)
    exe = inc_graph(device, x).instantiate()
    gc.collect()
    exe.launch(stream)
    stream.synchronize()
    exe.close()
    np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1])


def test_exec_garbage_collected_without_close(device, stream):
    x = device.zeros(3, np.float64)
    g = inc_graph(device, x)
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    del exe
    gc.collect()
    np.testing.assert_array_equal(x.to_numpy(), [1, 1, 1])


def test_memory_graph_exec_released_by_gc_allows_new_instantiate(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.int32)
    g.add_free(alloc, after=alloc)
    exe = g.instantiate()
    del exe
    gc.collect()
    with g.instantiate() as again:
        again.launch(stream)
        stream.synchronize()


def test_host_node_exception_surfaces_at_that_streams_synchronize(device, stream):
    other = device.stream()
    calls = []

    def maybe_fail():
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("first launch fails")

    g = gg.Graph(device)
    g.add_host(maybe_fail)
    with g.instantiate() as exe:
        exe.launch(stream)
        other.synchronize()  # not that stream: nothing raised
        with pytest.raises(KeyError, match="first launch fails"):
            stream.synchronize()
        exe.launch(stream)
        stream.synchronize()
    assert len(calls) == 2


def test_launch_on_a_stream_of_a_graph_device(device, stream):
    exe = gg.Graph(device).instantiate()
    assert exe.graph.device is device
    exe.launch(stream)
    stream.synchronize()
    exe.close()


def test_launch_after_the_previous_launch_stream_is_gone(device):
    """A launch is ordered behind the previous launch of the exec even when that stream was dropped."""
    import gc
    gate = threading.Event()
    x = device.zeros(4, np.float32)
    g = gg.Graph(device)
    g.add_memset(x, 1.0, after=g.add_host(gate.wait, 10))
    with g.instantiate() as exe:
        first = device.stream()
        exe.launch(first)
        del first
        gc.collect()
        second = device.stream()
        gate.set()
        exe.launch(second)
        second.synchronize()  # returns: the launch waits on the previous one, not on the dropped stream
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))

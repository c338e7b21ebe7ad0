"""Lifetimes: what a graph keeps alive, and for how long, on every backend."""

from __future__ import annotations

import _thread
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import gpugraph as gg


class Token:
    """An argument whose collection the tests watch."""


def _waiting_releases(device: gg.Device) -> int:
    """How many releases of collected objects the backend still holds back (CUDA defers some: see
    CudaRuntime._release); 0 for a backend that never defers."""
    return len(getattr(device._backend, "_deferred", ()))


def _collected(ref: weakref.ref, device: gg.Device, seconds: float = 5.0) -> bool:
    """Whether ``ref`` dies within ``seconds`` (a backend may release asynchronously, after the GPU is done)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        gc.collect()
        device.synchronize()
        if ref() is None:
            return True
        time.sleep(0.05)
    return False


def test_host_node_arguments_live_as_long_as_the_graph_and_its_execs(device):
    token, seen = Token(), []
    ref = weakref.ref(token)
    g = gg.Graph(device)
    g.add_host(lambda t: seen.append(type(t).__name__), token)
    exe = g.instantiate()
    del token, g
    gc.collect()
    stream = device.stream()
    exe.launch(stream)  # the exec still holds the host node's callable and arguments
    stream.synchronize()
    assert seen == ["Token"]
    exe.close()
    del exe
    assert _collected(ref, device)


def test_captured_host_function_arguments_are_released_with_the_graph(device):
    token, seen = Token(), []
    ref = weakref.ref(token)
    stream = device.stream()
    with stream.capture() as cap:
        stream.host(lambda t: seen.append(1), token)
    del token
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.synchronize()
    assert seen == [1, 1]
    del exe, cap
    assert _collected(ref, device)


def test_a_launch_in_flight_keeps_its_host_node(device):
    """Closing an exec right after launching it must not drop the host node the launch will still run."""
    seen = []
    x = device.zeros(1 << 16, np.float32)
    g = gg.Graph(device)
    work = g.add_memset(x, 1.0)
    g.add_host(seen.append, "ran", after=work)
    stream = device.stream()
    exe = g.instantiate()
    exe.launch(stream)
    exe.close()
    del exe, g
    gc.collect()
    stream.synchronize()
    assert seen == ["ran"]


def test_pinned_memory_that_only_a_host_node_held_is_freed_with_the_graph(device, monkeypatch):
    """On CUDA the graph's last reference goes on a driver thread (its destructor), where CUDA refuses CUDA
    calls: the pinned memory's release must wait for a thread that may free it, not fail there."""
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    pinned, seen = device.pinned(256, np.float32), []
    pinned[:] = 2.0
    ref = weakref.ref(pinned)
    g = gg.Graph(device)
    g.add_host(lambda a: seen.append(float(a.sum())), pinned)
    stream = device.stream()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert seen == [512.0]
    del pinned, g
    exe.close()
    del exe
    assert _collected(ref, device)
    device.synchronize()  # runs the releases that waited
    assert [str(u.exc_value) for u in unraisable] == []
    assert _waiting_releases(device) == 0


def test_pinned_memory_that_only_a_host_function_held_is_freed_after_it_runs(device, monkeypatch):
    """The host function's arguments go on the thread that ran it (on CUDA, the driver's, which refuses CUDA
    calls): the pinned memory's release must wait for a thread that may free it, not fail there."""
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    pinned, seen, go = device.pinned(256, np.float32), [], threading.Event()
    pinned[:] = 2.0
    ref = weakref.ref(pinned)
    stream = device.stream()
    stream.host(go.wait, 10.0)  # holds the stream until this thread has let go of the array
    stream.host(lambda a: seen.append(float(a.sum())), pinned)
    del pinned
    go.set()
    stream.synchronize()
    assert seen == [512.0]
    assert _collected(ref, device)
    device.synchronize()  # runs the releases that waited
    assert [str(u.exc_value) for u in unraisable] == []
    assert _waiting_releases(device) == 0


def test_memory_dropped_on_a_thread_python_did_not_start_is_freed_at_the_next_synchronize(device, monkeypatch):
    """On CUDA a release asked for on such a thread waits (it may be a driver thread); it must not wait for
    ever: the next synchronize, on any thread, runs it."""
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    held = [device.zeros(1 << 10, np.float32)]
    ref = weakref.ref(held[0])
    done = threading.Event()

    def drop() -> None:
        held.clear()
        done.set()

    _thread.start_new_thread(drop, ())
    assert done.wait(10.0)
    assert ref() is None
    device.synchronize()
    assert _waiting_releases(device) == 0
    assert [str(u.exc_value) for u in unraisable] == []


class _Cycle:
    """Garbage only the cyclic collector frees."""


def test_a_collection_on_a_thread_that_queued_work_waits_for_does_not_wait_for_that_work(device):
    """cuMemFree waits for the device's queued work. A garbage collection runs on whatever thread allocates, so
    memory it frees waits for the next synchronize: freed there, the collection below would wait for the host
    function, which waits for the collecting thread (until the gate's timeout)."""
    stream = device.stream()
    gate, opened = threading.Event(), []
    garbage = _Cycle()
    garbage.cycle, garbage.array, garbage.pinned = garbage, device.zeros(1 << 16, np.float32), device.pinned(8, np.int8)
    stream.host(lambda: opened.append(gate.wait(10)))
    del garbage

    def collect_then_open() -> None:
        try:
            gc.collect()
        finally:
            gate.set()

    collector = threading.Thread(target=collect_then_open)
    collector.start()
    collector.join(20)
    stream.synchronize()
    assert opened == [True]
    device.synchronize()
    assert _waiting_releases(device) == 0  # the frees that waited ran at the synchronize


@pytest.mark.gpu
def test_a_collection_mark_left_on_is_taken_off_at_the_next_synchronize(gpu_device):
    """A Ctrl-C raised in the collector's hook (which Python then ignores) can leave the mark on: the program's next
    synchronize takes it off and runs the frees that waited, so none waits for ever."""
    from gpugraph.backends.cuda import _runtime
    _runtime._COLLECTING.active = True
    try:
        held = [gpu_device.zeros(1 << 10, np.float32)]
        held.clear()  # freed while marked: it waits
        assert _waiting_releases(gpu_device) >= 1
        gpu_device.synchronize()
        assert not _runtime._COLLECTING.active and _waiting_releases(gpu_device) == 0
    finally:
        _runtime._COLLECTING.active = False

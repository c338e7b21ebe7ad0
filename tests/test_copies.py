"""Copies in graphs and captures: the rules every backend shares with CUDA.

* Graph and captured copies take ordinary NumPy memory, page-locked while a graph refers to it
  (tests/test_host_memory.py), and memory page-locked already (``Device.pinned``, views of it, another library's)
  as it is.
* A copy node of 0 bytes and a memset node of 0 elements are refused (CUDA: invalid value); a captured
  copy or memset of nothing records no node, as CUDA records none.
* A copy between different dtypes is refused unless ``nbytes`` asks for a byte copy.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 8


# Host memory


def test_views_of_pinned_memory_are_used_as_they_are(device, stream):
    host = device.pinned((4, N), np.float32)
    host[...] = np.arange(4 * N).reshape(4, N)
    x = device.zeros(N // 2, np.float32)
    g = gg.Graph(device)
    g.add_memcpy(x, host[2, 2:2 + N // 2])  # a slice inside a pinned buffer: nothing to register
    assert device._backend.host_registry.registrations() == []
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), host[2, 2:2 + N // 2])


def test_pinned_buffers_collected_during_a_check_do_not_deadlock():
    """A pinned buffer's finalizer may run inside the registry's own check (a garbage collection there):
    it must not wait for the lock that check holds."""
    import gc

    from gpugraph.backends.cpu import _memory
    registry = _memory.PinnedRegistry()

    class Cycle:  # freed only by the collector, whose pass the check below triggers
        pass

    buffer = np.zeros(16, np.uint8)
    registry.add(buffer)
    start = buffer.__array_interface__["data"][0]
    cycle = Cycle()
    cycle.me, cycle.buffer = cycle, buffer
    del buffer, cycle
    gc.disable()
    try:
        with registry._lock:  # the collector runs the finalizer while the lock is held, as inside holds()
            gc.collect()
        assert not registry.holds(start, 16)
    finally:
        gc.enable()


def test_host_pins_collected_inside_a_registry_call_are_counted_after_it(device):
    """A copy's record may be collected while the host registry is in a call of its own (a garbage collection there):
    its uses are counted off when the call is done, never by waiting for the lock the call holds."""
    import gc

    registry = device._backend.host_registry

    class Cycle:  # freed only by the collector
        pass

    host = np.zeros(N, np.float32)
    g = gg.Graph(device)
    g.add_memcpy(device.zeros(N, np.float32), host)
    cycle = Cycle()
    cycle.me, cycle.graph = cycle, g
    del g, cycle
    gc.disable()
    try:
        with registry._lock:
            gc.collect()
            gc.collect()
        assert registry.registrations() == []
    finally:
        gc.enable()


@pytest.mark.gpu
def test_memory_pinned_by_another_library_is_used_as_it_is(gpu_device):
    """On CUDA the driver knows page-locked memory that gpugraph did not allocate (here CuPy's)."""
    cupyx = pytest.importorskip("cupyx")
    host = cupyx.empty_pinned(N, np.float32)
    host[:] = np.arange(N)
    x = gpu_device.zeros(N, np.float32)
    g = gg.Graph(gpu_device)
    g.add_memcpy(x, host)
    assert gpu_device._backend.host_registry.registrations() == []
    stream = gpu_device.stream()
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(N))


# Zero-byte copies and empty memsets


def test_zero_byte_copy_and_memset_nodes_are_refused(device):
    x, y = device.zeros(N, np.float32), device.zeros(N, np.float32)
    empty = device.zeros(0, np.float32)
    g = gg.Graph(device)
    copy_rule = r"a copy node must copy at least one byte, got 0 bytes \(CUDA refuses a 0-byte copy node\)"
    memset_rule = r"a memset node must set at least one element, got 0 \(CUDA refuses a memset node of width 0\)"
    with pytest.raises(ValueError, match=rf"^add_memcpy: {copy_rule}$"):
        g.add_memcpy(y, x, nbytes=0)
    with pytest.raises(ValueError, match=rf"^add_memcpy: {copy_rule}$"):
        g.add_memcpy(empty, device.zeros(0, np.float32))
    with pytest.raises(ValueError, match=rf"^add_memset: {memset_rule}$"):
        g.add_memset(x, 1.0, count=0)
    with pytest.raises(ValueError, match=rf"^add_memset: {memset_rule}$"):
        g.add_memset(empty, 1.0)
    assert len(g) == 0
    copy = g.add_memcpy(y, x)
    fill = g.add_memset(x, 1.0)
    with g.instantiate() as exe:
        with pytest.raises(ValueError, match=rf"^set_memcpy: {copy_rule}$"):
            exe.set_memcpy(copy, y, x, 0)
        with pytest.raises(ValueError, match=rf"^set_memset: {memset_rule}$"):
            exe.set_memset(fill, x, 2.0, count=0)
    stream = device.stream()
    with stream.capture() as cap:
        with pytest.raises(ValueError, match=rf"^add_memcpy: {copy_rule}$"):
            cap.add_memcpy(y, x, nbytes=0)
        with pytest.raises(ValueError, match=rf"^add_memset: {memset_rule}$"):
            cap.add_memset(x, 1.0, count=0)
    assert len(cap.graph) == 0


def test_captured_zero_byte_copies_and_memsets_record_no_node(device, stream):
    x = K.f32(device, np.arange(N))
    y = device.zeros(N, np.float32)
    host = device.pinned(N, np.float32)
    empty = device.zeros(0, np.float32)
    with stream.capture() as cap:
        stream.memcpy(y, x, nbytes=0)
        stream.memcpy(np.zeros(0, np.float32), empty)  # nothing to copy: not even pinned memory needed
        stream.memset(y, 1.0, count=0)
        stream.memset(empty, 1.0)
        stream.memcpy(y, x)
        stream.memcpy(host, y)
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.MEMCPY, gg.NodeKind.MEMCPY]
    assert len(cap.graph.edges) == 1
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(host, np.arange(N))


def test_uncaptured_zero_byte_copies_and_memsets_do_nothing(device, stream):
    x = K.f32(device, np.arange(N))
    stream.memcpy(x, np.full(N, 9.0, np.float32), nbytes=0)
    stream.memcpy(device.zeros(0, np.float32), np.zeros(0, np.float32))
    stream.memset(x, 1.0, count=0)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(N))


# Copies between dtypes


def test_copies_between_dtypes_need_nbytes(device, stream):
    floats = K.f32(device, [1.0, -2.0, 0.5, 0.0])
    ints = device.zeros(4, np.int32)
    host = device.pinned(4, np.uint32)
    rule = r"dst is int32 and src is float32; a copy between different dtypes would reinterpret the bytes"
    with pytest.raises(TypeError, match=rf"^memcpy: {rule}"):
        stream.memcpy(ints, floats)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=rf"^add_memcpy: {rule}"):
        g.add_memcpy(ints, floats)
    with pytest.raises(TypeError, match=r"^add_memcpy: dst is uint32 and src is int32"):
        g.add_memcpy(host, ints)
    copy = g.add_memcpy(ints, device.zeros(4, np.int32))
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=rf"^set_memcpy: {rule}"):
            exe.set_memcpy(copy, ints, floats)
        exe.set_memcpy(copy, ints, floats, nbytes=16)  # asked for: a byte copy
        K.launch_and_wait(exe, stream)
    expected = np.array([1.0, -2.0, 0.5, 0.0], np.float32).view(np.int32)
    np.testing.assert_array_equal(ints.to_numpy(), expected)
    with stream.capture() as cap:
        with pytest.raises(TypeError, match=r"^memcpy: dst is uint32 and src is int32"):
            stream.memcpy(host, ints)
        stream.memcpy(host, ints, nbytes=16)
    with cap.graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(host, expected.view(np.uint32))

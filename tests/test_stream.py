"""Streams and events: in-order asynchronous work, copies, memsets, host functions, stream-ordered memory,
cross-stream ordering with events, timing events, and how errors of host functions surface."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


def gated(stream, gate: threading.Event, log: list | None = None, tag: str = "gate"):
    """Block ``stream`` until ``gate`` is set (10 s at most), then log ``tag``."""
    def wait():
        gate.wait(10)
        if log is not None:
            log.append(tag)
    stream.host(wait)


def test_work_runs_in_order(device, stream):
    log = []
    for i in range(50):
        stream.host(log.append, i)
    stream.synchronize()
    assert log == list(range(50))


def test_kernels_copies_and_host_functions_interleave_in_order(device, stream):
    n = 16
    a = device.asarray(np.arange(n, dtype=np.float32))
    b = device.zeros(n, np.float32)
    out = device.empty(n, np.float32)
    seen = []
    stream.memcpy(b, a)                                   # b = a
    stream.launch(K.scale, *K.launch_1d(n, 8), b, 2.0, n)  # b = 2a
    stream.launch(K.add, *K.launch_1d(n, 8), out, a, b, n)  # out = 3a
    host = np.zeros(n, np.float32)
    stream.memcpy(host, out)
    stream.host(lambda: seen.append(host.copy()))
    stream.launch(K.axpy, *K.launch_1d(n, 8), 0.5, a, out, n)  # out = 3.5a
    stream.synchronize()
    ref = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(seen[0], 3 * ref)
    np.testing.assert_array_equal(out.to_numpy(), 3.5 * ref)


def test_enqueue_returns_before_work_runs(device, stream):
    gate, log = threading.Event(), []
    try:
        gated(stream, gate, log)
        stream.host(log.append, "after")
        assert log == []
        assert not stream.done
    finally:
        gate.set()
    stream.synchronize()
    assert log == ["gate", "after"]
    assert stream.done


# Copies


def test_memcpy_every_direction(device, stream):
    src_host = np.arange(12, dtype=np.int32)
    d1 = device.empty(12, np.int32)
    d2 = device.zeros(12, np.int32)
    pinned = device.pinned(12, np.int32)
    pinned[:] = -1
    back = np.zeros(12, np.int32)
    host_copy = np.zeros(12, np.int32)
    stream.memcpy(d1, src_host)          # host -> device
    stream.memcpy(d2, d1)                # device -> device
    stream.memcpy(pinned, d2)            # device -> pinned host
    stream.memcpy(back, pinned)          # pinned host -> host
    stream.memcpy(host_copy, src_host)   # host -> host
    stream.synchronize()
    for result in (d1.to_numpy(), d2.to_numpy(), pinned, back, host_copy):
        np.testing.assert_array_equal(result, src_host)


def test_memcpy_from_pinned_to_device(device, stream):
    pinned = device.pinned((2, 3), np.float64)
    pinned[:] = [[1, 2, 3], [4, 5, 6]]
    d = device.empty((2, 3), np.float64)
    stream.memcpy(d, pinned)
    stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), pinned)


def test_memcpy_partial_nbytes(device, stream):
    d = device.zeros(8, np.int32)
    stream.memcpy(d, np.arange(1, 9, dtype=np.int32), nbytes=12)
    stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), [1, 2, 3, 0, 0, 0, 0, 0])


def test_memcpy_between_dtypes_copies_bytes_only_when_asked(device, stream):
    d = device.zeros(4, np.uint32)
    f = np.array([1.0, -2.0, 0.5, 0.0], np.float32)
    with pytest.raises(TypeError, match=r"memcpy: dst is uint32 and src is float32; .* pass nbytes="):
        stream.memcpy(d, f)
    stream.memcpy(d, f, nbytes=f.nbytes)
    stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), f.view(np.uint32))


@pytest.mark.parametrize("nbytes, match", [
    (None, "dst holds 16 bytes and src 12 bytes; the sizes must match or nbytes must be given"),
    (20, "nbytes=20 exceeds dst"),
    (-1, "nbytes must be a non-negative int, got -1"),
    (4.0, "nbytes must be a non-negative int"),
])
def test_memcpy_size_errors(device, stream, nbytes, match):
    with pytest.raises(ValueError, match=match):
        stream.memcpy(device.zeros(4, np.int32), np.zeros(3, np.int32), nbytes)


def test_memcpy_operand_errors(device, stream):
    d = device.zeros(4, np.int32)
    with pytest.raises(ValueError, match=r"memcpy\(src\): NumPy arrays must be C-contiguous"):
        stream.memcpy(d, np.zeros(8, np.int32)[::2])
    ro = np.zeros(4, np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"memcpy\(dst\): the NumPy array is read-only"):
        stream.memcpy(ro, d)
    with pytest.raises(TypeError, match=r"memcpy\(dst\): expected an Array or a NumPy array, got list"):
        stream.memcpy([0, 0], d)


# Memsets


@pytest.mark.parametrize("dtype, value", [
    (np.uint8, 7), (np.int8, -1), (np.bool_, True),                      # 1-byte patterns
    (np.uint16, 0x1234), (np.int16, -2), (np.float16, 1.5),              # 2-byte
    (np.int32, 123456), (np.uint32, 0xDEADBEEF), (np.float32, 2.5),      # 4-byte
    (np.float64, 0.0), (np.int64, -1), (np.int64, 0x0000000500000005),  # 8-byte values whose bytes repeat
    (np.uint64, 0x0101010101010101), (np.complex64, np.complex64(1 + 1j)),
])
def test_memset_patterns(device, stream, dtype, value):
    d = device.asarray(np.arange(6).astype(dtype))
    stream.memset(d, value)
    stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), np.full(6, value, dtype))


def test_memset_count_is_in_elements(device, stream):
    d = device.asarray(np.arange(8, dtype=np.float32))
    stream.memset(d, 9.0, count=3)
    stream.memset(d, 0, count=0)
    stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), [9, 9, 9, 3, 4, 5, 6, 7])


@pytest.mark.parametrize("dtype, value", [(np.float64, 2.0), (np.int64, 5), (np.complex128, 1.0)])
def test_memset_8_byte_non_repeating_value_raises(device, stream, dtype, value):
    d = device.zeros(4, dtype)
    with pytest.raises(ValueError,
                       match=r"memsets write 1-, 2- or 4-byte patterns; the .* value .* has no such pattern"):
        stream.memset(d, value)


@pytest.mark.parametrize("dtype, value, exc, match", [
    (np.uint8, 256, ValueError, "value 256 is not representable as uint8"),
    (np.int32, 1.5, ValueError, "value 1.5 is not representable as int32"),
    (np.int32, "1", TypeError, "value must be a scalar, got str"),
    (np.int32, [1], TypeError, "value must be a scalar, got list"),
    (np.int32, None, TypeError, "value must be a scalar"),
])
def test_memset_bad_value(device, stream, dtype, value, exc, match):
    with pytest.raises(exc, match=match):
        stream.memset(device.zeros(4, dtype), value)


@pytest.mark.parametrize("count", [-1, 5, 2.0, True])
def test_memset_bad_count(device, stream, count):
    with pytest.raises(ValueError, match=r"count must be an int in 0..4 \(elements of dst\)"):
        stream.memset(device.zeros(4, np.int32), 0, count)


def test_memset_needs_a_device_array(device, stream):
    with pytest.raises(TypeError, match=r"memset\(dst\): expected a device Array, got ndarray"):
        stream.memset(np.zeros(4, np.int32), 0)


# Host functions


def test_host_functions_run_in_order_with_args(device, stream):
    log = []
    stream.host(log.append, "a")
    stream.host(lambda x, y: log.append(x + y), 1, 2)
    stream.host(log.extend, ["b", "c"])
    stream.synchronize()
    assert log == ["a", 3, "b", "c"]


def test_host_rejects_non_callable(device, stream):
    with pytest.raises(TypeError, match=r"host\(fn\): expected a callable, got int"):
        stream.host(3)


def test_host_exception_surfaces_at_next_synchronize_of_that_stream(device, stream):
    other = device.stream()
    log = []

    def boom():
        raise RuntimeError("boom from host fn")

    stream.host(boom)
    stream.host(log.append, "after")
    other.host(log.append, "other")
    other.synchronize()  # another stream does not see the error
    with pytest.raises(RuntimeError, match="boom from host fn"):
        stream.synchronize()
    stream.synchronize()  # reported once
    # The stream stays usable.
    x = device.zeros(4, np.int32)
    stream.launch(K.fill, 1, 4, x, 3, 4)
    stream.host(log.append, "again")
    stream.synchronize()
    assert "after" in log and log[-1] == "again"
    np.testing.assert_array_equal(x.to_numpy(), [3, 3, 3, 3])


def test_synchronize_inside_host_function_raises(device, stream):
    caught = []

    def sync_self():
        try:
            stream.synchronize()
        except gg.GpuGraphError as exc:
            caught.append(exc)

    stream.host(sync_self)
    stream.synchronize()
    assert len(caught) == 1
    assert "synchronize" in str(caught[0]).lower()


def test_uncaught_synchronize_inside_host_function_surfaces_later(device, stream):
    stream.host(stream.synchronize)
    with pytest.raises(gg.GpuGraphError, match=r"(?i)synchronize"):
        stream.synchronize()


# Stream-ordered memory


def test_alloc_use_free_in_stream_order(device, stream):
    a = stream.alloc((2, 4), np.float32)
    assert (a.shape, a.dtype, a.nbytes) == ((2, 4), np.dtype(np.float32), 32)
    host = np.zeros((2, 4), np.float32)
    stream.memset(a, 1.5)
    stream.launch(K.scale, 1, 8, a, 2.0, 8)
    stream.memcpy(host, a)
    stream.free(a)
    stream.synchronize()
    np.testing.assert_array_equal(host, np.full((2, 4), 3.0, np.float32))


def test_alloc_on_one_stream_used_on_another_after_event(device, stream):
    other = device.stream()
    a = stream.alloc(4, np.int32)
    stream.memset(a, 4)
    other.wait(stream.record())
    host = np.zeros(4, np.int32)
    other.memcpy(host, a)
    other.free(a)
    other.synchronize()
    np.testing.assert_array_equal(host, [4, 4, 4, 4])


def test_double_free_raises_at_the_call(device, stream):
    a = stream.alloc(4, np.int32)
    stream.free(a)
    with pytest.raises(ValueError, match="double free"):
        stream.free(a)
    stream.synchronize()


def test_free_of_device_empty_memory_raises(device, stream):
    with pytest.raises(ValueError, match=r"free\(array\): .*Device.empty"):
        stream.free(device.empty(4, np.int32))
    with pytest.raises(TypeError, match=r"free\(array\): expected an Array, got ndarray"):
        stream.free(np.zeros(4))


def test_alloc_bad_shape_and_dtype(device, stream):
    with pytest.raises(ValueError, match="shape"):
        stream.alloc(-2, np.int32)
    with pytest.raises(TypeError, match="dtype"):
        stream.alloc(2, object)


# Events


def test_event_orders_work_across_streams(device):
    a, b = device.stream(), device.stream()
    gate, log = threading.Event(), []
    try:
        gated(a, gate, log, "a released")
        e = a.record()
        b.wait(e)
        b.host(lambda: log.append(("b saw gate", gate.is_set())))
        timer = threading.Timer(0.05, gate.set)
        timer.start()
        b.synchronize()
    finally:
        gate.set()
    a.synchronize()
    assert log == ["a released", ("b saw gate", True)]


@pytest.mark.overlap
def test_wait_uses_the_record_made_before_the_wait(device):
    a, b = device.stream(), device.stream()
    e = device.event()
    a.record(e)            # nothing before it: complete at once
    b.wait(e)
    gate = threading.Event()
    x = device.zeros(4, np.int32)
    try:
        gated(a, gate)
        a.record(e)        # a later record does not hold back the earlier wait
        b.launch(K.fill, 1, 4, x, 2, 4)
        b.synchronize()
        assert not e.done
    finally:
        gate.set()
    a.synchronize()
    assert e.done
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2, 2])


def test_wait_on_never_recorded_event_does_not_block(device, stream):
    log = []
    stream.wait(device.event())
    stream.host(log.append, 1)
    stream.synchronize()
    assert log == [1]


def test_event_done_and_synchronize(device, stream):
    e = device.event()
    assert e.done  # never recorded
    gate = threading.Event()
    try:
        gated(stream, gate)
        assert stream.record(e) is e
        assert not e.done
        assert not stream.done
    finally:
        gate.set()
    e.synchronize()
    assert e.done
    stream.synchronize()
    assert stream.done


def test_record_without_event_returns_new_event(device, stream):
    e = stream.record()
    assert isinstance(e, gg.Event) and e.device is device and not e.timing
    e.synchronize()
    assert e.done


def test_record_and_wait_type_errors(device, stream):
    with pytest.raises(TypeError, match=r"record\(event\): expected an Event or None, got int"):
        stream.record(3)
    with pytest.raises(TypeError, match=r"wait\(event\): expected an Event, got NoneType"):
        stream.wait(None)


def test_timing_events(device, stream):
    start, end = device.event(timing=True), device.event(timing=True)
    stream.record(start)
    x = device.zeros(64, np.float64)
    stream.launch(K.inc, 2, 32, x, 64)
    stream.record(end)
    end.synchronize()
    ms = start.elapsed_ms(end)
    assert isinstance(ms, float) and ms >= 0.0


@pytest.mark.overlap  # the gate's host function must run while this thread goes on (memcheck runs it at once)
def test_elapsed_ms_errors(device, stream):
    timed, untimed = device.event(timing=True), device.event()
    stream.record(timed)
    stream.record(untimed)
    stream.synchronize()
    with pytest.raises(ValueError, match="the end event was created with timing=False"):
        timed.elapsed_ms(untimed)
    with pytest.raises(ValueError, match="the start event was created with timing=False"):
        untimed.elapsed_ms(timed)
    with pytest.raises(TypeError, match=r"elapsed_ms\(end\): expected an Event, got float"):
        timed.elapsed_ms(1.0)
    pending = device.event(timing=True)
    gate = threading.Event()
    try:
        gated(stream, gate)
        stream.record(pending)
        with pytest.raises(ValueError, match="the end event has not completed; synchronize it first"):
            timed.elapsed_ms(pending)
    finally:
        gate.set()
    stream.synchronize()
    assert timed.elapsed_ms(pending) >= 0.0


def test_elapsed_ms_of_never_recorded_timing_events_raises(device):
    with pytest.raises(ValueError, match="recorded"):
        device.event(timing=True).elapsed_ms(device.event(timing=True))


def test_stream_priority_must_be_int(device):
    with pytest.raises(TypeError, match=r"^Device.stream\(priority\): expected an int, got float 1\.5$"):
        device.stream(priority=1.5)
    with pytest.raises(TypeError, match=r"^Device.stream\(priority\): expected an int, got bool True$"):
        device.stream(priority=True)
    s = device.stream(non_blocking=False, priority=-1)
    assert (s.non_blocking, s.priority, s.device) == (False, -1, device)
    assert device.stream(priority=np.int64(-1)).priority == -1 and type(s.priority) is int


def test_a_stream_priority_outside_the_devices_range_is_clamped_to_it(device):
    """As CUDA clamps it (cuStreamCreateWithPriority): the stream, the kernels captured on it and a kernel node
    given the same priority all have the clamped value."""
    least, greatest = device.priority_range
    assert device.stream(priority=least + 99).priority == least
    assert device.stream(priority=np.int32(greatest - 99)).priority == greatest
    stream = device.stream(priority=greatest - 99)
    x = device.zeros(8, np.int32)
    with stream.capture() as capture:
        stream.launch(K.fill, 1, 8, x, 1, 8)
    (node,) = capture.graph.nodes
    assert node.attributes.priority == greatest == stream.priority
    capture.graph.set_attributes(node, priority=least + 99)
    assert node.attributes.priority == least


def test_device_synchronize_waits_for_every_stream(device):
    streams = [device.stream() for _ in range(3)]
    arrays = [device.zeros(8, np.float64) for _ in streams]
    for s, x in zip(streams, arrays):
        for _ in range(3):
            s.launch(K.inc, 1, 8, x, 8)
    device.synchronize()
    assert all(s.done for s in streams)
    for x in arrays:
        np.testing.assert_array_equal(x.to_numpy(), np.full(8, 3.0))


def test_legacy_default_stream_waits_for_blocking_streams(device):
    """CUDA's implicit synchronization: work on stream 0 waits for earlier work of blocking streams, and
    blocking streams wait for stream 0; non-blocking streams are left alone."""
    order = []
    gate = threading.Event()
    blocking = device.stream(non_blocking=False)
    free = device.stream(non_blocking=True)
    legacy = device.default_stream
    blocking.host(lambda: (gate.wait(10), order.append("blocking")))
    free.host(lambda: (gate.wait(10), order.append("non-blocking")))
    legacy.host(order.append, "legacy")
    blocking.host(order.append, "blocking after legacy")
    gate.set()
    device.synchronize()
    assert order.index("blocking") < order.index("legacy") < order.index("blocking after legacy")

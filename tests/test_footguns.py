"""Surprising behaviours, pinned so that they change only on purpose.

1. ``Array.to_numpy()`` synchronizes the whole device, not one stream: it waits for work on unrelated
   streams, and it raises (and so consumes) a pending host-function error of any stream.
2. ``Graph.add_child(child)`` embeds a copy of ``child`` taken at that call; later edits to ``child``
   do not reach the parent (edit ``node.params.graph`` or add the child again).
3. Memsets write 1-, 2- or 4-byte patterns only: an 8-byte value works only when its bytes repeat
   (float64 0.0 or int64 -1 do, float64 2.0 does not) — fill with a kernel or a copy instead.
4. Memset ``count`` is in elements of ``dst``; memcpy ``nbytes`` is in bytes; memcpy copies raw bytes and
   never converts between dtypes.
5. A graph allocation's Array is usable only between its allocation and free nodes in graph/stream order.
   The CPU backend catches a use after the free node, at the next synchronize (not at the call that
   enqueued it); on a GPU that is undefined behaviour the pool may hide. Reading one before any launch
   raises at once.
6. A graph whose allocation is not freed cannot be launched again until the memory is freed (or the
   graph was instantiated with ``auto_free_on_launch=True``).
7. Graph memcpy nodes hold a reference to a host array, not its contents: the copy reads the array when
   the graph runs, so edits between building and launching are seen.
8. Scalar kernel arguments are converted to the C type the source declares: 0.1 for a ``float`` becomes
   float32(0.1), and a Python int that does not fit raises instead of wrapping.
9. A graph with allocation or free nodes allows one GraphExec at a time, cannot be cloned, nested as a
   child, or have edges removed.
10. ``Stream.record()`` with no argument makes an event without timing; ``elapsed_ms`` needs events made
    with ``device.event(timing=True)``. An event that was never recorded counts as done.
11. A host function must not synchronize its own stream (or the device): it raises instead of deadlocking.
12. ``Device(spec)`` returns one object per device: ``Device("cpu") is Device("cpu:0")``.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


def test_to_numpy_waits_for_unrelated_streams(device):
    busy, gate, log = device.stream(), threading.Event(), []
    busy.host(lambda: (gate.wait(10), log.append("unrelated stream finished")))
    a = device.asarray(np.arange(3, dtype=np.int32))
    timer = threading.Timer(0.05, gate.set)
    timer.start()
    try:
        out = a.to_numpy()
    finally:
        gate.set()
    assert log == ["unrelated stream finished"]
    np.testing.assert_array_equal(out, [0, 1, 2])


def test_to_numpy_raises_another_streams_host_error_once(device):
    failing = device.stream()
    failing.host(lambda: 1 / 0)
    a = device.zeros(2, np.int32)
    with pytest.raises(ZeroDivisionError):
        a.to_numpy()
    np.testing.assert_array_equal(a.to_numpy(), [0, 0])
    failing.synchronize()  # already reported


def test_add_child_copies_the_child(device, stream):
    child = gg.Graph(device)
    log = []
    child.add_host(log.append, 1)
    parent = gg.Graph(device)
    node = parent.add_child(child)
    child.add_host(log.append, "not in the parent")
    node.params.graph.add_host(log.append, 2)  # the embedded copy can be edited
    assert len(child) == 2 and len(node.params.graph) == 2
    with parent.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert sorted(log, key=str) == [1, 2]


def test_memset_writes_only_1_2_4_byte_patterns(device, stream):
    d = device.zeros(4, np.float64)
    with pytest.raises(ValueError, match="1-, 2- or 4-byte patterns"):
        stream.memset(d, 2.0)
    stream.memset(d, 0.0)
    i = device.zeros(4, np.int64)
    stream.memset(i, -1)
    with pytest.raises(ValueError, match="1-, 2- or 4-byte patterns"):
        stream.memset(i, 1)
    stream.synchronize()
    np.testing.assert_array_equal(i.to_numpy(), [-1] * 4)


def test_memset_count_elements_memcpy_nbytes_bytes(device, stream):
    d = device.zeros(8, np.int32)
    stream.memset(d, 1, count=2)                                 # 2 elements
    stream.memcpy(d, np.full(8, 5, np.int32), nbytes=2)          # 2 bytes: half of one element
    stream.synchronize()
    expected = np.zeros(8, np.int32)
    expected[:2] = 1
    expected.view(np.uint8)[:2] = np.full(8, 5, np.int32).view(np.uint8)[:2]
    np.testing.assert_array_equal(d.to_numpy(), expected)
    f = device.zeros(2, np.float32)
    with pytest.raises(TypeError, match="dst is float32 and src is int32; a copy between different dtypes"):
        stream.memcpy(f, np.array([1, 2], np.int32))             # no silent reinterpretation...
    stream.memcpy(f, np.array([1, 2], np.int32), nbytes=8)       # ...but asked for: raw bytes, no conversion
    stream.synchronize()
    assert f.to_numpy().tolist() != [1.0, 2.0]
    np.testing.assert_array_equal(f.to_numpy(), np.array([1, 2], np.int32).view(np.float32))


def test_graph_allocation_used_after_its_free_raises_at_synchronize(device, stream, backend):
    if backend != "cpu":
        pytest.skip("undefined behaviour on a GPU: the graph pool keeps freed memory mapped, so it goes unnoticed")
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    m = g.add_memset(alloc.array, 1.0, after=alloc)
    g.add_free(alloc, after=m)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.launch(K.scale, 1, 4, alloc.array, 2.0, 4)  # enqueued fine...
        with pytest.raises(gg.GpuGraphError):
            stream.synchronize()                             # ...reported here
        stream.synchronize()


def test_graph_allocation_read_before_launch_raises(device):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    g.add_free(alloc, after=alloc)
    with pytest.raises(gg.GpuGraphError, match="outside its allocation's lifetime"):
        alloc.array.to_numpy()


def test_unfreed_graph_allocation_blocks_relaunch(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    with g.instantiate() as exe:
        exe.launch(stream)
        with pytest.raises(gg.GraphError, match="has not been freed"):
            exe.launch(stream)
        stream.free(alloc.array)
        exe.launch(stream)
        stream.free(alloc.array)
        stream.synchronize()


def test_graph_memcpy_reads_host_array_at_launch(device, stream):
    host = device.pinned(3, np.int32)
    host[:] = 0
    d = device.zeros(3, np.int32)
    g = gg.Graph(device)
    g.add_memcpy(d, host)
    with g.instantiate() as exe:
        host[:] = 1
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(d.to_numpy(), [1, 1, 1])
        host[:] = 2
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(d.to_numpy(), [2, 2, 2])


def test_scalar_arguments_take_the_declared_c_type(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.float32)
    f = g.add_kernel(K.scale, 1, 4, x, 0.1, 4).params.args[1]
    assert type(f) is np.float32 and float(f) != 0.1
    with pytest.raises(ValueError, match="does not fit in int"):
        g.add_kernel(K.scale, 1, 4, x, 0.1, 2**32 + 4)


def test_memory_graphs_are_restricted(device):
    g = gg.Graph(device)
    a = g.add_empty()
    b = g.add_empty(after=a)
    g.add_alloc(4, np.int32)
    with pytest.raises(gg.GraphError, match="cannot be cloned"):
        g.clone()
    with pytest.raises(gg.GraphError, match="cannot be used as a child"):
        gg.Graph(device).add_child(g)
    with pytest.raises(gg.GraphError, match="cannot be removed"):
        g.remove_dependency(a, b)
    exe = g.instantiate()
    with pytest.raises(gg.GraphError, match="only one executable graph"):
        g.instantiate()
    exe.close()


def test_record_without_event_has_no_timing(device, stream):
    start = stream.record()
    end = stream.record()
    stream.synchronize()
    with pytest.raises(ValueError, match="timing=False"):
        start.elapsed_ms(end)
    assert device.event().done and device.event(timing=True).done


def test_host_function_must_not_synchronize_the_device(device, stream):
    caught = []

    def sync_device():
        try:
            device.synchronize()
        except gg.GpuGraphError as exc:
            caught.append(exc)

    stream.host(sync_device)
    stream.synchronize()
    assert len(caught) == 1


def test_device_is_one_object_per_device():
    assert gg.Device("cpu") is gg.Device("cpu:0") is gg.Device(" cpu ")

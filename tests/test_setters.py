"""Per-node setters of an executable graph (cudaGraphExec*NodeSetParams, cudaGraphNodeSetEnabled): the effect
of each, the errors for a wrong node kind, a foreign node, a memory-kind change and a closed exec, that a
setter changes that executable graph only, and that nodes of the graph of the latest update are accepted.

Every test runs on each available backend through the ``device``/``stream`` fixtures of conftest.py and
checks values against NumPy; only behaviour CUDA also has is asserted.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 8
GRID, BLOCK = K.launch_1d(N, 4)  # 2 blocks of 4 threads
KIND = gg.NodeKind
X0 = np.arange(1, N + 1, dtype=np.float32)


def scale_graph(device, x, factor=2.0):
    g = gg.Graph(device)
    node = g.add_kernel(K.scale, GRID, BLOCK, x, factor, N)
    return g, node


# Effects


def test_set_params_arguments(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        exe.set_params(node, y, 5.0, N)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 5)


def test_set_params_launch_shape_only_keeps_the_arguments(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        exe.set_params(node, grid=1, block=(4, 1, 1))  # the first 4 elements only
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), np.concatenate([X0[:4] * 2, X0[4:]]))
        exe.set_params(node, grid=(2,))  # back to 2 blocks, block (4, 1, 1) kept
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.concatenate([X0[:4] * 4, X0[4:] * 2]))


def test_set_params_kernel_of_the_same_signature(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        exe.set_params(node, x, 3.0, N, kernel=K.shift)
        K.launch_and_wait(exe, stream, times=2)
    np.testing.assert_array_equal(x.to_numpy(), X0 + 6)


def test_set_params_checks_arguments_against_the_signature(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=r"^Kernel\('scale'\) takes 3 arguments .*got 2$"):
            exe.set_params(node, x, 3.0)
        with pytest.raises(TypeError, match=r"^Kernel\('scale'\) argument 0 .*expects float32 data, got an "
                                            r"Array of int32$"):
            exe.set_params(node, device.zeros(N, np.int32), 3.0, N)
        with pytest.raises(TypeError, match=r"^set_params\(kernel\): expected a Kernel, got str$"):
            exe.set_params(node, x, 3.0, N, kernel="shift")
        with pytest.raises(ValueError, match=r"^block: dimension x must be in 1\.\.1024, got 0$"):
            exe.set_params(node, block=0)
        K.launch_and_wait(exe, stream)  # the refused calls changed nothing
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


@pytest.mark.parametrize("direction", ["device->device", "host->device", "device->host"])
def test_set_memcpy(device, stream, direction):
    def operand(kind, values):
        values = np.asarray(values, dtype=np.float32)
        return K.pinned(device, values) if kind == "host" else K.f32(device, values)

    def read(a):
        return a.copy() if isinstance(a, np.ndarray) else a.to_numpy()

    src_kind, dst_kind = direction.split("->")
    src1, src2 = operand(src_kind, X0), operand(src_kind, X0 * 10)
    dst1, dst2 = operand(dst_kind, np.zeros(N)), operand(dst_kind, np.full(N, -1.0))
    g = gg.Graph(device)
    node = g.add_memcpy(dst1, src1)
    with g.instantiate() as exe:
        exe.set_memcpy(node, dst2, src2, 3 * 4)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(read(dst1), np.zeros(N))
    np.testing.assert_array_equal(read(dst2), np.concatenate([X0[:3] * 10, np.full(5, -1.0)]))


def test_set_memset(device, stream):
    a1 = device.asarray(np.full(N, -1, np.int32))
    a2 = device.asarray(np.full(N, -1, np.int32))
    g = gg.Graph(device)
    node = g.add_memset(a1, 1)
    with g.instantiate() as exe:
        exe.set_memset(node, a1, 5, count=3)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(a1.to_numpy(), [5, 5, 5, -1, -1, -1, -1, -1])
        exe.set_memset(node, a2, 9)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(a1.to_numpy(), [5, 5, 5, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(a2.to_numpy(), np.full(N, 9))


def test_set_host(device, stream):
    calls: list = []
    g = gg.Graph(device)
    node = g.add_host(calls.append, "old")
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        exe.set_host(node, lambda *a: calls.append(("new", *a)), 1, 2)
        K.launch_and_wait(exe, stream)
        with pytest.raises(TypeError, match=r"^set_host\(fn\): expected a callable, got int$"):
            exe.set_host(node, 3)
        K.launch_and_wait(exe, stream)
    assert calls == ["old", ("new", 1, 2), ("new", 1, 2)]


def test_set_child_graph(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)

    def child(array, factor):
        c = gg.Graph(device)
        c.add_kernel(K.shift, GRID, BLOCK, array, 1.0, N, after=c.add_kernel(K.scale, GRID, BLOCK, array, factor, N))
        return c

    g = gg.Graph(device)
    node = g.add_child(child(x, 2.0))
    with g.instantiate() as exe:
        exe.set_child_graph(node, child(y, 3.0))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3 + 1)


@pytest.mark.parametrize("memory", ["host", "device"])
def test_set_child_graph_with_copies_and_memsets(device, stream, memory):
    """A child graph with copies and memsets takes another child with the same memory kinds."""

    def operand(values):
        values = np.asarray(values, dtype=np.float32)
        return K.pinned(device, values) if memory == "host" else K.f32(device, values)

    def read(a):
        return a.copy() if isinstance(a, np.ndarray) else a.to_numpy()

    def child(src, dst, scratch, ints, value):
        c = gg.Graph(device)
        c.add_memset(ints, value, after=c.add_memcpy(dst, scratch, after=c.add_memcpy(scratch, src)))
        return c

    src1, src2 = operand(X0), operand(X0 * 4)
    dst1, dst2 = operand(np.zeros(N)), operand(np.zeros(N))
    ints1, ints2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    scratch = device.zeros(N, np.float32)
    g = gg.Graph(device)
    node = g.add_child(child(src1, dst1, scratch, ints1, 1))
    with g.instantiate() as exe:
        exe.set_child_graph(node, child(src2, dst2, scratch, ints2, 2))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(read(dst1), np.zeros(N))
    np.testing.assert_array_equal(read(dst2), X0 * 4)
    np.testing.assert_array_equal(ints1.to_numpy(), np.zeros(N))
    np.testing.assert_array_equal(ints2.to_numpy(), np.full(N, 2))


def test_set_child_graph_with_another_topology_is_refused(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    first = gg.Graph(device)
    first.add_kernel(K.shift, GRID, BLOCK, x, 1.0, N, after=first.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N))
    other = gg.Graph(device)
    other.add_kernel(K.scale, GRID, BLOCK, y, 3.0, N)
    g = gg.Graph(device)
    node = g.add_child(first)
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=r"^update refused: topology changed \(the new graph has "
                                                      r"1 node, the executable graph 2\)$") as info:
            exe.set_child_graph(node, other)
        assert info.value.reason == "topology changed"
        with pytest.raises(TypeError, match=r"^set_child_graph\(graph\): expected a Graph, got Node$"):
            exe.set_child_graph(node, node)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 + 1)
    np.testing.assert_array_equal(y.to_numpy(), X0)


def test_set_event_on_a_record_node(device, stream):
    gate = threading.Event()
    e1, e2 = device.event(), device.event()
    g = gg.Graph(device)
    node = g.add_event_record(e1, after=g.add_host(gate.wait, 10))
    with g.instantiate() as exe:
        exe.set_event(node, e2)
        exe.launch(stream)
        try:
            assert not e2.done  # recorded by this launch, behind the closed gate
            assert e1.done      # never recorded
        finally:
            gate.set()
        stream.synchronize()
        with pytest.raises(TypeError, match=r"^set_event\(event\): expected an Event, got Stream$"):
            exe.set_event(node, stream)
    assert e2.done


@pytest.mark.overlap  # a second stream reads while the first is blocked
def test_set_event_on_a_wait_node(device, stream):
    """The wait node waits for the new event: a kernel after it runs only once that event's work is done."""
    gate = threading.Event()
    x = K.f32(device, X0)
    e1 = device.event()
    blocked, reader = device.stream(), device.stream()
    g = gg.Graph(device)
    wait = g.add_event_wait(e1)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N, after=wait)
    # Everything that may wait for the device comes before the host function blocks: on CUDA, loading the
    # kernel's module waits for it, and a pageable copy waits for the blocked host-function thread.
    host = device.pinned(N, np.float32)
    with g.instantiate() as exe:
        blocked.host(gate.wait, 10)
        e2 = blocked.record()
        exe.set_event(wait, e2)
        exe.launch(stream)
        try:
            reader.memcpy(host, x)
            reader.synchronize()
        finally:
            gate.set()
        np.testing.assert_array_equal(host, X0)  # the kernel was still waiting for e2
        stream.synchronize()
    blocked.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


# set_enabled


def test_set_enabled_kernel_node(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        assert exe.is_enabled(node)
        exe.set_enabled(node, False)
        assert not exe.is_enabled(node)
        K.launch_and_wait(exe, stream, times=2)
        np.testing.assert_array_equal(x.to_numpy(), X0)
        exe.set_enabled(node, True)
        assert exe.is_enabled(node)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_is_enabled_follows_set_enabled_per_executable_graph_and_through_an_update(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe1, g.instantiate() as exe2:
        exe1.set_enabled(node, False)
        assert (exe1.is_enabled(node), exe2.is_enabled(node)) == (False, True)
        other, _ = scale_graph(device, x)
        exe1.update(other)  # (an update keeps a node off, as CUDA's does)
        assert not exe1.is_enabled(other.nodes[0])
    with pytest.raises(gg.GraphError, match="this GraphExec is closed"):
        exe1.is_enabled(node)


def test_is_enabled_agrees_with_the_driver(device, stream):
    """The executable graph keeps is_enabled's answer itself; on CUDA it is checked against cuGraphNodeGetEnabled,
    through set_enabled and an update."""
    if device.backend != "cuda":
        pytest.skip("cuGraphNodeGetEnabled is CUDA's")
    from cuda.bindings import driver

    def driver_says(exe: gg.GraphExec) -> bool:
        err, enabled = driver.cuGraphNodeGetEnabled(exe._handle.handle, exe._handles[0])
        assert err == driver.CUresult.CUDA_SUCCESS, err
        return bool(enabled)

    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        assert exe.is_enabled(node) is driver_says(exe) is True
        exe.set_enabled(node, False)
        assert exe.is_enabled(node) is driver_says(exe) is False
        other, twin = scale_graph(device, x)
        exe.update(other)
        assert exe.is_enabled(twin) is driver_says(exe) is False
        exe.set_enabled(twin, True)
        assert exe.is_enabled(twin) is driver_says(exe) is True
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_set_enabled_memcpy_node(device, stream):
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    g = gg.Graph(device)
    k = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    copy = g.add_memcpy(y, x, after=k)
    with g.instantiate() as exe:
        exe.set_enabled(copy, False)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2)  # the rest of the graph still runs
        np.testing.assert_array_equal(y.to_numpy(), np.zeros(N))
        exe.set_enabled(copy, True)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 4)


def test_set_enabled_memset_node(device, stream):
    a = device.asarray(np.full(N, -1, np.int32))
    g = gg.Graph(device)
    node = g.add_memset(a, 4)
    with g.instantiate() as exe:
        exe.set_enabled(node, False)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(a.to_numpy(), np.full(N, -1))
        exe.set_enabled(node, True)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(a.to_numpy(), np.full(N, 4))


def test_params_set_on_a_disabled_node_apply_once_enabled(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        exe.set_enabled(node, False)
        exe.set_params(node, y, 3.0, N)
        K.launch_and_wait(exe, stream)  # still disabled
        np.testing.assert_array_equal(y.to_numpy(), X0)
        exe.set_enabled(node, True)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


def _untoggleable_nodes(device):
    g = gg.Graph(device)
    child = gg.Graph(device)
    child.add_empty()
    return g, {
        "host": g.add_host(lambda: None),
        "empty": g.add_empty(),
        "event_record": g.add_event_record(device.event()),
        "event_wait": g.add_event_wait(device.event()),
        "graph": g.add_child(child),
    }


@pytest.mark.parametrize("kind", ["host", "empty", "event_record", "event_wait", "graph"])
def test_set_enabled_is_refused_on_other_node_kinds(device, stream, kind):
    g, nodes = _untoggleable_nodes(device)
    node = nodes[kind]
    with g.instantiate() as exe:
        # the three kinds CUDA can toggle, in any order
        with pytest.raises(gg.GraphError, match=rf"^set_enabled\({re.escape(repr(node))}\): the node is a {kind} "
                                                rf"node, not a (kernel|memcpy|memset) or (kernel|memcpy|memset) "
                                                rf"or (kernel|memcpy|memset) node$"):
            exe.set_enabled(node, False)
        with pytest.raises(gg.GraphError, match=rf"^is_enabled\({re.escape(repr(node))}\): the node is a {kind} node"):
            exe.is_enabled(node)
        K.launch_and_wait(exe, stream)


# Wrong node kind, foreign nodes, memory kind, closed exec


def _one_of_each(device):
    x = K.f32(device, X0)
    child = gg.Graph(device)
    child.add_empty()
    g = gg.Graph(device)
    return g, x, {
        "kernel": g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N),
        "memcpy": g.add_memcpy(device.zeros(N, np.float32), x),
        "memset": g.add_memset(device.zeros(N, np.int32), 1),
        "host": g.add_host(lambda: None),
        "graph": g.add_child(child),
        "event_record": g.add_event_record(device.event()),
    }


def _setter_calls(device, x):
    """setter name -> (the node kinds it takes, a call of it on a node)."""
    other = gg.Graph(device)
    other.add_empty()
    return {
        "set_params": (("kernel",), lambda exe, node: exe.set_params(node, x, 3.0, N)),
        "set_memcpy": (("memcpy",), lambda exe, node: exe.set_memcpy(node, device.zeros(N, np.float32), x)),
        "set_memset": (("memset",), lambda exe, node: exe.set_memset(node, device.zeros(N, np.int32), 2)),
        "set_host": (("host",), lambda exe, node: exe.set_host(node, print)),
        "set_child_graph": (("graph",), lambda exe, node: exe.set_child_graph(node, other)),
        "set_event": (("event_record", "event_wait"), lambda exe, node: exe.set_event(node, device.event())),
    }


SETTERS = ["set_params", "set_memcpy", "set_memset", "set_host", "set_child_graph", "set_event"]
WRONG_KIND = {"set_params": "memset", "set_memcpy": "kernel", "set_memset": "memcpy", "set_host": "graph",
              "set_child_graph": "host", "set_event": "kernel"}


@pytest.mark.parametrize("setter", SETTERS)
def test_setter_on_a_node_of_another_kind(device, stream, setter):
    g, x, nodes = _one_of_each(device)
    kinds, call = _setter_calls(device, x)[setter]
    node = nodes[WRONG_KIND[setter]]
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphError, match=rf"^{setter}\({re.escape(repr(node))}\): the node is a "
                                                rf"{node.kind.value} node, not a {' or '.join(kinds)} node$"):
            call(exe, node)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)  # the kernel node was not changed


@pytest.mark.parametrize("setter", [*SETTERS, "set_enabled"])
def test_setter_on_a_node_of_another_graph(device, stream, setter):
    g, x, _nodes = _one_of_each(device)
    _other, _, other_nodes = _one_of_each(device)
    if setter == "set_enabled":
        node, call = other_nodes["kernel"], (lambda exe, node: exe.set_enabled(node, False))
    else:
        kinds, call = _setter_calls(device, x)[setter]
        node = other_nodes[kinds[0]]
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphError, match=rf"^{setter}: {re.escape(repr(node))} is not a node of the graph "
                                                rf"this executable graph was made from \(or last updated with\)$"):
            call(exe, node)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_is_enabled_on_a_node_of_another_graph(device, stream):
    # (The stranger is a kernel node at the same place, n0, as the executable graph's own, which is off: an answer
    # by place would be False, not a refusal.)
    g, x, nodes = _one_of_each(device)
    _other, _, other_nodes = _one_of_each(device)
    stranger = other_nodes["kernel"]
    with g.instantiate() as exe:
        exe.set_enabled(nodes["kernel"], False)
        with pytest.raises(gg.GraphError, match=rf"^is_enabled: {re.escape(repr(stranger))} is not a node of the graph "
                                                rf"this executable graph was made from \(or last updated with\)$"):
            exe.is_enabled(stranger)
        assert not exe.is_enabled(nodes["kernel"])  # (its own node answers as before)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)  # the kernel node stayed off


@pytest.mark.parametrize("setter", SETTERS)
def test_graph_setter_on_a_node_of_another_kind_or_graph(device, stream, setter):
    """The graph's own setters (cudaGraphKernelNodeSetParams and its kin) refuse what the executable graph's do."""
    g, x, nodes = _one_of_each(device)
    kinds, call = _setter_calls(device, x)[setter]
    node = nodes[WRONG_KIND[setter]]
    with pytest.raises(gg.GraphError, match=rf"^{setter}\({re.escape(repr(node))}\): the node is a "
                                            rf"{node.kind.value} node, not a {' or '.join(kinds)} node$"):
        call(g, node)
    _other, _, other_nodes = _one_of_each(device)
    stranger = other_nodes[kinds[0]]
    with pytest.raises(gg.GraphError, match=rf"^{setter}: {re.escape(repr(stranger))} belongs to another graph$"):
        call(g, stranger)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)  # the kernel node was not changed


def test_setter_on_a_node_of_a_clone(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    copy = g.clone()
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphError, match=r"is not a node of the graph this executable graph was made from"):
            exe.set_params(copy.find(node), x, 3.0, N)


@pytest.mark.parametrize("side", ["src", "dst"])
def test_set_memcpy_changing_memory_kind_is_refused(device, stream, side):
    x, y = K.f32(device, X0), device.zeros(N, np.float32)
    g = gg.Graph(device)
    node = g.add_memcpy(y, x)
    host = K.pinned(device, np.full(N, 7.0, np.float32))
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError,
                           match=rf"^update refused at {re.escape(repr(node))}: memory kind "
                                 rf"changed \({side} was device memory, got host memory\)$") as info:
            if side == "src":
                exe.set_memcpy(node, y, host)
            else:
                exe.set_memcpy(node, host, x)
        assert info.value.reason == "memory kind changed"
        assert info.value.node is node
        K.launch_and_wait(exe, stream)  # unchanged: still device -> device
    np.testing.assert_array_equal(y.to_numpy(), X0)
    np.testing.assert_array_equal(host, np.full(N, 7.0))


def test_set_memcpy_host_to_device_memory_kind_is_refused(device, stream):
    host, y = K.pinned(device, X0), device.zeros(N, np.float32)
    g = gg.Graph(device)
    node = g.add_memcpy(y, host)
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=r"memory kind changed \(src was host memory, got device "
                                                      r"memory\)$"):
            exe.set_memcpy(node, y, K.f32(device, X0 * 3))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(y.to_numpy(), X0)


@pytest.mark.parametrize("setter", [*SETTERS, "set_enabled"])
def test_setter_on_a_closed_exec(device, setter):
    g, x, nodes = _one_of_each(device)
    if setter == "set_enabled":
        node, call = nodes["kernel"], (lambda exe, node: exe.set_enabled(node, False))
    else:
        kinds, call = _setter_calls(device, x)[setter]
        node = nodes[kinds[0]]
    exe = g.instantiate()
    exe.close()
    with pytest.raises(gg.GraphError, match=rf"^{setter}: this GraphExec is closed$"):
        call(exe, node)


# Setters change that executable graph only


def test_setters_change_only_that_executable_graph(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)
    a = device.asarray(np.full(N, -1, np.int32))
    g = gg.Graph(device)
    k = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    m = g.add_memset(a, 1, after=k)
    exe1, exe2 = g.instantiate(), g.instantiate()
    with exe1, exe2:
        exe1.set_params(k, y, 3.0, N)
        exe1.set_memset(m, a, 5)
        K.launch_and_wait(exe2, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
        np.testing.assert_array_equal(y.to_numpy(), X0)
        np.testing.assert_array_equal(a.to_numpy(), np.full(N, 1))
        with g.instantiate() as exe3:  # the graph itself still has the old parameters
            assert g.nodes[0].params.args[0] is x
            K.launch_and_wait(exe3, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 4)
        np.testing.assert_array_equal(a.to_numpy(), np.full(N, 1))
        K.launch_and_wait(exe1, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 4)
        np.testing.assert_array_equal(y.to_numpy(), X0 * 3)
        np.testing.assert_array_equal(a.to_numpy(), np.full(N, 5))


def test_set_enabled_changes_only_that_executable_graph(device, stream):
    x = K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe1, g.instantiate() as exe2:
        exe1.set_enabled(node, False)
        K.launch_and_wait(exe1, stream)
        K.launch_and_wait(exe2, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_setter_does_not_touch_the_launch_already_enqueued(device, stream):
    gate = threading.Event()
    x, y = K.f32(device, X0), K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        stream.host(gate.wait, 10)
        exe.launch(stream)
        try:
            exe.set_params(node, y, 3.0, N)
            exe.launch(stream)
        finally:
            gate.set()
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


# Nodes after an update; a graph changed after instantiate


def test_nodes_of_the_latest_update_and_of_the_original_graph_are_accepted(device, stream):
    x, y, z = K.f32(device, X0), K.f32(device, X0), K.f32(device, X0)
    g1, n1 = scale_graph(device, x)
    g2, n2 = scale_graph(device, y, 3.0)
    with g1.instantiate() as exe:
        exe.update(g2)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(y.to_numpy(), X0 * 3)
        exe.set_params(n2, z, 5.0, N)  # a node of the graph of the latest update
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(z.to_numpy(), X0 * 5)
        exe.set_params(n1, z, 2.0, N)  # a node of the graph it was instantiated from
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(z.to_numpy(), X0 * 10)
        exe.set_enabled(n2, False)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)
    np.testing.assert_array_equal(z.to_numpy(), X0 * 10)


def test_nodes_of_an_earlier_update_are_not_accepted(device, stream):
    x, y, z = K.f32(device, X0), K.f32(device, X0), K.f32(device, X0)
    g1, n1 = scale_graph(device, x)
    g2, n2 = scale_graph(device, y, 3.0)
    g3, n3 = scale_graph(device, z, 5.0)
    with g1.instantiate() as exe:
        exe.update(g2)
        exe.update(g3)
        with pytest.raises(gg.GraphError, match=rf"^set_params: {re.escape(repr(n2))} is not a node of the graph "
                                                rf"this executable graph was made from \(or last updated with\)$"):
            exe.set_params(n2, y, 7.0, N)
        exe.set_params(n3, z, 2.0, N)  # the latest update's node
        K.launch_and_wait(exe, stream)
        exe.set_params(n1, z, 10.0, N)  # the original graph's node
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(y.to_numpy(), X0)
    np.testing.assert_array_equal(z.to_numpy(), X0 * 20)


def test_graph_changed_after_instantiate(device, stream):
    """The executable graph keeps the graph as it was instantiated (CUDA's rule): setters take its
    nodes, a node added later is not one of its nodes, and the added node does not run."""
    x, y = K.f32(device, X0), K.f32(device, X0)
    g, node = scale_graph(device, x)
    with g.instantiate() as exe:
        # (the added node scales y: once its edge is removed, the two nodes may run at the same time)
        added = g.add_kernel(K.scale, GRID, BLOCK, y, 3.0, N, after=node)
        with pytest.raises(gg.GraphError, match=rf"^set_params: {re.escape(repr(added))} is not a node of the "
                                                rf"graph this executable graph was made from"):
            exe.set_params(added, y, 5.0, N)
        exe.set_params(node, x, 5.0, N)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 5)
        np.testing.assert_array_equal(y.to_numpy(), X0)  # the added node did not run
        g.remove_dependency(node, added)
        exe.set_enabled(node, False)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), X0 * 5)
        np.testing.assert_array_equal(y.to_numpy(), X0)
        with pytest.raises(gg.GraphUpdateError, match=r"^update refused: topology changed \(the new graph has 2 "
                                                      r"nodes, the executable graph 1\)$"):
            exe.update(g)
    with g.instantiate() as again:  # the graph as it is now: both nodes
        K.launch_and_wait(again, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 5 * 2)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


def test_an_exec_changed_by_setters_is_not_launched_into_a_capture(device, stream):
    """The capture would embed the graph the exec was made from, without the setters' changes."""
    x = K.f32(device, X0)
    g = gg.Graph(device)
    node = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    with g.instantiate() as exe:
        with stream.capture():
            exe.launch(stream)  # unchanged: allowed
        exe.set_params(node, x, 5.0, N)
        with pytest.raises(gg.CaptureError, match="changed by setters"):
            with stream.capture():
                exe.launch(stream)
        exe.update(g)  # an update makes it the graph's instantiation again
        with stream.capture():
            exe.launch(stream)


def test_set_params_with_only_a_new_kernel_keeps_the_arguments(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    node = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    with g.instantiate() as exe:
        exe.set_params(node, kernel=K.shift)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 + 2.0)


def test_update_compares_with_the_graph_as_it_was_instantiated(device, stream):
    """An edge removed from the graph after instantiate does not change what the executable graph is
    compared with: the graph as it is now is refused, a graph shaped as it was is taken."""
    x = K.f32(device, X0)
    g = gg.Graph(device)
    a = g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    b = g.add_kernel(K.scale, GRID, BLOCK, x, 3.0, N, after=a)
    with g.instantiate() as exe:
        g.remove_dependency(a, b)  # g now has two roots
        with pytest.raises(gg.GraphUpdateError, match=rf"^update refused at {re.escape(repr(b))}: topology "
                                                      rf"changed \(it depends on nothing; the paired node "
                                                      rf"depends on {re.escape(repr(a))}\)$"):
            exe.update(g)
        chain = gg.Graph(device)
        chain.add_kernel(K.scale, GRID, BLOCK, x, 7.0, N, after=chain.add_kernel(K.scale, GRID, BLOCK, x, 5.0, N))
        exe.update(chain)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 35)

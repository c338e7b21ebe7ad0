"""Whole-graph update (GraphExec.update, cudaGraphExecUpdate): what an update may change, every reason it
is refused (with GraphUpdateError.reason and .node), that a refused update leaves the executable graph
running exactly as before, and the recapture-then-update strategy of NVIDIA's blog post "Constructing CUDA Graphs
with Dynamic Parameters".

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
from gpugraph.backends.cuda import _compiled

N = 8
GRID, BLOCK = K.launch_1d(N, 4)  # 2 blocks of 4 threads
KIND = gg.NodeKind
X0 = np.arange(1, N + 1, dtype=np.float32)


def refused(reason, node=None, detail=None):
    """The regex of GraphUpdateError's message for ``reason`` at ``node`` (None: the whole graph)."""
    where = f" at {node!r}" if node is not None else ""
    text = f"update refused{where}: {reason}"
    if detail is not None:
        text += f" ({detail})"
    return "^" + re.escape(text)


# Accepted updates: only parameters change


def test_update_kernel_arguments_and_launch_shape(device, stream):
    x1, x2 = K.f32(device, X0), K.f32(device, X0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x1, 2.0, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.scale, 1, 4, x2, 3.0, N)  # one block: only the first 4 elements
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x1.to_numpy(), X0 * 2)
        exe.update(g2)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x1.to_numpy(), X0 * 2)  # the old node's arguments are gone
        np.testing.assert_array_equal(x2.to_numpy(), np.concatenate([X0[:4] * 3, X0[4:]]))
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x2.to_numpy(), np.concatenate([X0[:4] * 9, X0[4:]]))


def test_update_kernel_function_of_the_same_signature(device, stream):
    x = K.f32(device, X0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.shift, GRID, BLOCK, x, 10.0, N)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        exe.update(g2)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 + 10)


@pytest.mark.parametrize("direction", ["device->device", "host->device", "device->host"])
def test_update_memcpy_between_other_arrays_of_the_same_memory_kinds(device, stream, direction):
    def operand(kind, values):
        values = np.asarray(values, dtype=np.float32)
        return K.pinned(device, values) if kind == "host" else K.f32(device, values)

    def read(a):
        return a.copy() if isinstance(a, np.ndarray) else a.to_numpy()

    src_kind, dst_kind = direction.split("->")
    src1, src2 = operand(src_kind, X0), operand(src_kind, X0 * 10)
    dst1, dst2 = operand(dst_kind, np.zeros(N)), operand(dst_kind, np.full(N, -1.0))
    g1 = gg.Graph(device)
    g1.add_memcpy(dst1, src1)
    g2 = gg.Graph(device)
    g2.add_memcpy(dst2, src2, nbytes=4 * 4)  # another size too: the first 4 floats
    with g1.instantiate() as exe:
        exe.update(g2)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(read(dst1), np.zeros(N))
    np.testing.assert_array_equal(read(dst2), np.concatenate([X0[:4] * 10, np.full(4, -1.0)]))


def test_update_memset_value_and_count(device, stream):
    a1 = device.asarray(np.full(N, -1, np.int32))
    a2 = device.asarray(np.full(N, -1, np.int32))
    g1 = gg.Graph(device)
    g1.add_memset(a1, 1)
    g2 = gg.Graph(device)
    g2.add_memset(a2, 7, count=5)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(a1.to_numpy(), np.ones(N))
        stream.memset(a1, 0)
        exe.update(g2)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(a1.to_numpy(), np.zeros(N))
    np.testing.assert_array_equal(a2.to_numpy(), [7, 7, 7, 7, 7, -1, -1, -1])


def test_update_host_function_and_arguments(device, stream):
    first: list = []
    second: list = []
    g1 = gg.Graph(device)
    g1.add_host(first.append, "a")
    g2 = gg.Graph(device)
    g2.add_host(lambda *args: second.append(args), "b", 2)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        exe.update(g2)
        K.launch_and_wait(exe, stream, times=2)
    assert first == ["a"]
    assert second == [("b", 2), ("b", 2)]


def test_update_event_record_node(device, stream):
    gate = threading.Event()
    e1, e2 = device.event(), device.event()

    def graph(event):
        g = gg.Graph(device)
        g.add_event_record(event, after=g.add_host(gate.wait, 10))
        return g

    with graph(e1).instantiate() as exe:
        exe.update(graph(e2))
        exe.launch(stream)
        try:
            assert not e2.done  # recorded by the launch, behind the closed gate
            assert e1.done      # never recorded: the update replaced it
        finally:
            gate.set()
        stream.synchronize()
    assert e2.done


def test_update_child_graph_parameters(device, stream):
    x, y = K.f32(device, X0), K.f32(device, X0)

    def outer(child_array, factor):
        child = gg.Graph(device)
        k = child.add_kernel(K.scale, GRID, BLOCK, child_array, factor, N)
        child.add_kernel(K.shift, GRID, BLOCK, child_array, 1.0, N, after=k)
        g = gg.Graph(device)
        g.add_child(child)
        return g

    with outer(x, 2.0).instantiate() as exe:
        K.launch_and_wait(exe, stream)
        exe.update(outer(y, 5.0))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 + 1)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 5 + 1)


def test_update_child_graphs_with_host_copies(device, stream):
    def outer(src, dst, scratch):
        child = gg.Graph(device)
        child.add_memcpy(dst, scratch, after=child.add_memcpy(scratch, src))
        g = gg.Graph(device)
        g.add_child(child)
        return g

    src1, src2 = K.pinned(device, X0), K.pinned(device, X0 * 4)
    dst1, dst2 = K.pinned(device, np.zeros(N, np.float32)), K.pinned(device, np.zeros(N, np.float32))
    scratch = device.zeros(N, np.float32)
    with outer(src1, dst1, scratch).instantiate() as exe:
        exe.update(outer(src2, dst2, scratch))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(dst1, np.zeros(N))
    np.testing.assert_array_equal(dst2, X0 * 4)


def test_update_every_node_kind_at_once_then_back(device, stream):
    """A graph of every updatable kind, updated to other parameters and back again."""
    log: list = []

    def build(x, ints, host, tag, factor):
        child = gg.Graph(device)
        child.add_kernel(K.shift, GRID, BLOCK, x, factor, N)
        g = gg.Graph(device)
        k = g.add_kernel(K.scale, GRID, BLOCK, x, factor, N)
        s = g.add_memset(ints, int(factor), after=k)
        c = g.add_child(child, after=s)
        m = g.add_memcpy(host, x, after=c)
        g.add_host(log.append, tag, after=m)
        return g

    x1, x2 = K.f32(device, X0), K.f32(device, X0)
    i1 = device.zeros(N, np.int32)
    i2 = device.zeros(N, np.int32)
    h1, h2 = K.pinned(device, np.zeros(N, np.float32)), K.pinned(device, np.zeros(N, np.float32))
    g1 = build(x1, i1, h1, "one", 2.0)
    with g1.instantiate() as exe:
        exe.update(build(x2, i2, h2, "two", 3.0))
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x1.to_numpy(), X0)
        np.testing.assert_array_equal(i1.to_numpy(), np.zeros(N))
        np.testing.assert_array_equal(h1, np.zeros(N))
        np.testing.assert_array_equal(x2.to_numpy(), X0 * 3 + 3)
        np.testing.assert_array_equal(i2.to_numpy(), np.full(N, 3))
        np.testing.assert_array_equal(h2, X0 * 3 + 3)
        exe.update(g1)  # and back to the graph it was instantiated from
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x1.to_numpy(), X0 * 2 + 2)
    np.testing.assert_array_equal(i1.to_numpy(), np.full(N, 2))
    np.testing.assert_array_equal(h1, X0 * 2 + 2)
    np.testing.assert_array_equal(x2.to_numpy(), X0 * 3 + 3)
    assert log == ["two", "one"]


def test_update_with_its_own_graph_changes_nothing(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    with g.instantiate() as exe:
        exe.update(g)
        K.launch_and_wait(exe, stream, times=2)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 4)


def test_update_does_not_touch_the_launch_already_enqueued(device, stream):
    """CUDA: changes to an executable graph apply to launches made after them."""
    gate = threading.Event()
    x1, x2 = K.f32(device, X0), K.f32(device, X0)
    g1 = gg.Graph(device)
    g1.add_kernel(K.scale, GRID, BLOCK, x1, 2.0, N)
    g2 = gg.Graph(device)
    g2.add_kernel(K.scale, GRID, BLOCK, x2, 3.0, N)
    with g1.instantiate() as exe:
        stream.host(gate.wait, 10)
        exe.launch(stream)  # waits behind the gate
        try:
            exe.update(g2)
            exe.launch(stream)
        finally:
            gate.set()
        stream.synchronize()
    np.testing.assert_array_equal(x1.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(x2.to_numpy(), X0 * 3)


# Refused updates: every reason, the node named, the executable graph unchanged


def _three_nodes(device, x, y, z, variant=None, a=2.0, b=3.0):
    """n0: x *= a;  n1: z *= b (independent);  n2: copy x -> y after n0. ``variant`` breaks one rule."""
    g = gg.Graph(device)
    n0 = g.add_kernel(K.scale, GRID, BLOCK, x, a, N)
    if variant == "node kind changed":
        n1 = g.add_memset(z, 0.0)
    else:
        n1 = g.add_kernel(K.scale, GRID, BLOCK, z, b, N, after=n0 if variant == "extra edge" else ())
    after = {"missing edge": (), "moved edge": n1}.get(variant, n0)
    if variant == "memory kind changed (src)":
        n2 = g.add_memcpy(y, K.pinned(device, np.ones(N, np.float32)), after=after)
    elif variant == "memory kind changed (dst)":
        n2 = g.add_memcpy(K.pinned(device, np.zeros(N, np.float32)), x, after=after)
    else:
        n2 = g.add_memcpy(y, x, after=after)
    if variant == "node count":
        g.add_empty(after=n2)
    return g, (n0, n1, n2)


# variant -> (reason, index of the offending node of the new graph or None, detail or None)
REFUSALS = {
    "node count": ("topology changed", None, "the new graph has 4 nodes, the executable graph 3"),
    "extra edge": ("topology changed", 1, None),
    "missing edge": ("topology changed", 2, None),
    "moved edge": ("topology changed", 2, None),
    "node kind changed": ("node kind changed", 1, "the paired node is a kernel node, got a memset node"),
    "memory kind changed (src)": ("memory kind changed", 2, "src was device memory, got host memory"),
    "memory kind changed (dst)": ("memory kind changed", 2, "dst was device memory, got host memory"),
}


@pytest.mark.parametrize("variant", list(REFUSALS))
def test_refused_update_names_rule_and_node_and_leaves_exec_as_it_was(device, stream, variant):
    reason, index, detail = REFUSALS[variant]
    x, y, z = K.f32(device, X0), device.zeros(N, np.float32), device.asarray(np.ones(N, np.float32))
    x2, y2, z2 = K.f32(device, X0), device.zeros(N, np.float32), device.asarray(np.ones(N, np.float32))
    g1, _ = _three_nodes(device, x, y, z)
    g2, nodes2 = _three_nodes(device, x2, y2, z2, variant, 5.0, 7.0)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        node = None if index is None else nodes2[index]
        with pytest.raises(gg.GraphUpdateError, match=refused(reason, node, detail)) as info:
            exe.update(g2)
        assert isinstance(info.value, gg.GraphError)
        assert info.value.reason == reason
        assert info.value.node is node
        if node is not None:
            assert info.value.node.graph is g2
        K.launch_and_wait(exe, stream)  # exactly as before the refused update
        assert not exe.closed
    np.testing.assert_array_equal(x.to_numpy(), X0 * 4)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 4)
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 9.0))
    np.testing.assert_array_equal(x2.to_numpy(), X0)  # the refused graph's arrays are untouched
    np.testing.assert_array_equal(y2.to_numpy(), np.zeros(N))
    np.testing.assert_array_equal(z2.to_numpy(), np.ones(N))


def test_refused_topology_message_names_both_dependencies(device):
    x, y, z = K.f32(device, X0), device.zeros(N, np.float32), K.f32(device, X0)
    g1, nodes1 = _three_nodes(device, x, y, z)
    g2, nodes2 = _three_nodes(device, x, y, z, "moved edge")
    with g1.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError) as info:
            exe.update(g2)
    message = str(info.value)
    assert f"it depends on {nodes2[1]!r}; the paired node depends on {nodes1[0]!r}" in message


def _graph_memory_graph(device, out, value):
    g = gg.Graph(device)
    alloc = g.add_alloc(N, np.int32)
    k = g.add_kernel(K.fill, GRID, BLOCK, alloc.array, value, N, after=alloc)
    c = g.add_memcpy(out, alloc.array, after=k)
    g.add_free(alloc, after=c)
    return g, alloc


def test_graph_with_allocation_nodes_cannot_be_updated(device, stream):
    out1, out2 = device.zeros(N, np.int32), device.zeros(N, np.int32)
    g1, _ = _graph_memory_graph(device, out1, 4)
    g2, alloc2 = _graph_memory_graph(device, out2, 9)
    with g1.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(out1.to_numpy(), np.full(N, 4))
        stream.memset(out1, 0)
        with pytest.raises(gg.GraphUpdateError, match=refused(
                "unsupported node kind", alloc2, "allocation and free nodes cannot be updated; "
                                                 "instantiate the new graph instead")) as info:
            exe.update(g2)
        assert info.value.reason == "unsupported node kind"
        assert info.value.node is alloc2
        assert info.value.node.kind is KIND.MEM_ALLOC
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(out1.to_numpy(), np.full(N, 4))
    np.testing.assert_array_equal(out2.to_numpy(), np.zeros(N))


def _two_kernel_child(device, x, variant=None):
    child = gg.Graph(device)
    k0 = child.add_memset(x, 0.0) if variant == "child node kind" else child.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    if variant == "child copy for kernel":
        child.add_memcpy(x, K.pinned(device, np.zeros(N, np.float32)), after=k0)
    elif variant != "child node count":
        child.add_kernel(K.shift, GRID, BLOCK, x, 1.0, N, after=() if variant == "child missing edge" else k0)
    return child


# variant -> (reason, kind of the offending node of the new child graph, or None for the whole child: the child-graph
# node is named)
CHILD_REFUSALS = {
    "child node count": ("topology changed", None),
    "child missing edge": ("topology changed", KIND.KERNEL),
    "child node kind": ("node kind changed", KIND.MEMSET),
    "child copy for kernel": ("node kind changed", KIND.MEMCPY),
}


@pytest.mark.parametrize("variant", list(CHILD_REFUSALS))
def test_child_graph_breaking_a_rule_refuses_the_update(device, stream, variant):
    reason, kind = CHILD_REFUSALS[variant]
    x, x2 = K.f32(device, X0), K.f32(device, X0)
    g1 = gg.Graph(device)
    g1.add_child(_two_kernel_child(device, x))
    g2 = gg.Graph(device)
    g2.add_child(_two_kernel_child(device, x2, variant))
    with g1.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=r"^update refused") as info:
            exe.update(g2)
        assert info.value.reason == reason
        if kind is None:
            assert info.value.node is g2.nodes[0]
            assert str(info.value) == (f"update refused at {g2.nodes[0]!r}: topology changed (its child graph has 1 "
                                       f"node, the executable graph's 2)")
        else:  # a node of the child graph inside the new graph, not a node of the new graph itself
            node = info.value.node
            assert node.graph is not g2 and node not in g2.nodes
            assert node.kind is kind
            assert f"update refused at {node!r}: {reason}" in str(info.value)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2 + 1)
    np.testing.assert_array_equal(x2.to_numpy(), X0)


def test_child_graph_memcpy_memory_kind_change_is_refused(device, stream):
    x, x2 = K.f32(device, X0), K.f32(device, X0)

    def outer(dst, src):
        child = gg.Graph(device)
        child.add_memcpy(dst, src)
        g = gg.Graph(device)
        g.add_child(child)
        return g

    y = device.zeros(N, np.float32)
    with outer(y, x).instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=r"memory kind changed \(src was device memory, "
                                                      r"got host memory\)") as info:
            exe.update(outer(y, K.pinned(device, np.ones(N, np.float32))))
        assert info.value.reason == "memory kind changed"
        assert info.value.node.kind is KIND.MEMCPY
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(y.to_numpy(), X0)
    np.testing.assert_array_equal(x2.to_numpy(), X0)


def test_refused_update_then_accepted_update(device, stream):
    x, y, z = K.f32(device, X0), device.zeros(N, np.float32), device.asarray(np.ones(N, np.float32))
    x2, y2, z2 = K.f32(device, X0), device.zeros(N, np.float32), device.asarray(np.ones(N, np.float32))
    g1, _ = _three_nodes(device, x, y, z)
    bad, _ = _three_nodes(device, x2, y2, z2, "missing edge", 5.0, 7.0)
    good, _ = _three_nodes(device, x2, y2, z2, None, 5.0, 7.0)
    with g1.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError):
            exe.update(bad)
        exe.update(good)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0)
    np.testing.assert_array_equal(x2.to_numpy(), X0 * 5)
    np.testing.assert_array_equal(y2.to_numpy(), X0 * 5)
    np.testing.assert_array_equal(z2.to_numpy(), np.full(N, 7.0))


# Wrong uses


def test_update_with_something_not_a_graph_raises_type_error(device):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=r"^update\(graph\): expected a Graph, got str$"):
            exe.update("graph")
        with pytest.raises(TypeError, match=r"^update\(graph\): expected a Graph, got GraphExec$"):
            exe.update(exe)


def test_update_on_a_closed_exec_raises_graph_error(device):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    exe = g.instantiate()
    exe.close()
    with pytest.raises(gg.GraphError, match=r"^update: this GraphExec is closed$"):
        exe.update(g)


@pytest.mark.gpu
def test_update_with_a_graph_of_another_device(gpu_device):
    cpu = gg.Device("cpu")
    stream = gpu_device.stream()
    x = K.f32(gpu_device, X0)
    g = gg.Graph(gpu_device)
    g.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)
    other = gg.Graph(cpu)
    other.add_kernel(K.scale, GRID, BLOCK, K.f32(cpu, X0), 3.0, N)
    with g.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=refused(
                "device changed", None, f"the graph is on {cpu}, this executable graph on {gpu_device}")) as info:
            exe.update(other)
        assert info.value.reason == "device changed"
        assert info.value.node is None
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


# Recapture then update (the first strategy of NVIDIA's post)


def _work(stream, x, y, a, extra=False):
    stream.launch(K.scale, GRID, BLOCK, x, a, N)
    stream.launch(K.add, GRID, BLOCK, y, x, y, N)
    if extra:
        stream.launch(K.shift, GRID, BLOCK, y, 1.0, N)


def _capture(stream, *args, **kwargs):
    with stream.capture() as cap:
        _work(stream, *args, **kwargs)
    return cap.graph


def test_recapture_with_other_arrays_then_update(device, stream):
    x1, y1 = K.f32(device, X0), device.asarray(np.ones(N, np.float32))
    x2, y2 = K.f32(device, X0), device.asarray(np.full(N, 10.0, np.float32))
    with _capture(stream, x1, y1, 2.0).instantiate() as exe:
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(y1.to_numpy(), X0 * 2 + 1)
        exe.update(_capture(stream, x2, y2, 3.0))  # same code, other arrays and scalar
        K.launch_and_wait(exe, stream, times=2)
    np.testing.assert_array_equal(x1.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y1.to_numpy(), X0 * 2 + 1)
    np.testing.assert_array_equal(x2.to_numpy(), X0 * 9)
    np.testing.assert_array_equal(y2.to_numpy(), 10 + X0 * 3 + X0 * 9)


def test_recapture_with_another_topology_is_refused(device, stream):
    x1, y1 = K.f32(device, X0), device.zeros(N, np.float32)
    x2, y2 = K.f32(device, X0), device.zeros(N, np.float32)
    with _capture(stream, x1, y1, 2.0).instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match=refused(
                "topology changed", None, "the new graph has 3 nodes, the executable graph 2")):
            exe.update(_capture(stream, x2, y2, 3.0, extra=True))
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(y1.to_numpy(), X0 * 2)
    np.testing.assert_array_equal(y2.to_numpy(), np.zeros(N))


def _captured_fork(device, stream, x, y, z, factor, variant=None):
    """n0: x *= factor; n1 (a side stream): y *= factor after n0; n2: z *= factor after n0. ``variant``:
    "missing edge" (n1 after nothing) or "extra edge" (n2 after n0 and n1)."""
    side, forked, joined = device.stream(), device.event(), device.event()
    with stream.capture() as cap:
        if variant == "missing edge":
            stream.record(forked)
            side.wait(forked)
        stream.launch(K.scale, GRID, BLOCK, x, factor, N)
        if variant != "missing edge":
            stream.record(forked)
            side.wait(forked)
        side.launch(K.scale, GRID, BLOCK, y, factor, N)
        side.record(joined)
        if variant == "extra edge":
            stream.wait(joined)
        stream.launch(K.scale, GRID, BLOCK, z, factor, N)
        stream.wait(joined)
    return cap.graph


@pytest.mark.parametrize("variant", ["missing edge", "extra edge"])
def test_a_recaptured_graph_is_compared_by_its_edges_before_they_are_read(device, stream, variant):
    """A recaptured graph's edges are compared with the executable graph's shape where they are (on CUDA,
    in the compiled lane, so an equal graph's edges are never read): an equal one updates, one with an edge
    missing or added is refused, naming its node, and the executable graph runs as before."""
    arrays = [K.f32(device, X0) for _ in range(6)]
    with _captured_fork(device, stream, *arrays[:3], 2.0).instantiate() as exe:
        same = _captured_fork(device, stream, *arrays[:3], 3.0)
        exe.update(same)
        if device.backend == "cuda" and _compiled.fast is not None:
            assert same._topology.unread is not None  # (compared, never read)
        K.launch_and_wait(exe, stream)
        other = _captured_fork(device, stream, *arrays[3:], 5.0, variant)
        if device.backend == "cuda" and _compiled.fast is not None:  # (the lane itself finds them unequal)
            backend = other._backend
            assert backend.graph_has_shape(other._handle, len(other._topology), exe._source_shape()[0]) is False
        index = 1 if variant == "missing edge" else 2
        with pytest.raises(gg.GraphUpdateError, match=refused("topology changed", other.nodes[index])):
            exe.update(other)
        K.launch_and_wait(exe, stream)
    for array in arrays[:3]:
        np.testing.assert_array_equal(array.to_numpy(), X0 * 9)
    for array in arrays[3:]:
        np.testing.assert_array_equal(array.to_numpy(), X0)


def test_update_compares_with_the_graph_as_it_was_when_instantiated(device, stream):
    """A node added to the source graph after instantiate (here an allocation, which an update refuses) is
    not the executable graph's: the update compares with the graph as it was."""
    x = K.f32(device, X0)
    source, new = gg.Graph(device), gg.Graph(device)
    source.add_kernel(K.scale, 1, N, x, 2.0, N)
    new.add_kernel(K.scale, 1, N, x, 3.0, N)
    with source.instantiate() as exe:
        source.add_alloc(4, np.float32)
        exe.update(new)
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)

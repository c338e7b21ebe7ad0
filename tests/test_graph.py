"""Explicit graphs: every node kind with its effect after launch, edges, queries, clone/find, child graphs
and DOT export; plus random DAGs run against a NumPy reference."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpugraph as gg
import kernels as K
from gpugraph import NodeKind


def run(graph, stream, times: int = 1):
    with graph.instantiate() as exe:
        for _ in range(times):
            exe.launch(stream)
        stream.synchronize()


def node_id(node) -> str:
    return re.match(r"Node\((n\d+),", repr(node)).group(1)


# Node kinds, one by one


def test_kernel_node(device, stream):
    g = gg.Graph(device)
    x = device.zeros(10, np.int32)
    n = g.add_kernel(K.fill, 2, 4, x, 7, 10)
    assert n.kind is NodeKind.KERNEL and n.graph is g
    p = n.params
    assert isinstance(p, gg.KernelParams)
    assert (p.kernel, p.grid, p.block, p.shared_mem) == (K.fill, (2, 1, 1), (4, 1, 1), 0)
    assert p.args[0] is x and p.args[1:] == (7, 10)
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(10))  # building runs nothing
    run(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), [7] * 8 + [0] * 2)


def test_kernel_node_arguments_are_fixed_at_add_time(device, stream):
    g = gg.Graph(device)
    x = device.asarray(np.ones(4, np.float32))
    f = 2.0
    g.add_kernel(K.scale, 1, 4, x, f, 4)
    f = 10.0  # rebinding the name changes nothing in the graph
    run(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2, 2])


def test_memcpy_nodes_every_direction(device, stream):
    g = gg.Graph(device)
    src = K.pinned(device, np.arange(6, dtype=np.float64))
    d1, d2 = device.empty(6, np.float64), device.empty(6, np.float64)
    out = device.pinned(6, np.float64)
    out[:] = 0
    part = K.pinned(device, np.zeros(6, np.float64))
    h2d = g.add_memcpy(d1, src)
    d2d = g.add_memcpy(d2, d1, after=h2d)
    d2h = g.add_memcpy(out, d2, after=d2d)
    g.add_memcpy(part, out, nbytes=16, after=d2h)
    p = h2d.params
    assert h2d.kind is NodeKind.MEMCPY and isinstance(p, gg.MemcpyParams)
    assert p.dst is d1 and p.src is src and p.nbytes == 48
    run(g, stream)
    np.testing.assert_array_equal(out, src)
    np.testing.assert_array_equal(part, [0, 1, 0, 0, 0, 0])


def test_memcpy_node_reads_host_memory_at_launch(device, stream):
    g = gg.Graph(device)
    src = K.pinned(device, np.zeros(3, np.int32))
    d = device.zeros(3, np.int32)
    g.add_memcpy(d, src)
    src[:] = [4, 5, 6]
    run(g, stream)
    np.testing.assert_array_equal(d.to_numpy(), [4, 5, 6])


@pytest.mark.parametrize("dtype, value, element_size", [(np.uint8, 3, 1), (np.float16, -1.0, 2),
                                                        (np.float32, 0.25, 4), (np.float64, 0.0, 1)])
def test_memset_node(device, stream, dtype, value, element_size):
    g = gg.Graph(device)
    d = device.asarray(np.arange(1, 9).astype(dtype))
    n = g.add_memset(d, value, count=5)
    p = n.params
    assert n.kind is NodeKind.MEMSET and isinstance(p, gg.MemsetParams)
    assert (p.dst, p.value, p.element_size) == (d, value, element_size)
    assert p.count * p.element_size == 5 * np.dtype(dtype).itemsize
    run(g, stream)
    expected = np.arange(1, 9).astype(dtype)
    expected[:5] = value
    np.testing.assert_array_equal(d.to_numpy(), expected)


def test_host_node(device, stream):
    g = gg.Graph(device)
    log = []
    n = g.add_host(log.append, "hello")
    assert n.kind is NodeKind.HOST
    assert n.params == gg.HostParams(log.append, ("hello",))
    run(g, stream, times=3)
    assert log == ["hello"] * 3


def test_empty_node_joins_branches(device, stream):
    g = gg.Graph(device)
    log = []
    a = g.add_host(log.append, "a")
    b = g.add_host(log.append, "b")
    join = g.add_empty(after=(a, b))
    g.add_host(log.append, "c", after=join)
    assert join.kind is NodeKind.EMPTY and join.params == gg.EmptyParams()
    assert set(join.dependencies) == {a, b}
    run(g, stream)
    assert sorted(log[:2]) == ["a", "b"] and log[2] == "c"


def test_child_graph_node(device, stream):
    child = gg.Graph(device)
    x = device.zeros(4, np.float64)
    k1 = child.add_kernel(K.inc, 1, 4, x, 4)
    child.add_kernel(K.inc, 1, 4, x, 4, after=k1)
    g = gg.Graph(device)
    log = []
    before = g.add_host(log.append, "before")
    node = g.add_child(child, after=before)
    g.add_host(log.append, "after", after=node)
    assert node.kind is NodeKind.GRAPH
    embedded = node.params.graph
    assert isinstance(embedded, gg.Graph) and len(embedded) == 2
    assert {n.kind for n in embedded.nodes} == {NodeKind.KERNEL}
    run(g, stream, times=2)
    np.testing.assert_array_equal(x.to_numpy(), [4, 4, 4, 4])
    assert log == ["before", "after"] * 2


def test_nested_child_graphs(device, stream):
    x = device.zeros(3, np.float64)
    inner = gg.Graph(device)
    inner.add_kernel(K.inc, 1, 3, x, 3)
    middle = gg.Graph(device)
    c1 = middle.add_child(inner)
    middle.add_child(inner, after=c1)
    outer = gg.Graph(device)
    o1 = outer.add_child(middle)
    outer.add_child(middle, after=o1)
    run(outer, stream)
    np.testing.assert_array_equal(x.to_numpy(), [4, 4, 4])


def test_add_child_copies_the_child_at_add_time(device, stream):
    child = gg.Graph(device)
    log = []
    child.add_host(log.append, "first")
    g = gg.Graph(device)
    node = g.add_child(child)
    child.add_host(log.append, "added later")
    assert len(node.params.graph) == 1
    run(g, stream)
    assert log == ["first"]


def test_event_record_nodes_record_timing_events(device, stream):
    start, end = device.event(timing=True), device.event(timing=True)
    g = gg.Graph(device)
    x = device.zeros(8, np.float64)
    r1 = g.add_event_record(start)
    k = g.add_kernel(K.inc, 1, 8, x, 8, after=r1)
    r2 = g.add_event_record(end, after=k)
    assert r1.kind is NodeKind.EVENT_RECORD and r1.params == gg.EventRecordParams(start)
    assert r2.params.event is end
    run(g, stream)
    assert start.done and end.done
    assert start.elapsed_ms(end) >= 0.0
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8))


def test_event_record_node_then_stream_wait(device, stream):
    event = device.event()
    g = gg.Graph(device)
    log = []
    h = g.add_host(log.append, "graph host")
    g.add_event_record(event, after=h)
    other = device.stream()
    run(g, stream)
    assert event.done
    other.wait(event)
    other.host(log.append, "other")
    other.synchronize()
    assert log == ["graph host", "other"]


def test_event_wait_node_waits_for_another_stream(device, stream):
    event = device.event()
    other = device.stream()
    gate, order = threading.Event(), []

    def held_by_the_gate():
        order.append("gate waited for")
        order.append("gate opened" if gate.wait(10) else "gate timed out")

    g = gg.Graph(device)
    w = g.add_event_wait(event)
    g.add_host(lambda: order.append(f"host node (gate {'open' if gate.is_set() else 'shut'})"), after=w)
    assert w.kind is NodeKind.EVENT_WAIT and w.params == gg.EventWaitParams(event)
    try:
        other.host(held_by_the_gate)
        other.record(event)
        threading.Timer(0.05, gate.set).start()
        run(g, stream)
    finally:
        gate.set()
    other.synchronize()
    # (Each step is named, so that a failure says which came first.)
    assert order == ["gate waited for", "gate opened", "host node (gate open)"]


def test_alloc_and_free_nodes(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc((2, 3), np.int32)
    arr = alloc.array
    assert alloc.kind is NodeKind.MEM_ALLOC
    assert type(arr) is gg.Array and arr.shape == (2, 3) and arr.dtype == np.int32 and arr.device is device
    assert alloc.params == gg.AllocParams(24, arr.ptr, device.index)
    host = K.pinned(device, np.zeros((2, 3), np.int32))
    fill = g.add_kernel(K.fill, 1, 8, arr, 9, 6, after=alloc)
    copy = g.add_memcpy(host, arr, after=fill)
    free = g.add_free(alloc, after=copy)
    assert free.kind is NodeKind.MEM_FREE and free.params == gg.FreeParams(arr.ptr)
    run(g, stream, times=2)
    np.testing.assert_array_equal(host, np.full((2, 3), 9))


def test_an_allocation_node_names_only_other_devices_in_its_access(device):
    g = gg.Graph(device)
    with pytest.raises(ValueError, match=rf"add_alloc\(access=\): {device} is the allocation's own device, which "
                                         r"always has access"):
        g.add_alloc(4, np.float32, access=device)
    with pytest.raises(TypeError, match=r"add_alloc\(access=\): expected a Device or an iterable of Devices"):
        g.add_alloc(4, np.float32, access=0)
    assert len(g) == 0
    assert g.add_alloc(4, np.float32, access=()).params.access == ()


def test_free_node_by_array(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    m = g.add_memset(alloc.array, 1.0, after=alloc)
    free = g.add_free(alloc.array, after=m)
    assert free.params.ptr == alloc.array.ptr
    run(g, stream)


def test_graph_allocation_freed_by_another_graph(device, stream):
    g1 = gg.Graph(device)
    alloc = g1.add_alloc(4, np.int32)
    g1.add_memset(alloc.array, 5, after=alloc)
    g2 = gg.Graph(device)
    host = K.pinned(device, np.zeros(4, np.int32))
    c = g2.add_memcpy(host, alloc.array)
    g2.add_free(alloc.array, after=c)
    with g1.instantiate() as e1, g2.instantiate() as e2:
        e1.launch(stream)
        e2.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(host, [5, 5, 5, 5])


def test_graph_allocation_freed_on_a_stream_after_launch(device, stream):
    g = gg.Graph(device)
    alloc = g.add_alloc(3, np.float32)
    g.add_memset(alloc.array, 2.0, after=alloc)
    host = np.zeros(3, np.float32)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.memcpy(host, alloc.array)
        stream.free(alloc.array)
        exe.launch(stream)  # freed, so it may run again
        stream.free(alloc.array)
        stream.synchronize()
    np.testing.assert_array_equal(host, [2, 2, 2])


def test_empty_graph_launches(device, stream):
    g = gg.Graph(device)
    assert len(g) == 0 and g.nodes == () and g.edges == () and g.roots == () and g.leaves == ()
    run(g, stream)


# Edges and queries


def test_dependencies_at_add_time_and_queries(device):
    g = gg.Graph(device)
    a = g.add_empty()
    b = g.add_empty(after=a)
    c = g.add_empty(after=[a])
    d = g.add_empty(after=(b, c))
    assert g.nodes == (a, b, c, d)
    assert len(g) == 4
    assert set(g.edges) == {(a, b), (a, c), (b, d), (c, d)}
    assert g.roots == (a,) and g.leaves == (d,)
    assert set(a.dependents) == {b, c} and a.dependencies == ()
    assert set(d.dependencies) == {b, c} and d.dependents == ()
    assert b.dependencies == (a,) and b.dependents == (d,)


def test_after_accepts_none_node_and_generators(device):
    g = gg.Graph(device)
    a = g.add_empty(after=None)
    b = g.add_empty(after=a)
    c = g.add_empty(after=(n for n in (a, b)))
    assert set(c.dependencies) == {a, b}


def test_add_and_remove_dependency(device, stream):
    g = gg.Graph(device)
    log = []
    a = g.add_host(log.append, "a")
    b = g.add_host(log.append, "b")
    assert g.edges == () and set(g.roots) == {a, b}
    g.add_dependency(b, a)
    assert g.edges == ((b, a),)
    assert g.roots == (b,) and g.leaves == (a,)
    run(g, stream)
    assert log == ["b", "a"]
    g.remove_dependency(b, a)
    assert g.edges == ()
    assert a.dependencies == () and b.dependents == ()
    g.add_dependency(a, b)
    log.clear()
    run(g, stream)
    assert log == ["a", "b"]


def test_node_objects_are_stable(device):
    g = gg.Graph(device)
    a = g.add_empty()
    b = g.add_empty(after=a)
    assert g.nodes[0] is a and b.dependencies[0] is a and g.edges[0][1] is b


def test_graph_device_checked(device):
    with pytest.raises(TypeError, match=r"Graph\(device\): expected a Device or None, got str"):
        gg.Graph("cpu")
    assert gg.Graph(device).device is device


# Clone and find


def test_clone_and_find(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.float64)
    a = g.add_kernel(K.inc, 1, 4, x, 4)
    b = g.add_kernel(K.inc, 1, 4, x, 4, after=a)
    c = g.add_empty(after=b)
    g.add_dependency(a, c)
    clone = g.clone()
    assert len(clone) == 3
    ca, cb, cc = clone.find(a), clone.find(b), clone.find(c)
    assert ca.graph is clone and ca is not a
    assert (ca.kind, cb.kind, cc.kind) == (a.kind, b.kind, c.kind)
    assert set(clone.edges) == {(ca, cb), (cb, cc), (ca, cc)}
    assert ca.params == a.params
    run(clone, stream)
    np.testing.assert_array_equal(x.to_numpy(), [2, 2, 2, 2])


def test_clone_is_independent_of_later_edits(device, stream):
    g = gg.Graph(device)
    log = []
    a = g.add_host(log.append, "a")
    b = g.add_host(log.append, "b", after=a)
    clone = g.clone()
    g.add_host(log.append, "new", after=b)
    g.remove_dependency(a, b)
    g.add_dependency(b, a)
    assert len(clone) == 2
    assert clone.edges == ((clone.find(a), clone.find(b)),)
    run(clone, stream)
    assert log == ["a", "b"]
    # and edits to the clone leave the original alone
    clone.add_empty()
    assert len(g) == 3


def test_clone_of_graph_with_child(device, stream):
    child = gg.Graph(device)
    x = device.zeros(2, np.float64)
    child.add_kernel(K.inc, 1, 2, x, 2)
    g = gg.Graph(device)
    g.add_child(child)
    clone = g.clone()
    run(clone, stream)
    run(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), [2, 2])


class LabelledGraph(gg.Graph):
    """A user's subclass whose __init__ sets what its methods read."""

    def __init__(self, device, label):
        super().__init__(device)
        self.label = label

    def __repr__(self):
        return f"LabelledGraph({self.label!r}, nodes={len(self)})"


def test_graphs_gpugraph_makes_of_a_subclass_are_plain_graphs(device, stream):
    x = device.zeros(2, np.float64)
    child = LabelledGraph(device, "child")
    child.add_kernel(K.inc, 1, 2, x, 2)
    g = LabelledGraph(device, "top")
    embedding = g.add_child(child)
    copy = g.clone()
    assert type(copy) is gg.Graph and repr(copy) == f"Graph(device={device}, nodes=1)"
    assert type(embedding.params.graph) is gg.Graph and type(copy.nodes[0].params.graph) is gg.Graph
    run(copy, stream)
    np.testing.assert_array_equal(x.to_numpy(), [1, 1])
    assert repr(g) == "LabelledGraph('top', nodes=1)"  # (the user's own graph stays the subclass)
    conditional = LabelledGraph(device, "conditional")
    bodies = conditional.add_if(conditional.condition(), has_else=True).bodies
    assert [type(body) for body in bodies] == [gg.Graph, gg.Graph]


# DOT


def test_to_dot_mentions_every_node_and_edge(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.float32)
    child = gg.Graph(device)
    child.add_empty()
    alloc = g.add_alloc(4, np.float32)
    k = g.add_kernel(K.scale, 1, 4, x, 2.0, 4)
    m = g.add_memcpy(alloc.array, x, after=(alloc, k))
    s = g.add_memset(x, 0.0, after=m)

    def my_host_fn():
        pass

    h = g.add_host(my_host_fn, after=s)
    e = g.add_empty(after=h)
    ch = g.add_child(child, after=e)
    ev = device.event()
    r = g.add_event_record(ev, after=ch)
    w = g.add_event_wait(ev, after=r)
    g.add_free(alloc, after=(m, w))
    dot = g.to_dot()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    for word in ("scale", "memcpy 16 B", "memset", "my_host_fn", "empty", "child graph (1 nodes)",
                 "event record", "event wait", "alloc 16 B", "free"):
        assert word in dot, word
    for node in g.nodes:
        assert re.search(rf"\b{node_id(node)} \[label=", dot), node
    edge_lines = [line for line in dot.splitlines() if "->" in line]
    assert len(edge_lines) == len(g.edges) == 10
    for a, b in g.edges:
        assert f"{node_id(a)} -> {node_id(b)};" in dot


# Random DAGs against a NumPy reference


@st.composite
def dags(draw):
    n = draw(st.integers(1, 9))
    edges = set()
    for j in range(1, n):
        for i in draw(st.sets(st.integers(0, j - 1), max_size=3)):
            edges.add((i, j))
    late = draw(st.sets(st.sampled_from(sorted(edges)), max_size=len(edges))) if edges else set()
    return n, sorted(edges), late


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dag=dags())
def test_random_dag_matches_topological_reference(device, dag):
    """Each node writes 1 + the sum of its first two predecessors' arrays (memset, memcpy or add kernel);
    host nodes log the order. Edges are added at add time or, for ``late`` ones, with add_dependency."""
    n, edges, late = dag
    preds = {j: [i for i, jj in edges if jj == j] for j in range(n)}
    size = 4
    arrays = [device.zeros(size, np.float32) for _ in range(n)]
    ones = device.asarray(np.ones(size, np.float32))
    g = gg.Graph(device)
    order: list[int] = []
    tails, heads = [], []
    for j in range(n):
        early = [tails[i] for i in preds[j] if (i, j) not in late]
        data = preds[j][:2]
        if not data:
            head = g.add_memset(arrays[j], float(j + 1), after=early)
            tail = head
        elif len(data) == 1:
            head = g.add_memcpy(arrays[j], arrays[data[0]], after=early)
            tail = g.add_kernel(K.add, 1, size, arrays[j], arrays[j], ones, size, after=head)
        else:
            head = g.add_kernel(K.add, 1, size, arrays[j], arrays[data[0]], arrays[data[1]], size, after=early)
            tail = g.add_kernel(K.add, 1, size, arrays[j], arrays[j], ones, size, after=head)
        tail = g.add_host(order.append, j, after=tail)
        heads.append(head)
        tails.append(tail)
    for i, j in sorted(late):
        g.add_dependency(tails[i], heads[j])
    ref = np.zeros(n, np.float32)
    for j in range(n):
        data = preds[j][:2]
        ref[j] = j + 1 if not data else 1 + sum(ref[i] for i in data)
    stream = device.stream()
    with g.instantiate() as exe:
        for _ in range(2):
            exe.launch(stream)
        stream.synchronize()
    for j in range(n):
        np.testing.assert_array_equal(arrays[j].to_numpy(), np.full(size, ref[j], np.float32))
    assert sorted(order) == sorted(list(range(n)) * 2)
    for run_order in (order[:n], order[n:]):
        position = {j: k for k, j in enumerate(run_order)}
        for i, j in edges:
            assert position[i] < position[j]


def test_event_record_node_is_recorded_at_launch(device):
    """CUDA: each launch records the event; waiting for it waits for the node of that launch."""
    gate = threading.Event()
    event = device.event()
    x = device.zeros(4, np.float32)
    g = gg.Graph(device)
    block = g.add_host(gate.wait, 10)
    fill = g.add_memset(x, 2.0, after=block)
    g.add_event_record(event, after=fill)
    stream, other = device.stream(), device.stream()
    with g.instantiate() as exe:
        exe.launch(stream)
        other.wait(event)  # waits for this launch's record, which is still blocked behind the gate
        assert not event.done
        gate.set()
        other.synchronize()
        assert event.done
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0, np.float32))


def test_event_record_inside_a_child_graph(device):
    event = device.event()
    x = device.zeros(4, np.float32)
    child = gg.Graph(device)
    child.add_event_record(event, after=child.add_memset(x, 3.0))
    g = gg.Graph(device)
    g.add_child(child)
    stream = device.stream()
    with g.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        event.synchronize()
        stream.synchronize()
    assert event.done
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0, np.float32))


def test_debug_dot_print_writes_the_backends_own_description(device, tmp_path, backend):
    """hipGraphDebugDotPrint: the driver's DOT on CUDA (with its flags), gpugraph's own on the CPU backend."""
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    g.add_kernel(K.fill, 1, 4, x, 3, 4, after=g.add_empty())
    path = tmp_path / "graph.dot"
    g.debug_dot_print(path, flags=("verbose", "kernel_node_params"))
    text = path.read_text()
    assert text.lstrip().startswith("digraph") and text.count("->") == 1
    if backend == "cpu":
        assert text == g.to_dot()
    else:
        assert "fill" in text  # (the verbose kernel parameters name the function)
        plain = tmp_path / "plain.dot"
        g.debug_dot_print(plain)
        assert plain.read_text().count("->") == 1 and len(plain.read_text()) < len(text)  # (the flags add to it)
    with pytest.raises(ValueError, match="unknown flag 'loud'; the flags are verbose, "):
        g.debug_dot_print(path, flags=("loud",))
    with pytest.raises(TypeError, match=r"expected an iterable of flag names, got the str 'verbose'"):
        g.debug_dot_print(path, flags="verbose")
    with pytest.raises(TypeError, match=r"debug_dot_print\(path\): expected a str or path, got int"):
        g.debug_dot_print(3)
    assert "DOT_FLAGS" in gg.__all__ and "handles" in gg.DOT_FLAGS

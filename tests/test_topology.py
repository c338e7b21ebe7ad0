"""The graph's topology as gpugraph keeps it (gpugraph._topology): it matches the backend's graph after
captures, discarded captures, interrupted changes and changes from several threads; nodes a discarded
capture added are refused by name; a captured graph nobody queried is freed without the cycle collector."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph._topology import Topology
from gpugraph.backends.cuda import _compiled
from test_reliability_exec import interrupt_at

N = 16
X0 = np.arange(1, N + 1, dtype=np.float32)


def backend_view(graph: gg.Graph) -> tuple[int, set[tuple[int, int]]]:
    """The backend graph's node count and edges as (from, to) positions in its own node order."""
    backend, handle = graph._backend, graph._handle
    nodes = backend.graph_nodes(handle)
    position = {h: i for i, h in enumerate(nodes)}
    return len(nodes), {(position[a], position[b]) for a, b in backend.graph_edges(handle)}


def front_view(graph: gg.Graph) -> tuple[int, set[tuple[int, int]]]:
    """The same, from gpugraph's own record (Graph.nodes and Graph.edges)."""
    index = {node: i for i, node in enumerate(graph.nodes)}
    return len(index), {(index[a], index[b]) for a, b in graph.edges}


def test_a_capture_into_a_graph_and_the_combined_approach_are_read_whole(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    first = g.add_memset(x, 1.0)
    with stream.capture(into=g, after=[first]) as cap:
        stream.launch(K.scale, 1, N, x, 2.0, N)
        middle = cap.add_kernel(K.scale, 1, N, x, 3.0, N)  # explicit, at the frontier
        stream.launch(K.scale, 1, N, x, 5.0, N)
        assert middle.dependencies == (g.nodes[1],)  # the captured launch before it, read meanwhile
    assert front_view(g) == backend_view(g) == (4, {(0, 1), (1, 2), (2, 3)})
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 30.0, np.float32))


def test_a_captured_fork_and_join_is_read_with_every_dependency(device, stream):
    """Edges read from the backend (the compiled lane on CUDA, else the front end's loop) name each node's
    dependencies by position: a join waits for both branches, in either reading."""
    x, y = K.f32(device, X0), K.f32(device, X0)
    side = device.stream()
    forked, joined = device.event(), device.event()
    with stream.capture() as cap:
        stream.launch(K.scale, 1, N, x, 2.0, N)  # n0
        stream.record(forked)
        side.wait(forked)
        side.launch(K.scale, 1, N, y, 3.0, N)  # n1, after n0
        stream.launch(K.scale, 1, N, x, 5.0, N)  # n2, after n0
        side.record(joined)
        stream.wait(joined)
        stream.launch(K.scale, 1, N, x, 7.0, N)  # n3, after n1 and n2
    g = cap.graph
    topology = g._current()
    topology.read_edges()
    deps = [tuple(sorted(topology.deps_of(i))) for i in range(len(topology))]
    assert deps == [(), (0,), (0,), (1, 2)]
    assert topology.shape() == ((), 0, 0, (1, 2))
    backend, handle = g._backend, g._handle
    python_reading = topology._dependencies(backend.graph_edges(handle))
    lane = backend.graph_dependencies(handle, topology.handles)
    assert python_reading[1] is True
    if device.backend == "cuda" and _compiled.fast is not None:
        assert lane is not None  # (the compiled lane reads it there)
    assert lane is None or lane == python_reading
    some = Topology()  # every other node: edges from or to a node not listed are left out, both ways
    some.handles = topology.handles[::2]
    assert some._dependencies(backend.graph_edges(handle)) == ([(), 0], False)
    lane = backend.graph_dependencies(handle, some.handles)
    if device.backend == "cuda" and _compiled.fast is not None:
        assert lane == ([(), 0], False)  # (4 edges, room for 3: read again, the unlisted ends skipped)
    assert lane in (None, ([(), 0], False))
    assert front_view(g) == backend_view(g)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 70)
    np.testing.assert_array_equal(y.to_numpy(), X0 * 3)


@pytest.mark.parametrize("width", [1, 2, 3, 9])
def test_a_graph_with_more_edges_than_nodes_is_read_whole(device, stream, width):
    """Every source waits for every one of ``width`` roots, then a sink for every source: width**2 + width
    edges among 2 * width + 1 nodes: fewer than there is room for in the compiled lane's first call (width 1),
    exactly as many (width 2: it counts them to be sure), or more (it counts them and reads them again)."""
    x, own = K.f32(device, X0), [K.f32(device, X0) for _ in range(2 * width)]  # (no two nodes write one array)
    g = gg.Graph(device)
    roots = [g.add_kernel(K.scale, 1, N, own[i], 5.0, N) for i in range(width)]
    middle = [g.add_kernel(K.scale, 1, N, own[width + i], 2.0, N, after=roots) for i in range(width)]
    g.add_kernel(K.scale, 1, N, x, 3.0, N, after=middle)
    loaded = Topology.read(g._backend, g._handle, Topology())  # (read from the backend, as a capture is)
    loaded.read_edges()
    expected = [()] * width + [tuple(range(width))] * width + [tuple(range(width, 2 * width))]
    assert [tuple(sorted(loaded.deps_of(i))) for i in range(len(loaded))] == expected
    backend, handle = g._backend, g._handle
    lane = backend.graph_dependencies(handle, loaded.handles)
    if device.backend == "cuda" and _compiled.fast is not None:
        assert lane is not None
    assert lane is None or lane == loaded._dependencies(backend.graph_edges(handle))
    assert front_view(g) == backend_view(g)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)
    for i, array in enumerate(own):
        np.testing.assert_array_equal(array.to_numpy(), X0 * (5 if i < width else 2))


@pytest.mark.parametrize("width", [1, 3])
def test_a_shape_compared_before_the_edges_are_read_answers_as_the_read_shape(device, stream, width):
    """``Topology.has_shape`` on a topology whose edges are unread (the compiled lane on CUDA compares the
    driver's edges where they are) answers as ``shape() ==`` does: for the graph's own shape, and for shapes
    that differ in a single dependency, in a node's several (one more, one fewer, one other) or in length.
    Where the lane answers, the edges stay unread (an update that finds the shapes equal never reads them)."""
    x, own = K.f32(device, X0), [K.f32(device, X0) for _ in range(2 * width)]
    g = gg.Graph(device)
    roots = [g.add_kernel(K.scale, 1, N, own[i], 5.0, N) for i in range(width)]
    middle = [g.add_kernel(K.scale, 1, N, own[width + i], 2.0, N, after=roots) for i in range(width)]
    g.add_kernel(K.scale, 1, N, x, 3.0, N, after=middle)
    g.add_kernel(K.scale, 1, N, x, 3.0, N, after=g.nodes[-1])  # one dependency: kept as an int
    several = tuple(range(width)) if width > 1 else 0
    true = (*[()] * width, *[several] * width, tuple(range(width, 2 * width)) if width > 1 else width, 2 * width)
    last = len(true) - 1
    candidates = [true, true[:-1], (*true[:-1], last - 2), (*true[:-1], ()), (*true[:-1], (last - 2, last - 1)),
                  ((0,), *true[1:]) if width == 1 else (0, *true[1:])]
    candidates.append((*true[:-1], (last - 1,)))  # (one dependency as a tuple: not what shape() gives)
    if width > 1:  # the middle nodes' several dependencies: one fewer, one more, one other
        candidates += [(*true[:width], tuple(range(width - 1)), *true[width + 1:]),
                       (*true[:width], (*range(width), 2 * width), *true[width + 1:]),
                       (*true[:width], (*range(width - 1), 2 * width), *true[width + 1:])]
    backend, handle = g._backend, g._handle
    for candidate in candidates:
        loaded = Topology.read(backend, handle, Topology())
        answer = loaded.has_shape(candidate)
        assert answer is (candidate == true), candidate
        if device.backend == "cuda" and _compiled.fast is not None:  # the lane answers, the edges left unread
            lane = backend.graph_has_shape(handle, len(loaded), candidate)
            odd = any(type(d) is tuple and len(d) == 1 for d in candidate)  # (left to shape() ==)
            assert lane is (None if odd else answer)
            assert (loaded.unread is not None) is (len(candidate) == len(loaded) and not odd)
        assert answer is (candidate == Topology.read(backend, handle, Topology()).shape())


def test_a_read_notes_child_graphs_events_and_allocations_as_a_scan_finds_them(device):
    """``Topology.read`` notes the child-graph nodes, the recorded events and the allocations in its one pass
    over the records: the same as ``nested()`` and ``recorded_events()`` find by looking at every record, for
    nodes new to gpugraph and for nodes it knows."""
    x = K.f32(device, X0)
    child = gg.Graph(device)
    child.add_kernel(K.scale, 1, N, x, 2.0, N)
    event = device.event()
    g = gg.Graph(device)
    first = g.add_kernel(K.scale, 1, N, x, 3.0, N)
    nested = g.add_child(child, after=first)
    recorded = g.add_event_record(event, after=nested)
    alloc = g.add_alloc(N, np.float32, after=recorded)
    g.add_free(alloc, after=alloc)
    known = g._current()
    for read in (Topology.read(g._backend, g._handle, Topology()), Topology.read(g._backend, g._handle, known)):
        scanned = Topology()  # the records alone: nested() and recorded_events() look at each of them
        scanned.records = read.records
        assert read.nested() == scanned.nested() == [1]
        assert read.recorded_events() == scanned.recorded_events() == [read.records[2].event]  # (the backend's)
        assert read.memory and sorted(read.allocs) == [3, 4]
        assert [r.kind for r in read.records] == [gg.NodeKind.KERNEL, gg.NodeKind.GRAPH, gg.NodeKind.EVENT_RECORD,
                                                  gg.NodeKind.MEM_ALLOC, gg.NodeKind.MEM_FREE]


def test_edges_that_carry_data_are_read_as_dependencies(device):
    """An edge with data (here a programmatic dependency, added through the driver) is a dependency like any
    other: the compiled lane, which first asks without edge data, asks again with it, as the driver then
    refuses a query without."""
    if device.backend != "cuda":
        pytest.skip("edge data (programmatic dependencies) is CUDA's")
    from cuda.bindings import driver
    x, y = K.f32(device, X0), K.f32(device, X0)
    g = gg.Graph(device)
    first, second = g.add_kernel(K.scale, 1, N, x, 2.0, N), g.add_kernel(K.scale, 1, N, y, 3.0, N)
    data = driver.CUgraphEdgeData()
    data.from_port = driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
    data.type = driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    (err,) = driver.cuGraphAddDependencies(g._handle.handle, [first._handle], [second._handle], [data], 1)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    loaded = Topology.read(g._backend, g._handle, Topology())
    loaded.read_edges()
    assert [loaded.deps_of(i) for i in range(2)] == [(), (0,)]
    lane = g._backend.graph_dependencies(g._handle, loaded.handles)
    if _compiled.fast is not None:
        assert lane == ([(), 0], False)
        assert g._backend.graph_has_shape(g._handle, 2, ((), 0)) is True  # (compared in C, asked with data too)
        assert g._backend.graph_has_shape(g._handle, 2, ((), ())) is False
    assert loaded._dependencies(g._backend.graph_edges(g._handle)) == ([(), 0], False)


def test_nodes_of_a_discarded_capture_are_refused_by_name(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    kept = g.add_memset(x, 1.0)
    with pytest.raises(RuntimeError, match=r"^stop$"), stream.capture(into=g, after=[kept]) as cap:
        gone = cap.add_kernel(K.scale, 1, N, x, 2.0, N)
        raise RuntimeError("stop")
    assert repr(gone) == "Node(n1, kernel scale)"  # repr never fails, whatever the node's state
    assert front_view(g) == backend_view(g) == (1, set())
    gone_again = r"is no longer in this graph \(the capture that added it was discarded\)$"
    with pytest.raises(gg.GraphError, match=r"^add_empty\(after=\.\.\.\): Node\(n1, kernel scale\) " + gone_again):
        g.add_empty(after=gone)
    with pytest.raises(gg.GraphError, match=r"^add_dependency: Node\(n1, kernel scale\) " + gone_again):
        g.add_dependency(kept, gone)
    with pytest.raises(gg.GraphError, match=r"has no such node any more"):
        gone.params
    assert g.add_empty(after=kept).dependencies == (kept,)  # the graph itself is whole


@pytest.mark.parametrize("change", ["add_kernel", "add_dependency", "remove_dependency", "add_alloc"])
def test_an_interrupted_change_leaves_a_graph_that_matches_the_backend(device, change):
    x = K.f32(device, X0)

    def make() -> tuple[gg.Graph, gg.Node, gg.Node]:
        g = gg.Graph(device)
        a = g.add_kernel(K.scale, 1, N, x, 2.0, N)
        return g, a, g.add_empty(after=a)

    operations = {
        "add_kernel": lambda g, a, b: g.add_kernel(K.scale, 1, N, x, 3.0, N, after=b),
        "add_dependency": lambda g, a, b: g.add_dependency(a, g.add_empty()),
        "remove_dependency": lambda g, a, b: g.remove_dependency(a, b),
        "add_alloc": lambda g, a, b: g.add_alloc(4, np.float32, after=b),
    }
    operation = operations[change]
    interrupt_at(-1, lambda: operation(*make()))  # (Python 3.12 traces a code object from its second run)
    step = 0
    while True:
        g, a, b = make()
        if not interrupt_at(step, lambda g=g, a=a, b=b: operation(g, a, b)):
            break
        assert front_view(g) == backend_view(g), f"interrupted at step {step}"
        g.add_empty(after=b)  # and it goes on being built
        assert front_view(g) == backend_view(g), f"interrupted at step {step}"
        step += 1
    assert step > 5


def test_threads_adding_to_one_graph_keep_the_backends_order(device):
    x = device.zeros(N, np.float32)
    g = gg.Graph(device)

    def add(tag: int) -> None:
        for i in range(200):
            g.add_kernel(K.scale, 1, N, x, float(tag * 1000 + i), N)

    threads = [threading.Thread(target=add, args=(tag,)) for tag in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    copy = g.clone()
    assert len(g) == len(copy) == 800
    assert all(copy.find(node).params.args[1] == node.params.args[1] for node in g.nodes)


def test_a_captured_graph_nobody_queried_is_freed_without_the_cycle_collector(device, stream):
    x = K.f32(device, X0)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with stream.capture() as cap:
            stream.launch(K.scale, 1, N, x, 2.0, N)
            stream.launch(K.scale, 1, N, x, 3.0, N)
        graph = weakref.ref(cap.graph)
        exe = cap.graph.instantiate()
        exe.launch(stream)
        del cap
        assert graph() is not None  # the executable graph holds it
        exe.close()
        del exe
        assert graph() is None
    finally:
        if collecting:
            gc.enable()
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 6)


def test_instantiate_and_update_read_no_graph_from_the_backend(device, monkeypatch):
    """Explicit graphs, with child graphs and Params: gpugraph's own record is all instantiate and update
    read (the backend's listings and per-node records are not asked for)."""
    x = K.f32(device, np.ones(N))
    factor = gg.Param(np.float32(2.0))
    innermost = gg.Graph(device)
    innermost.add_kernel(K.scale, 1, N, x, 2.0, N)
    inner = gg.Graph(device)
    inner.add_child(innermost)  # three levels: the graph, its child graphs, theirs

    def build() -> gg.Graph:
        g = gg.Graph(device)
        last = g.add_kernel(K.scale, 1, N, x, factor, N)
        for _ in range(5):
            last = g.add_child(inner, after=last)
        return g

    first, second = build(), build()
    asked: list[str] = []
    backend = device._backend
    for name in ("graph_nodes", "graph_edges", "graph_dependencies", "node_params", "node_allocation"):
        original = getattr(backend, name)
        monkeypatch.setattr(backend, name, lambda *args, _name=name, _original=original: (
            asked.append(_name), _original(*args))[1])
    with first.instantiate() as exe:
        exe.update(second)
        assert asked == []
        stream = device.stream()
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 64.0, np.float32))  # 2 (the Param), then 2^5


def graph_with_child(device: gg.Device) -> tuple[gg.Array, gg.Node, gg.Graph]:
    """An Array, a child-graph node embedding a memset of it, and the Graph over that child graph."""
    x = device.zeros(N, np.float32)
    inner = gg.Graph(device)
    inner.add_memset(x, 1.0)
    node = gg.Graph(device).add_child(inner)
    return x, node, node.params.graph


def test_every_graph_over_a_child_graph_sees_what_was_added_to_it(device, stream):
    x, node, child = graph_with_child(device)
    child.add_memset(x, 2.0, after=child.nodes[0])
    with stream.capture(into=child, after=[child.nodes[1]]):
        stream.memset(x, 3.0)
    again = node.params.graph
    assert len(child) == len(again) == 3
    assert [n.params.value for n in again.nodes] == [1.0, 2.0, 3.0]
    assert front_view(again) == backend_view(again) == (3, {(0, 1), (1, 2)})


def test_a_child_graph_is_one_graph_while_in_use(device):
    x, node, child = graph_with_child(device)
    assert node.params.graph is child and child.nodes[0] is node.params.graph.nodes[0]
    node.params.graph.add_memset(x, 2.0, after=child.nodes[0])  # a node of it is a node of it
    assert len(child) == 2 and front_view(child) == backend_view(child) == (2, {(0, 1)})


def test_captured_and_explicit_nodes_of_one_capture_keep_their_own_records(device, stream):
    """A node added explicitly at a capture's frontier between two captured launches of the same kernel and
    shape keeps its record, and so do they (on CUDA the captured calls' records are paired with the nodes the
    driver made, which must leave the explicit one be)."""
    x = K.f32(device, X0)
    factor = gg.Param(np.float32(5.0))
    with stream.capture() as cap:
        stream.launch(K.scale, 1, N, x, 2.0, N)
        cap.add_kernel(K.scale, 1, N, x, 3.0, N)
        stream.launch(K.scale, 1, N, x, factor, N)
    assert [n.params.args[1] for n in cap.graph.nodes] == [2.0, 3.0, factor]
    with cap.graph.instantiate() as exe:
        factor.value = 7.0  # reaches the node only if its record names the Param
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 42)


def test_a_graph_launched_into_a_capture_is_described_from_its_own_record(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    g.add_kernel(K.scale, 1, N, x, 2.0, N)
    with g.instantiate() as exe:
        with stream.capture() as cap:
            exe.launch(stream)
        (node,) = cap.graph.nodes
        assert node.kind is gg.NodeKind.GRAPH
        (inner,) = node.params.graph.nodes
        assert inner.params.args[0] is x and inner.params.args[1] == 2.0
        with cap.graph.instantiate() as captured:
            K.launch_and_wait(captured, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 2)


def test_nodes_noted_during_a_capture_name_their_neighbours_and_edges_right(device, stream):
    x = K.f32(device, X0)
    g = gg.Graph(device)
    first = g.add_memset(x, 1.0)
    with stream.capture(into=g, after=[first]) as cap:
        stream.launch(K.scale, 1, N, x, 2.0, N)
        (a,) = cap.dependencies
        stream.launch(K.scale, 1, N, x, 3.0, N)
        stream.launch(K.scale, 1, N, x, 5.0, N)
        (d,) = cap.dependencies  # noted alone: the graph's record has it before the 3.0 launch
        assert [n.params.args[1] for n in d.dependencies] == [3.0]
        with pytest.raises(gg.GraphError, match=r"there is no such edge$"):
            g.remove_dependency(a, d)
    assert [n.params.args[1] for n in d.dependencies] == [3.0]
    assert front_view(g) == backend_view(g)


def test_an_interrupted_reading_of_a_graph_is_made_again(device, stream, monkeypatch):
    """The reading at the end of a capture into a graph, interrupted at every check point: the graph is read
    again when next used, and a node noted during the capture (so out of the backend's order until then) is
    built on where it is."""
    x = K.f32(device, X0)

    def make() -> tuple[gg.Graph, gg.Node]:
        g = gg.Graph(device)
        first = g.add_memset(x, 1.0)
        with monkeypatch.context() as patch, stream.capture(into=g, after=[first]) as cap:
            patch.setattr(gg.Graph, "_refresh", lambda self: None)  # the capture's own reading: below
            stream.launch(K.scale, 1, N, x, 2.0, N)
            stream.launch(K.scale, 1, N, x, 3.0, N)
            (b,) = cap.dependencies  # noted alone: the graph's record has it before the 2.0 launch
        return g, b

    g, _ = make()
    interrupt_at(-1, g._refresh)  # (Python 3.12 traces a code object from its second run)
    step = 0
    while True:
        g, b = make()
        if not interrupt_at(step, g._refresh):
            break
        g.add_empty(after=b)
        assert front_view(g) == backend_view(g), f"interrupted at step {step}"
        step += 1
    assert step > 5


def test_update_compares_child_graphs_added_after_a_comparison(device, stream):
    """A graph's child-graph positions are kept as nodes are added (Topology.nested): a child added after an
    update compared the graph once is compared too."""
    x = K.f32(device, X0)

    def child(value: float) -> gg.Graph:
        c = gg.Graph(device)
        c.add_memset(x, value)
        return c

    g = gg.Graph(device)
    g.add_child(child(1.0), after=g.add_memset(x, 0.0))
    exe = g.instantiate()
    h = gg.Graph(device)
    first = h.add_memset(x, 0.0)
    with pytest.raises(gg.GraphUpdateError, match="topology changed"):
        exe.update(h)  # no child yet
    h.add_child(child(5.0), after=first)
    exe.update(h)  # now the same shape, the child's included
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5.0, np.float32))
    h.add_child(child(6.0))
    with pytest.raises(gg.GraphUpdateError, match="topology changed"):
        exe.update(h)

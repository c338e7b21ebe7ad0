"""Stream capture: what is recorded, the captured graph's shape, replay, memory, fork/join, into= and after=,
the combined approach, exceptions in the body and graphs launched into a capture.

Every test runs on each available backend through the ``device``/``stream`` fixtures of conftest.py; the
rules a capture enforces (modes, always-invalid calls, first-error reporting) are in test_capture_rules.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 64
GRID, BLOCK = K.launch_1d(N)
KIND = gg.NodeKind


def chain(graph: gg.Graph) -> list[gg.Node]:
    """The nodes of ``graph`` in order, asserting that the graph is one straight chain."""
    roots = graph.roots
    assert len(roots) == 1, f"expected one root, got {roots}"
    order = [roots[0]]
    while order[-1].dependents:
        (nxt,) = order[-1].dependents
        assert nxt.dependencies == (order[-1],)
        order.append(nxt)
    assert len(order) == len(graph.nodes)
    assert len(graph.edges) == len(order) - 1
    return order


def edge_set(graph: gg.Graph) -> set[tuple[gg.Node, gg.Node]]:
    return set(graph.edges)


def run_once(graph: gg.Graph, stream: gg.Stream, times: int = 1) -> None:
    with graph.instantiate() as exe:
        for _ in range(times):
            exe.launch(stream)
        stream.synchronize()


# What a capture records


def test_work_is_recorded_not_run(device, stream):
    log: list[str] = []
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    host_in = device.pinned(N, np.float32)
    host_in[:] = np.arange(N, dtype=np.float32)
    host_out = device.pinned(N, np.float32)
    host_out[:] = -1.0
    assert not stream.is_capturing
    with stream.capture() as cap:
        assert stream.is_capturing
        assert cap.stream is stream and cap.mode == "global"
        stream.host(log.append, "first")
        stream.memcpy(x, host_in)
        stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)
        stream.memset(y, 5.0)
        stream.launch(K.add, GRID, BLOCK, y, x, y, N)
        stream.memcpy(host_out, y)
        stream.host(log.append, "last")
        assert log == []
    assert not stream.is_capturing
    # Nothing ran during the capture, nor after it: the work is in the graph only.
    stream.synchronize()
    assert log == []
    np.testing.assert_array_equal(host_out, np.full(N, -1.0, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.zeros(N, np.float32))

    nodes = chain(cap.graph)
    assert [n.kind for n in nodes] == [KIND.HOST, KIND.MEMCPY, KIND.KERNEL, KIND.MEMSET, KIND.KERNEL,
                                       KIND.MEMCPY, KIND.HOST]
    assert nodes[0].params.args == ("first",) and nodes[-1].params.args == ("last",)
    assert nodes[3].params.value == 5.0

    run_once(cap.graph, stream)
    expected = np.arange(N, dtype=np.float32) * 2 + 5
    assert log == ["first", "last"]
    np.testing.assert_array_equal(host_out, expected)
    np.testing.assert_array_equal(y.to_numpy(), expected)


def test_empty_capture_gives_an_empty_graph(device, stream):
    with stream.capture() as cap:
        pass
    assert isinstance(cap.graph, gg.Graph)
    assert len(cap.graph) == 0 and cap.graph.edges == ()
    run_once(cap.graph, stream)


def test_graph_usable_after_block_and_stream_usable_again(device, stream):
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 3.0)
    assert repr(cap).endswith("ended)")
    # The stream runs work at once again.
    y = device.zeros(N, np.float32)
    stream.memset(y, 4.0)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 4.0, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))
    # The graph may be launched on another stream than the one it was captured from.
    other = device.stream()
    run_once(cap.graph, other)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


def test_capture_twice_on_one_stream_gives_independent_graphs(device, stream):
    x = device.zeros(N, np.float32)
    with stream.capture() as first:
        stream.memset(x, 1.0)
    with stream.capture() as second:
        stream.memset(x, 2.0)
        stream.launch(K.scale, GRID, BLOCK, x, 3.0, N)
    assert first.graph is not second.graph
    assert [n.kind for n in chain(first.graph)] == [KIND.MEMSET]
    assert [n.kind for n in chain(second.graph)] == [KIND.MEMSET, KIND.KERNEL]
    run_once(second.graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 6.0, np.float32))
    run_once(first.graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 1.0, np.float32))


def _step(stream: gg.Stream, x: gg.Array, y: gg.Array, log: list[int]) -> None:
    """Stream code run directly or captured: y += 0.5 * x, then x *= 2, then a host call."""
    stream.launch(K.axpy, GRID, BLOCK, 0.5, x, y, N)
    stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)
    stream.host(lambda: log.append(len(log)))


@pytest.mark.parametrize("times", [1, 4])
def test_replay_matches_uncaptured_stream_code_and_numpy(device, stream, times):
    x0 = np.arange(N, dtype=np.float32)
    y0 = np.ones(N, np.float32)
    ref_x, ref_y = x0.copy(), y0.copy()
    for _ in range(times):
        ref_y = np.float32(0.5) * ref_x + ref_y
        ref_x = ref_x * np.float32(2.0)

    direct_x, direct_y, direct_log = device.asarray(x0), device.asarray(y0), []
    for _ in range(times):
        _step(stream, direct_x, direct_y, direct_log)
    stream.synchronize()

    graph_x, graph_y, graph_log = device.asarray(x0), device.asarray(y0), []
    with stream.capture() as cap:
        _step(stream, graph_x, graph_y, graph_log)
    assert [n.kind for n in chain(cap.graph)] == [KIND.KERNEL, KIND.KERNEL, KIND.HOST]
    np.testing.assert_array_equal(graph_x.to_numpy(), x0)  # untouched until launched
    run_once(cap.graph, stream, times)

    np.testing.assert_array_equal(direct_x.to_numpy(), ref_x)
    np.testing.assert_array_equal(direct_y.to_numpy(), ref_y)
    np.testing.assert_array_equal(graph_x.to_numpy(), ref_x)
    np.testing.assert_array_equal(graph_y.to_numpy(), ref_y)
    assert direct_log == graph_log == list(range(times))


# Memory in a capture


def test_stream_alloc_and_free_become_memory_nodes(device, stream):
    out = device.zeros(N, np.float32)
    with stream.capture() as cap:
        tmp = stream.alloc(N, np.float32)
        stream.memset(tmp, 3.0)
        stream.launch(K.add, GRID, BLOCK, out, tmp, tmp, N)
        stream.free(tmp)
    assert isinstance(tmp, gg.Array) and tmp.shape == (N,) and tmp.dtype == np.float32
    nodes = chain(cap.graph)
    assert [n.kind for n in nodes] == [KIND.MEM_ALLOC, KIND.MEMSET, KIND.KERNEL, KIND.MEM_FREE]
    assert nodes[0].params.nbytes == 4 * N
    assert nodes[0].params.ptr == tmp.ptr == nodes[3].params.ptr
    with pytest.raises(gg.GraphError, match=r"the allocation was recorded by stream capture; use the Array "
                                            r"that Stream\.alloc returned"):
        nodes[0].array
    with cap.graph.instantiate() as exe:
        for _ in range(3):  # freed inside the graph, so it can be launched again and again
            exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), np.full(N, 6.0, np.float32))


def test_captured_allocation_left_unfreed_must_be_freed_before_relaunch(device, stream):
    with stream.capture() as cap:
        buf = stream.alloc(N, np.float32)
        stream.memset(buf, 7.0)
    assert [n.kind for n in chain(cap.graph)] == [KIND.MEM_ALLOC, KIND.MEMSET]
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(buf.to_numpy(), np.full(N, 7.0, np.float32))  # outlives the launch
        with pytest.raises(gg.GraphError, match="from the previous launch has not been freed; free it "
                                                r"\(Stream.free or a free node\) or instantiate with "
                                                "auto_free_on_launch=True"):
            exe.launch(stream)
        stream.free(buf)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(buf.to_numpy(), np.full(N, 7.0, np.float32))
        stream.free(buf)
        stream.synchronize()


def test_captured_allocation_with_auto_free_on_launch(device, stream):
    with stream.capture() as cap:
        buf = stream.alloc(N, np.int32)
        stream.launch(K.fill, GRID, BLOCK, buf, 9, N)
    with cap.graph.instantiate(auto_free_on_launch=True) as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(buf.to_numpy(), np.full(N, 9, np.int32))
        stream.free(buf)
        stream.synchronize()


def test_graph_with_captured_memory_nodes_follows_graph_memory_rules(device, stream):
    with stream.capture() as cap:
        tmp = stream.alloc(N, np.float32)
        stream.free(tmp)
    graph = cap.graph
    with pytest.raises(gg.GraphError, match="clone: a graph with allocation or free nodes cannot be cloned"):
        graph.clone()
    with pytest.raises(gg.GraphError, match="add_child: a graph with allocation or free nodes cannot be used "
                                            "as a child graph"):
        gg.Graph(device).add_child(graph)
    exe = graph.instantiate()
    with pytest.raises(gg.GraphError, match="instantiate: a graph with allocation or free nodes may have "
                                            "only one executable graph at a time"):
        graph.instantiate()
    exe.close()
    graph.instantiate().close()


def test_captured_free_must_free_graph_memory_once(device, stream):
    ordered = stream.alloc(N, np.float32)  # stream-ordered memory, not graph memory
    stream.synchronize()
    with pytest.raises(gg.CaptureError, match=r"Stream.free: .* was not made by a graph allocation; a captured "
                                              r"free can only free graph memory \(allocate it inside the "
                                              r"capture\) \(capture on .*\); the capture is invalidated") as info:
        with stream.capture():
            stream.free(ordered)
    assert info.value.api == "Stream.free" and info.value.stream is stream
    assert not stream.is_capturing
    stream.free(ordered)  # outside a capture it frees at once

    with pytest.raises(gg.CaptureError, match=r"Stream.free: .* is already freed in this capture "
                                              r"\(double free\)"):
        with stream.capture():
            tmp = stream.alloc(N, np.float32)
            stream.free(tmp)
            stream.free(tmp)

    plain = device.zeros(N, np.float32)
    with pytest.raises(ValueError, match=r"free\(array\): .* came from Device.empty \(or another library\) "
                                         r"and is freed by its owner"):
        with stream.capture():
            stream.free(plain)
    assert not stream.is_capturing
    stream.synchronize()


# Cross-stream capture: fork and join through events


def test_fork_join_diamond(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    z = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)                                 # a
        assert not other.is_capturing
        other.wait(stream.record())                           # fork
        assert other.is_capturing
        stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)        # b, after a
        other.memset(y, 5.0)                                  # c, after a
        other.launch(K.scale, GRID, BLOCK, y, 3.0, N)         # d, after c
        stream.wait(other.record())                           # join
        stream.launch(K.add, GRID, BLOCK, z, x, y, N)         # e, after b and d
    assert not stream.is_capturing and not other.is_capturing
    graph = cap.graph
    assert len(graph) == 5
    (a,) = graph.roots
    (e,) = graph.leaves
    assert a.kind is KIND.MEMSET and e.kind is KIND.KERNEL
    (b,) = [n for n in a.dependents if n.kind is KIND.KERNEL]
    (c,) = [n for n in a.dependents if n.kind is KIND.MEMSET]
    (d,) = c.dependents
    assert edge_set(graph) == {(a, b), (a, c), (c, d), (b, e), (d, e)}
    assert set(e.dependencies) == {b, d}
    np.testing.assert_array_equal(z.to_numpy(), np.zeros(N, np.float32))
    run_once(graph, stream)
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 2.0 + 15.0, np.float32))
    # The forked stream runs work directly again.
    other.memset(y, 8.0)
    other.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 8.0, np.float32))


def test_fork_at_the_start_makes_parallel_roots(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    with stream.capture() as cap:
        other.wait(stream.record())  # nothing captured yet: both branches start at the root
        stream.memset(x, 1.0)
        other.memset(y, 2.0)
        stream.wait(other.record())
        stream.launch(K.add, GRID, BLOCK, x, x, y, N)
    graph = cap.graph
    assert {n.kind for n in graph.roots} == {KIND.MEMSET} and len(graph.roots) == 2
    (leaf,) = graph.leaves
    assert set(leaf.dependencies) == set(graph.roots)
    run_once(graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


def test_event_recorded_in_capture_orders_work_on_the_same_stream(device, stream):
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        event = stream.record()
        stream.wait(event)  # waiting on one's own captured event adds no node and no extra edge
        stream.launch(K.scale, GRID, BLOCK, x, 4.0, N)
    assert [n.kind for n in chain(cap.graph)] == [KIND.MEMSET, KIND.KERNEL]
    run_once(cap.graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 4.0, np.float32))


# Capturing into an existing graph: into= and after=


def test_capture_into_graph_appends_after_given_nodes(device, stream):
    log: list[str] = []
    x = device.zeros(N, np.float32)
    graph = gg.Graph(device)
    first = graph.add_memset(x, 2.0)
    side = graph.add_host(log.append, "side")
    with stream.capture(into=graph, after=[first]) as cap:
        assert cap.graph is graph
        assert cap.dependencies == (first,)
        stream.launch(K.scale, GRID, BLOCK, x, 3.0, N)
        stream.host(log.append, "captured")
    assert cap.graph is graph
    assert len(graph) == 4
    (kernel,) = first.dependents
    assert kernel.kind is KIND.KERNEL
    (host,) = kernel.dependents
    assert host.kind is KIND.HOST and host.params.args == ("captured",)
    assert side.dependencies == () and side.dependents == ()
    assert edge_set(graph) == {(first, kernel), (kernel, host)}
    assert log == []
    run_once(graph, stream)
    assert sorted(log) == ["captured", "side"]
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 6.0, np.float32))


def test_capture_into_graph_without_after_adds_roots(device, stream):
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    graph = gg.Graph(device)
    existing = graph.add_memset(x, 1.0)
    with stream.capture(into=graph) as cap:
        assert cap.dependencies == ()
        stream.memset(y, 2.0)
    assert len(graph) == 2 and graph.edges == ()
    assert set(graph.roots) == set(graph.nodes) and existing in graph.roots
    run_once(graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 1.0, np.float32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 2.0, np.float32))


def test_capture_into_graph_after_a_single_node_and_two_nodes(device, stream):
    x = device.zeros(N, np.float32)
    graph = gg.Graph(device)
    a = graph.add_memset(x, 1.0)
    b = graph.add_empty()
    with stream.capture(into=graph, after=a):  # a single Node is accepted
        stream.launch(K.scale, GRID, BLOCK, x, 5.0, N)
    with stream.capture(into=graph, after=[a, b]):
        stream.host(lambda: None)
    (kernel,) = [n for n in graph.nodes if n.kind is KIND.KERNEL]
    (host,) = [n for n in graph.nodes if n.kind is KIND.HOST]
    assert kernel.dependencies == (a,)
    assert set(host.dependencies) == {a, b}


def test_after_without_into_is_a_value_error(device, stream):
    graph = gg.Graph(device)
    node = graph.add_empty()
    with pytest.raises(ValueError, match=r"capture\(after\): starting dependencies need into=graph"):
        stream.capture(after=[node])
    assert not stream.is_capturing


def test_into_must_be_a_graph(device, stream):
    with pytest.raises(TypeError, match=r"capture\(into\): expected a Graph or None, got list"):
        stream.capture(into=[])


def test_after_node_of_another_graph_is_refused(device, stream):
    graph, other = gg.Graph(device), gg.Graph(device)
    foreign = other.add_empty()
    with pytest.raises(gg.GraphError, match=r"capture\(after=\.\.\.\): .* belongs to another graph"):
        with stream.capture(into=graph, after=[foreign]):
            pass
    assert not stream.is_capturing and len(graph) == 0


class Boom(Exception):
    pass


@pytest.mark.parametrize("failure", ["user exception", "refused call", "unjoined stream"])
def test_failed_capture_into_graph_leaves_it_as_it_was(device, stream, failure):
    x = device.zeros(N, np.float32)
    x_in = device.zeros(N, np.float32)
    graph = gg.Graph(device)
    a = graph.add_memset(x, 1.0)
    b = graph.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N, after=[a])
    nodes_before, edges_before = set(graph.nodes), edge_set(graph)
    other = device.stream()
    expected = {"user exception": Boom, "refused call": gg.CaptureError, "unjoined stream": gg.CaptureError}
    with pytest.raises(expected[failure]) as info:
        with stream.capture(into=graph, after=[b]) as cap:
            stream.memset(x_in, 4.0)
            stream.launch(K.scale, GRID, BLOCK, x, 3.0, N)
            stream.host(lambda: None)
            assert len(graph) == 5
            if failure == "user exception":
                raise Boom("mine")
            if failure == "refused call":
                stream.synchronize()
            other.wait(stream.record())
            other.memset(x_in, 9.0)
    assert type(info.value) is expected[failure]
    assert not stream.is_capturing and not other.is_capturing
    assert cap.graph is None
    assert len(graph) == 2
    assert set(graph.nodes) == nodes_before
    assert edge_set(graph) == edges_before
    assert a.dependents == (b,) and b.dependents == ()
    run_once(graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 2.0, np.float32))
    np.testing.assert_array_equal(x_in.to_numpy(), np.zeros(N, np.float32))


# The combined approach: explicit nodes at the capture frontier


def test_combined_approach_nodes_join_the_stream_order(device, stream):
    log: list[str] = []
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    host = device.pinned(N, np.float32)
    with stream.capture() as cap:
        assert cap.dependencies == ()
        stream.memset(x, 1.0)
        (m,) = cap.dependencies
        assert m.kind is KIND.MEMSET
        k = cap.add_kernel(K.scale, GRID, BLOCK, x, 4.0, N)
        assert k.kind is KIND.KERNEL and k.graph is cap.graph
        assert k.dependencies == (m,) and cap.dependencies == (k,)
        stream.host(log.append, "captured")                # depends on the explicit node
        (h1,) = cap.dependencies
        h2 = cap.add_host(log.append, "explicit")
        cp = cap.add_memcpy(y, x)
        ms = cap.add_memset(x, 0.5)
        em = cap.add_empty()
        assert cap.dependencies == (em,)
        stream.memcpy(host, y)
    nodes = chain(cap.graph)
    assert nodes[:7] == [m, k, h1, h2, cp, ms, em]
    assert [n.kind for n in nodes] == [KIND.MEMSET, KIND.KERNEL, KIND.HOST, KIND.HOST, KIND.MEMCPY,
                                       KIND.MEMSET, KIND.EMPTY, KIND.MEMCPY]
    assert h1.params.args == ("captured",) and h2.params.args == ("explicit",)
    assert log == []
    run_once(cap.graph, stream)
    assert log == ["captured", "explicit"]
    np.testing.assert_array_equal(host, np.full(N, 4.0, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 0.5, np.float32))


def test_set_dependencies_replaces_the_frontier(device, stream):
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    z = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 2.0)
        (mx,) = cap.dependencies
        cap.set_dependencies([])                     # the next captured node is a root
        assert cap.dependencies == ()
        stream.memset(y, 3.0)
        (my,) = cap.dependencies
        cap.set_dependencies([mx, my])               # the next one depends on both
        assert set(cap.dependencies) == {mx, my}
        stream.launch(K.add, GRID, BLOCK, z, x, y, N)
        (add,) = cap.dependencies
    graph = cap.graph
    assert set(graph.roots) == {mx, my}
    assert set(add.dependencies) == {mx, my}
    assert edge_set(graph) == {(mx, add), (my, add)}
    run_once(graph, stream)
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 5.0, np.float32))


def test_set_dependencies_then_explicit_node(device, stream):
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
        (first,) = cap.dependencies
        stream.launch(K.scale, GRID, BLOCK, x, 2.0, N)
        cap.set_dependencies([first])
        empty = cap.add_empty()
        assert empty.dependencies == (first,)
        stream.host(lambda: None)
        (host,) = cap.dependencies
    assert host.dependencies == (empty,)
    assert len(first.dependents) == 2


def test_set_dependencies_refuses_nodes_of_another_graph(device, stream):
    foreign = gg.Graph(device).add_empty()
    with stream.capture() as cap:
        with pytest.raises(gg.GraphError, match=r"set_dependencies\(after=\.\.\.\): .* belongs to another graph"):
            cap.set_dependencies([foreign])
    assert len(cap.graph) == 0


def test_add_child_at_the_frontier(device, stream):
    x = device.zeros(N, np.float32)
    child = gg.Graph(device)
    child.add_kernel(K.scale, GRID, BLOCK, x, 3.0, N)
    with stream.capture() as cap:
        stream.memset(x, 2.0)
        node = cap.add_child(child)
        stream.launch(K.scale, GRID, BLOCK, x, 0.5, N)
    assert [n.kind for n in chain(cap.graph)] == [KIND.MEMSET, KIND.GRAPH, KIND.KERNEL]
    assert node.kind is KIND.GRAPH
    run_once(cap.graph, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 3.0, np.float32))


@pytest.mark.parametrize("api, call", [
    ("dependencies", lambda cap, x: cap.dependencies),
    ("set_dependencies", lambda cap, x: cap.set_dependencies([])),
    ("add_kernel", lambda cap, x: cap.add_kernel(K.scale, GRID, BLOCK, x, 2.0, N)),
    ("add_host", lambda cap, x: cap.add_host(print)),
    ("add_memcpy", lambda cap, x: cap.add_memcpy(x, x)),
    ("add_memset", lambda cap, x: cap.add_memset(x, 1.0)),
    ("add_child", lambda cap, x: cap.add_child(gg.Graph(x.device))),
    ("add_empty", lambda cap, x: cap.add_empty()),
])
def test_capture_methods_after_the_block_raise(device, stream, api, call):
    x = device.zeros(N, np.float32)
    with stream.capture() as cap:
        stream.memset(x, 1.0)
    with pytest.raises(gg.CaptureError, match=re.escape(f"Capture.{api}: the capture is not running "
                                                        f"(use it inside the with block)")) as info:
        call(cap, x)
    assert info.value.api == f"Capture.{api}"
    assert len(cap.graph) == 1


# Exceptions in the with body


def test_user_exception_propagates_and_stream_is_usable(device, stream):
    log: list[int] = []
    x = device.zeros(N, np.float32)
    with pytest.raises(Boom, match="mine") as info:
        with stream.capture() as cap:
            stream.memset(x, 9.0)
            stream.host(log.append, 1)
            raise Boom("mine")
    assert type(info.value) is Boom
    assert not stream.is_capturing
    assert cap.graph is None
    stream.memset(x, 4.0)
    stream.host(log.append, 2)
    stream.synchronize()
    assert log == [2]  # the captured host call never ran
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 4.0, np.float32))
    with stream.capture() as again:  # and can capture again
        stream.memset(x, 1.0)
    assert len(again.graph) == 1


def test_user_exception_ends_forked_streams_too(device, stream):
    other = device.stream()
    x = device.zeros(N, np.float32)
    with pytest.raises(KeyError):
        with stream.capture():
            other.wait(stream.record())
            other.memset(x, 1.0)
            raise KeyError("k")
    assert not stream.is_capturing and not other.is_capturing
    other.memset(x, 2.0)
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 2.0, np.float32))


# Launching executable graphs into a capture


def test_launching_a_graph_into_a_capture_records_a_child_graph_node(device, stream):
    x = device.zeros(N, np.float32)
    y = device.zeros(N, np.float32)
    z = device.zeros(N, np.float32)
    inner = gg.Graph(device)
    m = inner.add_memset(x, 2.0)
    inner.add_kernel(K.scale, GRID, BLOCK, x, 3.0, N, after=[m])
    with inner.instantiate() as exe:
        with stream.capture() as cap:
            stream.memset(y, 1.0)
            exe.launch(stream)
            stream.launch(K.add, GRID, BLOCK, z, x, y, N)
        nodes = chain(cap.graph)
        assert [n.kind for n in nodes] == [KIND.MEMSET, KIND.GRAPH, KIND.KERNEL]
        child = nodes[1].params.graph
        assert sorted(n.kind.value for n in child.nodes) == ["kernel", "memset"]
        np.testing.assert_array_equal(x.to_numpy(), np.zeros(N, np.float32))
    run_once(cap.graph, stream, times=2)
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 6.0, np.float32))
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 7.0, np.float32))


def test_launching_a_graph_with_memory_nodes_into_a_capture_is_refused(device, stream):
    graph = gg.Graph(device)
    alloc = graph.add_alloc(N, np.float32)
    graph.add_free(alloc, after=[alloc])
    with graph.instantiate() as exe:
        message = re.escape(f"GraphExec.launch: a graph with allocation or free nodes cannot be launched into "
                            f"a capture (it would become a child graph) (capture on {stream!r}, mode "
                            f"'relaxed'); the capture is invalidated")
        with pytest.raises(gg.CaptureError, match=message) as info:
            with stream.capture(mode="relaxed"):
                exe.launch(stream)  # launching the memory graph
        assert info.value.api == "GraphExec.launch" and info.value.mode == "relaxed"
        assert "exe.launch(stream)  # launching the memory graph" in info.value.where
        assert not stream.is_capturing
        exe.launch(stream)  # outside a capture it runs
        stream.synchronize()


def test_each_capture_has_an_id_of_its_own(device, stream):
    """hipStreamGetCaptureInfo's id: unique among the process's captures, readable during and after the capture."""
    other = device.stream()
    cap = stream.capture()
    with pytest.raises(gg.CaptureError, match=r"Capture\.id: the capture has not begun"):
        _ = cap.id
    with cap, other.capture() as second:
        first_id = cap.id
        assert isinstance(first_id, int) and first_id > 0 and second.id != first_id
    assert cap.id == first_id
    with stream.capture() as third:
        pass
    assert third.id not in (first_id, second.id)

"""Graph errors: each raised at the call that caused it, with a message naming the rule, and with nothing
half-added (the node count and the edges are unchanged after the error)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import gpugraph as gg
import kernels as K


@contextlib.contextmanager
def unchanged(graph):
    """Assert that ``graph`` has the same nodes and edges after the block as before it."""
    nodes, edges = graph.nodes, set(graph.edges)
    yield
    assert graph.nodes == nodes
    assert set(graph.edges) == edges


@pytest.fixture
def g(device):
    return gg.Graph(device)


# Edges


def test_cycle(g):
    a = g.add_empty()
    b = g.add_empty(after=a)
    c = g.add_empty(after=b)
    with unchanged(g), pytest.raises(gg.GraphError, match=r"add_dependency\(Node\(n2, empty\), Node\(n0, empty\)\)"
                                                          r".*the edge would make a cycle"):
        g.add_dependency(c, a)


def test_self_edge(g):
    a = g.add_empty()
    with unchanged(g), pytest.raises(gg.GraphError, match="cycle"):
        g.add_dependency(a, a)


def test_duplicate_edge(g):
    a = g.add_empty()
    b = g.add_empty(after=a)
    with unchanged(g), pytest.raises(gg.GraphError, match="the edge exists already"):
        g.add_dependency(a, b)


def test_remove_missing_edge(g):
    a = g.add_empty()
    b = g.add_empty()
    with unchanged(g), pytest.raises(gg.GraphError, match=r"remove_dependency\(.*\): there is no such edge"):
        g.remove_dependency(a, b)


def test_node_from_another_graph_in_after(device, g):
    other = gg.Graph(device)
    foreign = other.add_empty()
    a = g.add_empty()
    with unchanged(g), unchanged(other):
        with pytest.raises(gg.GraphError, match=r"add_empty\(after=...\): Node\(n0, empty\) belongs to another graph"):
            g.add_empty(after=(a, foreign))
        with pytest.raises(gg.GraphError, match=r"add_host\(after=...\).*belongs to another graph"):
            g.add_host(print, after=foreign)
        with pytest.raises(gg.GraphError, match="belongs to another graph"):
            g.add_memset(device.zeros(2, np.int32), 0, after=foreign)


def test_node_from_another_graph_in_add_dependency(device, g):
    foreign = gg.Graph(device).add_empty()
    a = g.add_empty()
    with unchanged(g):
        with pytest.raises(gg.GraphError, match=r"add_dependency: .* belongs to another graph"):
            g.add_dependency(a, foreign)
        with pytest.raises(gg.GraphError, match=r"add_dependency: .* belongs to another graph"):
            g.add_dependency(foreign, a)
        with pytest.raises(gg.GraphError, match=r"remove_dependency: .* belongs to another graph"):
            g.remove_dependency(foreign, a)


def test_after_errors(g):
    a = g.add_empty()
    with unchanged(g):
        with pytest.raises(gg.GraphError, match=r"add_empty\(after=...\): Node\(n0, empty\) is listed twice"):
            g.add_empty(after=(a, a))
        with pytest.raises(TypeError, match=r"add_empty\(after=...\): expected Nodes, got str"):
            g.add_empty(after=["a"])
        with pytest.raises(TypeError, match=r"add_empty\(after=...\): expected a Node or an iterable of Nodes, "
                                            r"got int 3"):
            g.add_empty(after=3)
        with pytest.raises(TypeError, match="add_dependency: expected Nodes, got int for 'to'"):
            g.add_dependency(a, 3)


# Memory nodes


def test_free_of_non_alloc_node(device, g):
    m = g.add_memset(device.zeros(4, np.int32), 0)
    with unchanged(g), pytest.raises(gg.GraphError, match=r"add_free\(Node\(n0, memset\)\): the node is a memset "
                                                          r"node, not an allocation \(got NodeKind.MEMSET\)"):
        g.add_free(m, after=m)


def test_free_of_memory_that_is_no_graph_allocation(device, stream, g):
    plain = device.empty(4, np.int32)
    streamed = stream.alloc(4, np.int32)
    with unchanged(g):
        with pytest.raises(gg.GraphError, match="is not the address of a graph allocation"):
            g.add_free(plain)
        with pytest.raises(gg.GraphError, match="is not the address of a graph allocation"):
            g.add_free(streamed)
        with pytest.raises(TypeError, match="add_free: expected an allocation Node or an Array, got ndarray"):
            g.add_free(np.zeros(4))
    stream.free(streamed)


def test_free_of_alloc_node_of_another_graph(device, g):
    other = gg.Graph(device)
    alloc = other.add_alloc(4, np.int32)
    with unchanged(g), pytest.raises(gg.GraphError, match="belongs to another graph; pass its Array instead"):
        g.add_free(alloc)


def test_double_free_in_one_graph(g):
    alloc = g.add_alloc(4, np.int32)
    f = g.add_free(alloc, after=alloc)
    with unchanged(g), pytest.raises(gg.GraphError, match=r"already freed by Node\(n1, mem_free\) \(double free\)"):
        g.add_free(alloc, after=f)


def test_free_not_ordered_after_its_alloc(g):
    alloc = g.add_alloc(4, np.int32)
    unrelated = g.add_empty()
    with unchanged(g):
        with pytest.raises(gg.GraphError, match=r"the free must be ordered after Node\(n0, mem_alloc\)"):
            g.add_free(alloc)
        with pytest.raises(gg.GraphError, match="the free must be ordered after"):
            g.add_free(alloc.array, after=unrelated)
    # ordered through another node is fine
    m = g.add_memset(alloc.array, 0, after=alloc)
    g.add_free(alloc, after=m)


def test_add_child_of_graph_with_memory_nodes(device, g):
    child = gg.Graph(device)
    child.add_alloc(4, np.int32)
    with unchanged(g), pytest.raises(gg.GraphError,
                                     match="a graph with allocation or free nodes cannot be used as a child"):
        g.add_child(child)


def test_add_child_errors(device, g):
    with unchanged(g):
        with pytest.raises(gg.GraphError, match="a graph cannot contain itself"):
            g.add_child(g)
        with pytest.raises(TypeError, match=r"add_child\(graph\): expected a Graph, got int"):
            g.add_child(3)


def test_memory_nodes_in_an_embedded_child_graph(device, g):
    node = g.add_child(gg.Graph(device))
    embedded = node.params.graph
    with pytest.raises(gg.GraphError, match="child graphs cannot hold allocation or free nodes"):
        embedded.add_alloc(4, np.int32)
    assert len(embedded) == 0


def test_clone_of_graph_with_memory_nodes(g):
    g.add_alloc(4, np.int32)
    with pytest.raises(gg.GraphError, match="clone: a graph with allocation or free nodes cannot be cloned"):
        g.clone()


def test_remove_dependency_on_graph_with_memory_nodes(g):
    a = g.add_empty()
    b = g.add_empty(after=a)
    g.add_alloc(4, np.int32)
    with unchanged(g), pytest.raises(gg.GraphError,
                                     match="edges of a graph with allocation or free nodes cannot be removed"):
        g.remove_dependency(a, b)


def test_second_instantiate_of_graph_with_memory_nodes(g, stream):
    alloc = g.add_alloc(4, np.int32)
    g.add_free(alloc, after=alloc)
    first = g.instantiate()
    with pytest.raises(gg.GraphError, match="may have only one executable graph at a time; close the other one first"):
        g.instantiate()
    with unchanged(g), pytest.raises(gg.GraphError, match="add_alloc: a graph with memory nodes may have only one"):
        g.add_alloc(4, np.int32)
    first.close()
    with g.instantiate() as second:
        second.launch(stream)
        stream.synchronize()


def test_graph_without_memory_nodes_may_have_many_execs(g, stream, device):
    x = device.zeros(2, np.float64)
    g.add_kernel(K.inc, 1, 2, x, 2)
    with g.instantiate() as e1, g.instantiate() as e2:
        e1.launch(stream)
        e2.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [2, 2])


def test_node_array_of_non_alloc_node(g):
    with pytest.raises(gg.GraphError, match=r"\.array: only allocation nodes have an array"):
        g.add_empty().array


# Node parameters


def test_memcpy_with_mismatched_sizes(device, g):
    with unchanged(g):
        with pytest.raises(ValueError, match="add_memcpy: dst holds 16 bytes and src 8 bytes; the sizes must match"):
            g.add_memcpy(device.zeros(4, np.int32), np.zeros(2, np.int32))
        with pytest.raises(ValueError, match="add_memcpy: nbytes=32 exceeds dst"):
            g.add_memcpy(device.zeros(4, np.int32), device.zeros(8, np.int32), nbytes=32)
        with pytest.raises(TypeError, match=r"add_memcpy\(src\): expected an Array or a NumPy array, got list"):
            g.add_memcpy(device.zeros(4, np.int32), [1, 2, 3, 4])


@pytest.mark.parametrize("value, count, exc, match", [
    (2.0, None, ValueError, "add_memset: memsets write 1-, 2- or 4-byte patterns"),
    ("x", None, TypeError, "add_memset: value must be a scalar, got str"),
    (0.0, 9, ValueError, r"add_memset: count must be an int in 0..8 \(elements of dst\), got 9"),
    (0.0, -1, ValueError, "add_memset: count must be an int"),
])
def test_memset_with_bad_value_or_count(device, g, value, count, exc, match):
    with unchanged(g), pytest.raises(exc, match=match):
        g.add_memset(device.zeros(8, np.float64), value, count)


def test_memset_of_host_array(g):
    with unchanged(g), pytest.raises(TypeError, match=r"add_memset\(dst\): expected a device Array, got ndarray"):
        g.add_memset(np.zeros(4), 0)


@pytest.mark.parametrize("bad", ["7", None, [7], object()])
def test_kernel_arg_of_unsupported_type(device, g, bad):
    with unchanged(g), pytest.raises(TypeError, match=r"Kernel\('fill'\) argument 1 \(int v\): expects a C int scalar"):
        g.add_kernel(K.fill, 1, 4, device.zeros(4, np.int32), bad, 4)


def test_kernel_node_errors(device, g):
    x = device.zeros(4, np.int32)
    with unchanged(g):
        with pytest.raises(TypeError, match=r"add_kernel\(kernel\): expected a Kernel, got str"):
            g.add_kernel("fill", 1, 4, x, 1, 4)
        with pytest.raises(TypeError, match="takes 3 arguments"):
            g.add_kernel(K.fill, 1, 4, x, 1)
        with pytest.raises(ValueError, match="shared_mem"):
            g.add_kernel(K.fill, 1, 4, x, 1, 4, shared_mem=-4)


def test_other_node_type_errors(g):
    with unchanged(g):
        with pytest.raises(TypeError, match=r"add_host\(fn\): expected a callable, got str"):
            g.add_host("print")
        with pytest.raises(TypeError, match=r"add_event_record\(event\): expected an Event, got NoneType"):
            g.add_event_record(None)
        with pytest.raises(TypeError, match=r"add_event_wait\(event\): expected an Event, got int"):
            g.add_event_wait(1)
        with pytest.raises(ValueError, match="shape"):
            g.add_alloc(-1, np.int32)
        with pytest.raises(TypeError, match="dtype"):
            g.add_alloc(4, "nonsense")


def test_find_errors(device, g):
    a = g.add_empty()
    with pytest.raises(gg.GraphError, match="find: this graph is not a clone"):
        g.find(a)
    clone = g.clone()
    with pytest.raises(gg.GraphError, match="is not a node of the graph this one was cloned from"):
        clone.find(gg.Graph(device).add_empty())
    with pytest.raises(gg.GraphError, match="is not a node of the graph this one was cloned from"):
        clone.find(clone.find(a))


def test_find_of_a_node_added_after_the_clone(device, g, stream):
    a = g.add_empty()
    clone = g.clone()
    later = g.add_empty(after=a)
    with stream.capture(into=g, after=[later]):
        stream.host(print, "never launched")
    captured = g.leaves[0]
    for node in (later, captured):
        with pytest.raises(gg.GraphError, match=rf"^find: Node\(n{node._number}, \w+\) was added to the original "
                                                rf"graph after this clone was made, so the clone has no "
                                                rf"counterpart of it$"):
            clone.find(node)
    assert clone.find(a).kind is gg.NodeKind.EMPTY and len(clone) == 1


def test_embedded_child_graph_is_instantiated_through_a_clone(device, g, stream):
    """CUDA refuses to instantiate the graph a child node embeds (NOT_SUPPORTED); both backends refuse it
    with a GraphError saying why, and its clone instantiates (CUDA: tools/probes/gpu_probe_rules.py, 7a-7c)."""
    x = K.f32(device, [1.0, 2.0, 3.0, 4.0])
    child = gg.Graph(device)
    child.add_kernel(K.scale, 1, 4, x, 2.0, 4)
    node = g.add_child(child)
    embedded = node.params.graph
    with pytest.raises(gg.GraphError, match=r"^instantiate: this graph is the one embedded in a child-graph node "
                                            r"of Graph\(.*\); it belongs to that node and cannot be "
                                            r"instantiated \(CUDA refuses it\); instantiate a copy made with "
                                            r"\.clone\(\) instead$"):
        embedded.instantiate()
    copy = embedded.clone()
    assert len(copy) == 1 and copy.find(embedded.nodes[0]).kind is gg.NodeKind.KERNEL
    with copy.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), [2.0, 4.0, 6.0, 8.0])
    with g.instantiate() as exe:  # the parent as before
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), [4.0, 8.0, 12.0, 16.0])


# Executable graphs


def test_launching_a_closed_exec(g, stream):
    g.add_empty()
    exe = g.instantiate()
    exe.close()
    with pytest.raises(gg.GraphError, match="launch: this GraphExec is closed"):
        exe.launch(stream)
    with pytest.raises(gg.GraphError, match="upload: this GraphExec is closed"):
        exe.upload(stream)


def test_launch_on_non_stream(g):
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=r"launch\(stream\): expected a Stream, got NoneType"):
            exe.launch(None)


def test_relaunch_with_unfreed_allocation(g, stream):
    alloc = g.add_alloc(4, np.int32)
    g.add_memset(alloc.array, 1, after=alloc)
    with g.instantiate() as exe:
        exe.launch(stream)
        with pytest.raises(gg.GraphError, match=r"from the previous launch has not been freed; free it .*"
                                                r"auto_free_on_launch=True"):
            exe.launch(stream)
        stream.free(alloc.array)
        stream.synchronize()


def test_auto_free_on_launch_allows_relaunch(g, stream):
    alloc = g.add_alloc(4, np.int32)
    g.add_memset(alloc.array, 3, after=alloc)
    host = np.zeros(4, np.int32)
    with g.instantiate(auto_free_on_launch=True) as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.memcpy(host, alloc.array)
        stream.free(alloc.array)
        stream.synchronize()
    np.testing.assert_array_equal(host, [3, 3, 3, 3])


def test_foreign_free_of_memory_not_allocated_now(device, stream):
    g1 = gg.Graph(device)
    alloc = g1.add_alloc(4, np.int32)
    g2 = gg.Graph(device)
    g2.add_free(alloc.array)
    with g1.instantiate() as e1, g2.instantiate() as e2:
        with pytest.raises(gg.GraphError, match=r"launch: the graph frees .* which is not allocated now"):
            e2.launch(stream)          # before g1 allocated it
        e1.launch(stream)
        e2.launch(stream)
        with pytest.raises(gg.GraphError, match="not allocated now"):
            e2.launch(stream)          # freed already
        stream.synchronize()


def test_instantiate_with_a_bad_upload_leaves_no_exec(device):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    g.add_free(alloc, after=alloc)
    with pytest.raises(TypeError, match=r"^instantiate\(upload\): expected a Stream, got str$"):
        g.instantiate(upload="not a stream")
    with g.instantiate() as exe:  # the failed one was closed, so this is the only one
        assert not exe.closed

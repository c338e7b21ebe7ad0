"""What executable graphs, instantiate and update read of a graph (``gpugraph._graph_reads``, gpugraph's own, off
the user's Graph): ``topology``, ``node_of``, ``embedded_graphs``, ``shape``, ``version``, ``in_body``,
``has_node``, ``holds_other_than``; and the node numbers they compare (``Node._number``)."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import NodeKind
from gpugraph import _graph_reads as reads


def test_topology_lists_the_nodes_in_creation_order(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    a = g.add_kernel(K.fill, 1, 4, x, 1, 4)
    b = g.add_empty(after=a)
    topology = reads.topology(g)
    assert [record.kind for record in topology.records] == [NodeKind.KERNEL, NodeKind.EMPTY]
    assert [reads.node_of(g, handle) for handle in topology.handles] == [a, b]
    assert topology.deps_of(1) == (0,) and topology.deps_of(0) == ()
    assert topology.memory is False
    g.add_alloc(4, np.float32)
    assert reads.topology(g).memory is True


def test_node_of_refuses_a_handle_no_longer_in_the_graph(device):
    g = gg.Graph(device)
    a, b = g.add_empty(), g.add_empty()
    handle = reads.topology(g).handles[0]
    assert reads.node_of(g, handle) is a
    g.remove_node(a)
    with pytest.raises(gg.GraphError, match="has no such node any more"):
        reads.node_of(g, handle)
    assert reads.node_of(g, reads.topology(g).handles[0]) is b


def test_embedded_graphs_are_a_child_graphs_and_a_conditional_nodes_bodies(device):
    g = gg.Graph(device)
    child = gg.Graph(device)
    child.add_empty()
    embedding = g.add_child(child)
    switch = g.add_switch(g.condition(), 3)
    empty = g.add_empty()
    handles = reads.topology(g).handles
    assert reads.embedded_graphs(g, handles[0]) == (embedding.params.graph,)
    assert reads.embedded_graphs(g, handles[1]) == switch.bodies and len(switch.bodies) == 3
    assert reads.embedded_graphs(g, handles[2]) == () and empty.kind is NodeKind.EMPTY


def test_in_body_names_a_conditional_nodes_bodies_only(device):
    g = gg.Graph(device)
    child = gg.Graph(device)
    child.add_empty()
    embedded = g.add_child(child).params.graph
    (body,) = g.add_while(g.condition()).bodies
    assert (reads.in_body(g), reads.in_body(embedded), reads.in_body(body)) == (False, False, True)


def test_holds_other_than_looks_into_child_graphs(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    g.add_kernel(K.fill, 1, 4, x, 1, 4)
    assert reads.holds_other_than(g, frozenset({NodeKind.KERNEL})) is None
    child = gg.Graph(device)
    child.add_host(lambda: None)
    g.add_child(child)
    kinds = frozenset({NodeKind.KERNEL, NodeKind.GRAPH})
    assert reads.holds_other_than(g, kinds) is NodeKind.HOST
    assert reads.holds_other_than(g, kinds | {NodeKind.HOST}) is None


def test_version_counts_changes_of_the_graph_and_of_graphs_embedded_in_it(device):
    g = gg.Graph(device)
    a = g.add_empty()
    before = reads.version(g)
    b = g.add_empty()
    assert reads.version(g) > before
    before = reads.version(g)
    g.add_dependency(a, b)
    assert reads.version(g) > before
    (body,) = g.add_if(g.condition()).bodies
    before = reads.version(g)
    body.add_empty()
    assert reads.version(g) > before
    before = reads.version(g)
    assert (len(g.nodes), len(reads.topology(g).handles), reads.has_node(g, b)) == (3, 3, True)
    reads.shape(g)
    assert reads.version(g) == before  # (reads change nothing)


def test_shape_pairs_graphs_built_alike(device):
    def build(edge: bool) -> gg.Graph:
        g = gg.Graph(device)
        a, b = g.add_empty(), g.add_empty()
        if edge:
            g.add_dependency(a, b)
        child = gg.Graph(device)
        child.add_empty()
        g.add_child(child, after=a)
        return g

    one, two, other = build(True), build(True), build(False)
    assert reads.shape(one) == reads.shape(two) != reads.shape(other)
    like = reads.shape(one)
    assert reads.shape(two, like=like) == like and reads.shape(other, like=like) != like
    plain = gg.Graph(device)
    plain.add_empty()
    twin = gg.Graph(device)
    twin.add_empty()
    shape = reads.shape(plain)
    assert reads.shape(twin, like=shape) is shape  # (no child graph, no body: compared where the edges are)


def test_shape_holds_the_bodies(device):
    def build(count: int) -> gg.Graph:
        g = gg.Graph(device)
        for body in g.add_switch(g.condition(), 2).bodies:
            for _ in range(count):
                body.add_empty()
        return g

    assert reads.shape(build(1)) == reads.shape(build(1)) != reads.shape(build(2))


def test_has_node_tells_a_node_still_in_its_graph(device):
    g, other = gg.Graph(device), gg.Graph(device)
    a, b = g.add_empty(), g.add_empty()
    elsewhere = other.add_empty()
    assert reads.has_node(g, a) and reads.has_node(g, b) and not reads.has_node(g, elsewhere)
    assert reads.has_node(other, elsewhere)
    assert not reads.has_node(g, "a node") and not reads.has_node(g, None)
    g.remove_node(a)
    assert not reads.has_node(g, a) and reads.has_node(g, b)


def test_node_number_is_kept_through_removals(device):
    g = gg.Graph(device)
    nodes = [g.add_empty() for _ in range(3)]
    assert [node._number for node in nodes] == [0, 1, 2]
    g.remove_node(nodes[1])
    assert nodes[2]._number == 2 and nodes[1]._number == 1
    assert g.add_empty()._number == 3
    assert repr(nodes[2]).startswith("Node(n2,")


def test_the_reads_are_not_on_the_users_graph(device):
    g = gg.Graph(device)
    node = g.add_empty()
    for name in ("topology", "node_of", "embedded_graphs", "shape", "version", "in_body", "holds_other_than"):
        assert not hasattr(g, name), name
    assert not hasattr(node, "number")
    with pytest.raises(TypeError, match=r"not iterable|not a container"):
        node in g  # noqa: B015 (the graph answers no ``in``)

"""What executable graphs, instantiate and update read of a graph, public and read-only: ``Graph.topology()``,
``node_of``, ``embedded_graphs``, ``shape``, ``version``, ``in_body``, ``holds_other_than``, ``node in graph``, and
``Node.number``."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import NodeKind


def test_topology_lists_the_nodes_in_creation_order(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    a = g.add_kernel(K.fill, 1, 4, x, 1, 4)
    b = g.add_empty(after=a)
    topology = g.topology()
    assert [record.kind for record in topology.records] == [NodeKind.KERNEL, NodeKind.EMPTY]
    assert [g.node_of(handle) for handle in topology.handles] == [a, b]
    assert topology.deps_of(1) == (0,) and topology.deps_of(0) == ()
    assert topology.memory is False
    g.add_alloc(4, np.float32)
    assert g.topology().memory is True


def test_node_of_refuses_a_handle_no_longer_in_the_graph(device):
    g = gg.Graph(device)
    a, b = g.add_empty(), g.add_empty()
    handle = g.topology().handles[0]
    assert g.node_of(handle) is a
    g.remove_node(a)
    with pytest.raises(gg.GraphError, match="has no such node any more"):
        g.node_of(handle)
    assert g.node_of(g.topology().handles[0]) is b


def test_embedded_graphs_are_a_child_graphs_and_a_conditional_nodes_bodies(device):
    g = gg.Graph(device)
    child = gg.Graph(device)
    child.add_empty()
    embedding = g.add_child(child)
    switch = g.add_switch(g.condition(), 3)
    empty = g.add_empty()
    handles = g.topology().handles
    assert g.embedded_graphs(handles[0]) == (embedding.params.graph,)
    assert g.embedded_graphs(handles[1]) == switch.bodies and len(switch.bodies) == 3
    assert g.embedded_graphs(handles[2]) == () and empty.kind is NodeKind.EMPTY


def test_in_body_names_a_conditional_nodes_bodies_only(device):
    g = gg.Graph(device)
    child = gg.Graph(device)
    child.add_empty()
    embedded = g.add_child(child).params.graph
    (body,) = g.add_while(g.condition()).bodies
    assert (g.in_body, embedded.in_body, body.in_body) == (False, False, True)


def test_holds_other_than_looks_into_child_graphs(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    g.add_kernel(K.fill, 1, 4, x, 1, 4)
    assert g.holds_other_than(frozenset({NodeKind.KERNEL})) is None
    child = gg.Graph(device)
    child.add_host(lambda: None)
    g.add_child(child)
    kinds = frozenset({NodeKind.KERNEL, NodeKind.GRAPH})
    assert g.holds_other_than(kinds) is NodeKind.HOST
    assert g.holds_other_than(kinds | {NodeKind.HOST}) is None


def test_version_counts_changes_of_the_graph_and_of_graphs_embedded_in_it(device):
    g = gg.Graph(device)
    a = g.add_empty()
    before = g.version
    b = g.add_empty()
    assert g.version > before
    before = g.version
    g.add_dependency(a, b)
    assert g.version > before
    (body,) = g.add_if(g.condition()).bodies
    before = g.version
    body.add_empty()
    assert g.version > before
    before = g.version
    assert (len(g.nodes), len(g.topology().handles), b in g) == (3, 3, True)
    g.shape()
    assert g.version == before  # (reads change nothing)


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
    assert one.shape() == two.shape() != other.shape()
    like = one.shape()
    assert two.shape(like=like) == like and other.shape(like=like) != like
    plain = gg.Graph(device)
    plain.add_empty()
    twin = gg.Graph(device)
    twin.add_empty()
    shape = plain.shape()
    assert twin.shape(like=shape) is shape  # (no child graph, no body: compared where the edges are)


def test_shape_holds_the_bodies(device):
    def build(count: int) -> gg.Graph:
        g = gg.Graph(device)
        for body in g.add_switch(g.condition(), 2).bodies:
            for _ in range(count):
                body.add_empty()
        return g

    assert build(1).shape() == build(1).shape() != build(2).shape()


def test_in_tells_a_node_still_in_its_graph(device):
    g, other = gg.Graph(device), gg.Graph(device)
    a, b = g.add_empty(), g.add_empty()
    elsewhere = other.add_empty()
    assert a in g and b in g and elsewhere not in g and elsewhere in other
    assert "a node" not in g and None not in g
    g.remove_node(a)
    assert a not in g and b in g


def test_node_number_is_kept_through_removals(device):
    g = gg.Graph(device)
    nodes = [g.add_empty() for _ in range(3)]
    assert [node.number for node in nodes] == [0, 1, 2]
    g.remove_node(nodes[1])
    assert nodes[2].number == 2 and nodes[1].number == 1
    assert g.add_empty().number == 3
    assert repr(nodes[2]).startswith("Node(n2,")

"""Editing a graph's nodes: removing a node (cudaGraphDestroyNode) and setting a node's parameters in
the graph (cudaGraphKernelNodeSetParams and its kin), with what HIP's and CUDA's own tests check: the effect at
launch, wrong node kinds, nodes of another graph or removed ones, a node with dependants, graphs with memory nodes,
executable graphs made earlier (they keep what they were made with), clone/find, Params and child graphs."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import NodeKind


def ran(graph: gg.Graph, stream: gg.Stream) -> None:
    with graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)


def chain(device: gg.Device) -> tuple[gg.Graph, gg.Array, list[gg.Node]]:
    """x = [0, 0, 0, 0] then x += 1 three times: nodes fill, inc, inc, inc (x ends at 3)."""
    g = gg.Graph(device)
    x = device.zeros(4, np.float64)
    nodes = [g.add_memset(x, 0.0)]
    for _ in range(3):
        nodes.append(g.add_kernel(K.inc, 1, 4, x, 4, after=nodes[-1]))
    return g, x, nodes


# Removing nodes


def test_removing_a_node_drops_its_work_and_its_edges(device, stream):
    g, x, (fill, a, b, c) = chain(device)
    g.remove_node(b)
    assert g.nodes == (fill, a, c) and len(g) == 3
    assert g.edges == ((fill, a),)  # b's edges went with it: c no longer waits for anything
    assert c.dependencies == () and a.dependents == () and set(g.roots) == {fill, c}
    g.add_dependency(a, c)
    ran(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0))


def test_nodes_keep_their_names_after_a_removal(device):
    g, _, (_fill, a, _b, c) = chain(device)
    g.remove_node(a)
    assert [re.match(r"Node\((n\d+),", repr(n)).group(1) for n in g.nodes] == ["n0", "n2", "n3"]
    new = g.add_empty(after=c)
    assert repr(new).startswith("Node(n4,")
    assert "n2" in g.to_dot() and "n1" not in g.to_dot()


def test_a_removed_node_is_refused_everywhere_with_the_reason(device):
    g, x, (_fill, a, _b, c) = chain(device)
    g.remove_node(a)
    for call in (lambda: g.add_empty(after=a), lambda: g.remove_node(a), lambda: g.add_dependency(a, c),
                 lambda: g.set_params(a, x, 4), lambda: a.params, lambda: a.dependents):
        with pytest.raises(gg.GraphError, match="removed with remove_node"):
            call()
    assert repr(a) == "Node(n1, kernel inc)"  # (repr never fails)


def test_remove_node_refuses_bad_nodes(device):
    g, _, (_fill, *_rest) = chain(device)
    other, _, (theirs, *_rest2) = chain(device)
    with pytest.raises(TypeError, match=r"remove_node\(node\): expected a Node, got int"):
        g.remove_node(3)
    with pytest.raises(gg.GraphError, match="belongs to another graph"):
        g.remove_node(theirs)
    assert len(g) == 4 and len(other) == 4


def test_nodes_of_a_graph_with_memory_nodes_cannot_be_removed(device):
    g = gg.Graph(device)
    alloc = g.add_alloc(4, np.float32)
    empty = g.add_empty(after=alloc)
    g.add_free(alloc, after=empty)
    for node in (empty, alloc):
        with pytest.raises(gg.GraphError, match="allocation or free nodes cannot be removed"):
            g.remove_node(node)
    assert len(g) == 3


def test_an_executable_graph_made_earlier_keeps_a_removed_node(device, stream):
    g, x, (_fill, a, b, c) = chain(device)
    with g.instantiate() as exe:
        g.remove_node(b)
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0))  # all three incs ran
        for call in (lambda: exe.set_params(b, x, 4), lambda: exe.is_enabled(b), lambda: exe.set_enabled(b, False)):
            with pytest.raises(gg.GraphError, match=r"no longer in its graph .it was removed with remove_node"):
                call()
        exe.set_enabled(c, False)  # the others still answer
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0))
        with pytest.raises(gg.GraphUpdateError, match="topology changed"):
            exe.update(g)
    g.add_dependency(a, c)
    ran(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0))


def test_an_update_does_not_bring_back_a_node_removed_from_the_graph_made_from(device, stream):
    # The executable graph's nodes are addressed through the graph it was made from: once the node at a place
    # is removed there, a node at that place of a graph it was updated with is refused by the setters too.
    g, _x, (_fill, _a, b, _c) = chain(device)
    h, y, (_fill2, _a2, b2, c2) = chain(device)
    with g.instantiate() as exe:
        exe.update(h)
        g.remove_node(b)
        with pytest.raises(gg.GraphError, match=r"at the place of .* was removed"):
            exe.set_params(b2, y, 2)
        exe.set_params(c2, y, 2)  # only c2's first two elements are incremented
        K.launch_and_wait(exe, stream)
        np.testing.assert_array_equal(y.to_numpy(), [3.0, 3.0, 2.0, 2.0])


def test_a_node_an_executable_graph_patches_params_through_is_kept_until_it_is_closed(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    value = gg.Param(5)
    node = g.add_kernel(K.fill, 1, 4, x, value, 4)
    exe = g.instantiate()
    with pytest.raises(gg.GraphError, match="patches the node's Params through it; close"):
        g.remove_node(node)
    K.launch_and_wait(exe, stream)
    assert x.to_numpy().tolist() == [5] * 4
    exe.close()
    g.remove_node(node)
    assert len(g) == 0


def test_clone_and_find_after_removals(device):
    g, _, (_fill, a, b, c) = chain(device)
    copy = g.clone()
    g.remove_node(a)
    with pytest.raises(gg.GraphError, match="was removed from the graph this one was cloned from"):
        copy.find(a)
    copy.remove_node(copy.find(b))
    with pytest.raises(gg.GraphError, match=r"counterpart of .* in this clone was removed"):
        copy.find(b)
    assert copy.find(c).kind is NodeKind.KERNEL and len(copy) == 3 and len(g) == 3


def test_removing_a_child_graph_node_retires_the_graph_it_embedded(device, stream):
    child, x, _ = chain(device)
    g = gg.Graph(device)
    node = g.add_child(child)
    inner = node.params.graph
    g.remove_node(node)
    assert "removed with the node that embedded it" in repr(inner)
    for call in (lambda: inner.add_empty(), lambda: inner.nodes, lambda: inner.clone(), lambda: g.add_child(inner)):
        with pytest.raises(gg.GraphError, match="went with it; it can no longer be used"):
            call()
    ran(child, stream)  # the graph copied is its own
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0))


def test_removing_a_node_inside_a_child_graph(device, stream):
    child, x, (_fill, _a, _b, _c) = chain(device)
    g = gg.Graph(device)
    node = g.add_child(child)
    exe = g.instantiate()
    inner = node.params.graph
    inner.remove_node(inner.nodes[3])  # one inc fewer in the copy g embeds
    assert len(inner) == 3 and len(child) == 4
    K.launch_and_wait(exe, stream)  # made earlier: all three incs
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0))
    exe.close()
    ran(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0))


def test_removing_a_conditional_node_frees_its_condition(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.float64)
    freed, kept = g.condition(default=1), g.condition(default=1)
    first = g.add_if(freed)
    body = first.bodies[0]
    body.add_kernel(K.inc, 1, 4, x, 4)
    second = g.add_if(kept, after=first)
    second.bodies[0].add_kernel(K.inc, 1, 2, x, 2)
    g.remove_node(first)
    with pytest.raises(gg.GraphError, match="went with it"):
        body.add_empty()
    with pytest.raises(gg.GraphError, match="read by no conditional node"):
        g.instantiate()
    lone = gg.Graph(device)
    lone.add_if(lone.condition())
    lone.remove_node(lone.nodes[0])  # no conditional node left: CUDA still refuses the unused condition
    lone.add_empty()
    with pytest.raises(gg.GraphError, match="read by no conditional node"):
        lone.instantiate()
    third = g.add_if(freed, after=second)  # the condition may be read by another node now
    third.bodies[0].add_kernel(K.inc, 1, 4, x, 4)
    ran(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), [2.0, 2.0, 1.0, 1.0])


def test_nodes_cannot_change_while_a_capture_records_into_the_graph(device, stream):
    g, x, (_fill, a, _b, c) = chain(device)
    with stream.capture(into=g, after=[c]):
        stream.launch(K.inc, 1, 4, x, 4)
        with pytest.raises(gg.GraphError, match="a capture records into this graph"):
            g.remove_node(a)
        with pytest.raises(gg.GraphError, match="a capture records into this graph"):
            g.set_params(a, x, 2)
    assert len(g) == 5
    ran(g, stream)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 4.0))


# Setting a node's parameters in the graph


def test_set_params_changes_the_graph_and_not_executable_graphs_made_before(device, stream):
    g = gg.Graph(device)
    x = K.f32(device, [1, 2, 3, 4])
    node = g.add_kernel(K.scale, 1, 4, x, 2.0, 4)
    with g.instantiate() as before:
        g.set_params(node, x, 10.0, 4)
        assert node.params.args[1] == 10.0 and "scale" in repr(node)
        K.launch_and_wait(before, stream)
        np.testing.assert_array_equal(x.to_numpy(), [2, 4, 6, 8])  # made before: times 2
        ran(g, stream)
        np.testing.assert_array_equal(x.to_numpy(), [20, 40, 60, 80])
        g.set_params(node, kernel=K.shift, grid=1, block=2)  # another kernel, its arguments kept; two threads
        assert node.params.kernel is K.shift and "shift" in repr(node)
        ran(g, stream)
        np.testing.assert_array_equal(x.to_numpy(), [30, 50, 60, 80])
        before.update(g)  # the graph's new parameters, taken by an update
        K.launch_and_wait(before, stream)
        np.testing.assert_array_equal(x.to_numpy(), [40, 60, 60, 80])


def test_the_other_setters_of_a_graph(device, stream):
    g = gg.Graph(device)
    x, y = K.f32(device, [1, 2, 3, 4]), device.zeros(4, np.float32)
    copy = g.add_memcpy(y, x)
    memset = g.add_memset(x, 0.0, after=copy)
    seen = []
    host = g.add_host(seen.append, "old", after=memset)
    e1, e2 = device.event(), device.event()
    record = g.add_event_record(e1, after=host)
    z = K.f32(device, [5, 6, 7, 8])
    g.set_memcpy(copy, y, z)
    g.set_memset(memset, z, 1.0, 2)
    g.set_host(host, seen.append, "new")
    g.set_event(record, e2)
    assert record.params.event is e2
    ran(g, stream)
    assert seen == ["new"] and e2.done
    np.testing.assert_array_equal(y.to_numpy(), [5, 6, 7, 8])
    np.testing.assert_array_equal(z.to_numpy(), [1, 1, 7, 8])
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 4])


def test_executable_graphs_made_before_keep_what_each_setter_changed(device, stream):
    g = gg.Graph(device)
    x, y, z = K.f32(device, [1, 2, 3, 4]), device.zeros(4, np.float32), K.f32(device, [5, 6, 7, 8])
    copy = g.add_memcpy(y, x)
    w = device.zeros(4, np.float32)
    memset = g.add_memset(w, 1.0, after=copy)
    seen = []
    host = g.add_host(seen.append, "old", after=memset)
    source = device.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    plane = device.zeros((3, 4), np.float32)
    box = g.add_memcpy(plane, source, shape=(2, 2), after=host)
    flags = device.zeros(2, np.uint64)
    ops = g.add_mem_ops([gg.WriteValue(flags, 1)], after=box)
    with g.instantiate() as before:
        g.set_memcpy(copy, y, z)
        g.set_memset(memset, w, 2.0, 2)
        g.set_host(host, seen.append, "new")
        g.set_memcpy(box, plane, source, shape=(2, 2), src_origin=(1, 1))
        g.set_mem_ops(ops, [gg.WriteValue(flags, 7, index=1)])
        K.launch_and_wait(before, stream)  # made before the changes: all it was made with
        assert seen == ["old"]
        np.testing.assert_array_equal(y.to_numpy(), [1, 2, 3, 4])
        np.testing.assert_array_equal(w.to_numpy(), [1, 1, 1, 1])
        np.testing.assert_array_equal(plane.to_numpy()[:2, :2], [[0, 1], [4, 5]])
        np.testing.assert_array_equal(flags.to_numpy(), [1, 0])
    ran(g, stream)  # made after: all the changes
    assert seen == ["old", "new"]
    np.testing.assert_array_equal(y.to_numpy(), [5, 6, 7, 8])
    np.testing.assert_array_equal(w.to_numpy(), [2, 2, 1, 1])
    np.testing.assert_array_equal(plane.to_numpy()[:2, :2], [[5, 6], [9, 10]])
    np.testing.assert_array_equal(flags.to_numpy(), [1, 7])


def test_set_event_on_a_graphs_record_node(device, stream):
    """cudaGraphEventRecordNodeSetEvent: an executable graph made before records the old event, one made after
    the new one (each is seen recorded, not yet done, while a host node before the record blocks)."""
    gate = threading.Event()
    old, new = device.event(), device.event()
    g = gg.Graph(device)
    record = g.add_event_record(old, after=g.add_host(gate.wait, 10))
    with g.instantiate() as before, K.garbage_held(device):  # (no release may wait for the device meanwhile)
        g.set_event(record, new)
        assert record.params.event is new
        after = g.instantiate()
        before.launch(stream)
        try:
            assert not old.done and new.done  # (new: never recorded yet)
        finally:
            gate.set()
        stream.synchronize()
    gate.clear()
    with after, K.garbage_held(device):
        after.launch(stream)
        try:
            assert not new.done
        finally:
            gate.set()
        stream.synchronize()
    assert old.done and new.done


@pytest.mark.overlap  # a second stream stays blocked while the first runs
def test_set_event_on_a_graphs_wait_node(device, stream):
    """cudaGraphEventWaitNodeSetEvent: an executable graph made after waits for the new event; one made before
    still waits for the old one, which was never recorded, so it runs at once."""
    gate = threading.Event()
    x = K.f32(device, [1, 2, 3, 4])
    g = gg.Graph(device)
    wait = g.add_event_wait(device.event())
    g.add_kernel(K.scale, 1, 4, x, 2.0, 4, after=wait)
    blocked, reader = device.stream(), device.stream()
    host = device.pinned(4, np.float32)
    # Nothing may wait for the device while the host function blocks (on CUDA, a pageable copy waits for the
    # blocked host-function thread, and so does a collected object's freed memory): the copies are pinned, and
    # the cycle collector is held off.
    before = g.instantiate()
    with before, K.garbage_held(device):
        blocked.host(gate.wait, 10)
        late = blocked.record()
        g.set_event(wait, late)
        assert wait.params.event is late
        after = g.instantiate()
        try:
            before.launch(stream)
            stream.synchronize()
            assert not late.done  # before did not wait for late
            after.launch(stream)
            reader.memcpy(host, x)
            reader.synchronize()
            assert not stream.done  # after waits for late
        finally:
            gate.set()
        np.testing.assert_array_equal(host, [2, 4, 6, 8])  # before scaled once; after still waits for late
        stream.synchronize()
        after.close()
    blocked.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [4, 8, 12, 16])


def test_setters_refuse_wrong_kinds_nodes_and_arguments(device):
    g = gg.Graph(device)
    x = K.f32(device, [1, 2, 3, 4])
    kernel = g.add_kernel(K.scale, 1, 4, x, 2.0, 4)
    alloc = gg.Graph(device).add_alloc(4, np.float32)
    with pytest.raises(gg.GraphError, match=r"set_memcpy\(Node\(n0, kernel scale\)\): the node is a kernel node, "
                                            r"not a memcpy node"):
        g.set_memcpy(kernel, x, x)
    with pytest.raises(gg.GraphError, match="not a kernel node"):
        alloc.graph.set_params(alloc, x)
    with pytest.raises(gg.GraphError, match="belongs to another graph"):
        g.set_params(alloc, x)
    with pytest.raises(TypeError, match=r"set_host\(fn\): expected a callable, got int"):
        g.set_host(g.add_host(print), 3)
    with pytest.raises(TypeError, match=r"set_event\(event\): expected an Event, got str"):
        g.set_event(g.add_event_record(device.event()), "e")
    with pytest.raises(TypeError, match=r"set_params\(kernel\): expected a Kernel, got str"):
        g.set_params(kernel, kernel="scale")
    with pytest.raises(ValueError, match=r"0 bytes|at least one"):
        g.set_memcpy(g.add_memcpy(x, x), x, x, 0)
    assert kernel.params.args[1] == 2.0  # nothing refused changed anything


def test_a_param_set_into_the_graph_is_patched_by_executable_graphs_made_after(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    node = g.add_kernel(K.fill, 1, 4, x, 1, 4)
    value = gg.Param(7)
    g.set_params(node, x, value, 4)
    with g.instantiate() as exe:
        K.launch_and_wait(exe, stream)
        assert x.to_numpy().tolist() == [7] * 4
        value.value = 9
        K.launch_and_wait(exe, stream)
        assert x.to_numpy().tolist() == [9] * 4


def test_an_executable_graph_made_before_keeps_patching_the_param_a_set_replaced(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    old = gg.Param(5)
    node = g.add_kernel(K.fill, 1, 4, x, old, 4)
    with g.instantiate() as before:
        new = gg.Param(8)
        g.set_params(node, x, new, 4)  # another Param
        old.value = 6
        K.launch_and_wait(before, stream)
        assert x.to_numpy().tolist() == [6] * 4
        ran(g, stream)
        assert x.to_numpy().tolist() == [8] * 4
        g.set_params(node, x, 3, 4)  # no Param at all
        old.value, new.value = 7, 9
        K.launch_and_wait(before, stream)
        assert x.to_numpy().tolist() == [7] * 4
        ran(g, stream)
        assert x.to_numpy().tolist() == [3] * 4


def test_a_param_cannot_be_set_into_a_conditional_body(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    node = g.add_while(g.condition(default=0))
    inner = node.bodies[0].add_kernel(K.fill, 1, 4, x, 1, 4)
    with pytest.raises(gg.GraphError, match=r"set_params\(.*\): .* is the body of a conditional node, and a Param"):
        node.bodies[0].set_params(inner, x, gg.Param(3), 4)


def test_setting_a_node_of_a_child_graph_changes_its_owner(device, stream):
    child = gg.Graph(device)
    x = device.zeros(4, np.int32)
    child.add_kernel(K.fill, 1, 4, x, 1, 4)
    g = gg.Graph(device)
    node = g.add_child(child)
    before = g.instantiate()
    inner = node.params.graph
    inner.set_params(inner.nodes[0], x, 6, 4)
    K.launch_and_wait(before, stream)
    assert x.to_numpy().tolist() == [1] * 4  # made before the change
    capturing = device.stream()
    with pytest.raises(gg.CaptureError, match="changed after it was instantiated"):
        with capturing.capture():
            before.launch(capturing)
    before.close()
    ran(g, stream)
    assert x.to_numpy().tolist() == [6] * 4
    assert child.nodes[0].params.args[1] == 1  # the graph copied keeps its own


def test_a_clone_takes_the_parameters_set(device, stream):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    node = g.add_kernel(K.fill, 1, 4, x, 1, 4)
    g.set_params(node, x, 4, 4)
    copy = g.clone()
    assert copy.find(node).params.args[1] == 4
    ran(copy, stream)
    assert x.to_numpy().tolist() == [4] * 4


def test_set_child_graph_embeds_a_copy_of_another_graph(device, stream):
    first, x, _ = chain(device)  # x ends at 3
    second = gg.Graph(device)
    y = device.zeros(4, np.int32)
    second.add_kernel(K.fill, 1, 4, y, 8, 4)
    g = gg.Graph(device)
    node = g.add_child(first)
    inner = node.params.graph
    before = g.instantiate()
    g.set_child_graph(node, second)  # another topology
    assert len(node.params.graph) == 1 and node.params.graph is not inner
    with pytest.raises(gg.GraphError, match="set_child_graph gave another graph"):
        inner.nodes
    second.add_empty()  # the copy was taken at the call
    ran(g, stream)
    assert y.to_numpy().tolist() == [8] * 4 and x.to_numpy().tolist() == [0] * 4
    K.launch_and_wait(before, stream)  # made before: the first graph's work
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0))
    before.close()
    with pytest.raises(gg.GraphError, match="a graph cannot contain itself"):
        g.set_child_graph(node, g)
    with pytest.raises(TypeError, match=r"set_child_graph\(graph\): expected a Graph, got int"):
        g.set_child_graph(node, 1)
    memory = gg.Graph(device)
    memory.add_alloc(4, np.float32)
    with pytest.raises(gg.GraphError, match="allocation or free nodes cannot be used as a child graph"):
        g.set_child_graph(node, memory)
    with pytest.raises(gg.GraphError, match="not a graph node"):
        g.set_child_graph(g.add_empty(), second)


def test_an_update_refuses_params_at_the_place_of_a_removed_node(device, stream):
    g, x, (_fill, _a, b, c) = chain(device)
    with g.instantiate() as exe:
        g.remove_node(c)
        y = device.zeros(4, np.int32)
        late = g.add_kernel(K.fill, 1, 4, y, gg.Param(5), 4)  # at c's place, taking a Param
        g.add_dependency(b, late)  # (c's edge: the same shape as the executable graph's)
        with pytest.raises(gg.GraphUpdateError, match=r"takes Params, and the node at its place .* was removed"):
            exe.update(g)
        with pytest.raises(gg.GraphError, match="not a node of the graph this executable graph was made from"):
            exe.set_params(late, y, 6, 4)  # added after: not the removed node's (whatever its handle)
        K.launch_and_wait(exe, stream)  # unchanged by the refusals
        np.testing.assert_array_equal(x.to_numpy(), np.full(4, 3.0))


def test_find_never_pairs_a_node_added_after_the_clone(device):
    g, _, (_fill, _a, b, c) = chain(device)
    copy = g.clone()
    for _ in range(8):  # (the CUDA driver gives a new node the handle of the one removed just before)
        g.remove_node(c)
        c = g.add_kernel(K.inc, 1, 4, device.zeros(4, np.float64), 4, after=b)
        with pytest.raises(gg.GraphError, match="was added to the original graph after this clone was made"):
            copy.find(c)
    assert copy.find(b).kind is NodeKind.KERNEL


def test_setters_keep_a_node_on_its_device(pair, stream):
    first, second = pair
    g = gg.Graph(first)
    x, y = first.zeros(4, np.int32), second.zeros(4, np.int32)
    memset = g.add_memset(x, 1)
    with pytest.raises(gg.GraphError, match=r"the node sets memory of .*:0, where it runs, and dst is on"):
        g.set_memset(memset, y, 1)
    record = g.add_event_record(first.event())
    with pytest.raises(ValueError, match=r"set_event\(event\): .* belongs to .*, not"):
        g.set_event(record, second.event())
    child = gg.Graph(first)
    child.add_empty()
    node = g.add_child(child)
    with pytest.raises(gg.GraphError, match="set_child_graph: the child graph is on"):
        g.set_child_graph(node, gg.Graph(second))


def test_a_captured_function_cannot_edit_the_graph_its_capture_records(device):
    x = device.zeros(4, np.float64)

    @gg.captured
    def step(x):
        gg.current_stream(device).launch(K.inc, 1, 4, x, 4)
        cap = gg.current_stream(device).active_capture
        cap.graph.remove_node(cap.graph.nodes[0])

    with pytest.raises(gg.GraphError, match="a capture records into this graph"):
        step(x)
    assert step.stats.replays == 0

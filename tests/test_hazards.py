"""Graph.hazards(): the pairs of nodes that touch the same memory, at least one writing, with no edge ordering them
(kernels by their const pointers, copies and memsets by their exact rows, host nodes, memory operations, graph
memory's lifetimes, child graphs, conditional bodies, captures), the examples' graphs, and the check at instantiate
(check_hazards=, $GPUGRAPH_CHECK_HAZARDS)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import pathlib
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _hazard_order
from gpugraph._hazard_order import WINDOW
from gpugraph._hazards import _accesses
from gpugraph._signature import parse_signature
from gpugraph.examples import (
    async_streams,
    capture_graph,
    captured,
    conditional_solver,
    data_parallel,
    dynamic_parameters,
    explicit_graph,
)

WRITE_WRITE, READ_WRITE, LIFETIME = "write/write", "read/write", "outside an allocation's lifetime"


def found(graph: gg.Graph) -> list[tuple]:
    """Each hazard as (kind, nodes, accesses, byte range)."""
    return [(h.kind, h.nodes, h.accesses, h.byte_range) for h in graph.hazards()]


# Kernels


def test_const_pointers_are_read_the_others_written(device):
    x, y, z = device.zeros(256), device.zeros(256), device.zeros(256)
    g = gg.Graph(device)
    read_1 = g.add_kernel(K.add, 1, 256, y, x, x, 256)  # add(float* out, const float* a, const float* b, int n)
    read_2 = g.add_kernel(K.add, 1, 256, z, x, x, 256)
    write = g.add_kernel(K.scale, 1, 256, x, 2.0, 256)  # scale(float* x, float f, int n)
    again = g.add_kernel(K.scale, 1, 256, y, 2.0, 256)
    assert found(g) == [(READ_WRITE, (read_1, write), ("read", "write"), (0, 1024)),
                        (WRITE_WRITE, (read_1, again), ("write", "write"), (0, 1024)),
                        (READ_WRITE, (read_2, write), ("read", "write"), (0, 1024))]
    hazard = g.hazards()[0]
    assert hazard.array is x and hazard.edge == (read_1, write) and hazard.where == (None, None)
    assert str(hazard) == (f"{read_1!r} reads and {write!r} writes bytes 0 to 1024 of {x!r} with no edge ordering "
                           f"them (read/write): add an edge from {read_1!r} to {write!r}")
    for a, b in ((read_1, write), (read_2, write), (read_1, again)):
        g.add_dependency(a, b)
    assert g.hazards() == []


def test_which_pointer_parameters_point_at_const_memory():
    """What a pointer parameter points at is read-only where `const` qualifies it (before the one `*`, between the last
    two, or after the last for an array); a const pointer to writable memory and a typedef's pointer are written."""
    source = """typedef float* floats;
    __global__ void k(const float* a, float const* b, float* c, float* const d, float* const* e, const float** f,
                      const float g[], float* const h[], const float* i[], const floats j, int n){}"""
    read_only = {p.name: p.const for p in parse_signature(source, "k")}
    assert read_only == {"a": True, "b": True, "c": False, "d": False, "e": True, "f": False, "g": True, "h": True,
                         "i": False, "j": False, "n": False}


def test_a_path_of_edges_of_any_kind_orders_two_nodes(device):
    x = device.zeros(64)
    g = gg.Graph(device)
    first = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    middle = g.add_empty(after=first)
    last = g.add_kernel(K.scale, 1, 64, x, 2.0, 64, after=middle)
    other = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    g.add_dependency(last, other, kind="programmatic")  # (kernels only: counts as an order like a full edge)
    assert g.hazards() == []
    g.remove_dependency(last, other)
    assert [h.nodes for h in g.hazards()] == [(first, other), (last, other)]


def test_a_param_counts_as_the_array_it_points_at_now(device):
    x, z = device.zeros(64), device.zeros(64)
    pointer = gg.Param(x)
    g = gg.Graph(device)
    through_param = g.add_kernel(K.scale, 1, 64, pointer, 2.0, 64)
    direct = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    assert found(g) == [(WRITE_WRITE, (through_param, direct), ("write", "write"), (0, 256))]
    pointer.value = z
    assert g.hazards() == []


# Copies and memsets: their exact bytes


def test_one_dimensional_copies_and_memsets(device):
    x, y, z = device.zeros(64), device.zeros(64), device.zeros(64)
    g = gg.Graph(device)
    copy = g.add_memcpy(y, x, nbytes=128)  # writes bytes 0-128 of y, reads those of x
    memset = g.add_memset(y, 1.0, count=16)  # writes bytes 0-64 of y
    tail = g.add_memset(y, 1.0, count=16)
    kernel = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    assert found(g) == [(WRITE_WRITE, (copy, memset), ("write", "write"), (0, 64)),
                        (WRITE_WRITE, (copy, tail), ("write", "write"), (0, 64)),
                        (READ_WRITE, (copy, kernel), ("read", "write"), (0, 128)),
                        (WRITE_WRITE, (memset, tail), ("write", "write"), (0, 64))]
    apart = gg.Graph(device)
    apart.add_memcpy(z, x, nbytes=128)
    apart.add_memcpy(z, y, nbytes=128)
    assert [h.byte_range for h in apart.hazards()] == [(0, 128)]  # z written twice; x and y only read


def test_two_dimensional_boxes_overlap_by_their_rows_not_their_span(device):
    x, y = device.zeros((8, 16)), device.zeros((8, 16))  # rows of 64 bytes
    g = gg.Graph(device)
    copy = g.add_memcpy(y, x, shape=(2, 4), dst_origin=(1, 2))  # rows 1-2, bytes 8-24 of each: 72-88, 136-152
    between = g.add_memset(y, 1.0, shape=(2, 4), origin=(1, 8))  # 96-112, 160-176: inside the copy's span only
    assert g.hazards() == []
    crossing = g.add_memset(y, 1.0, shape=(3, 2), origin=(2, 3))  # 140-148, 204-212, 268-276
    assert found(g) == [(WRITE_WRITE, (copy, crossing), ("write", "write"), (140, 148))]
    g.add_dependency(copy, crossing)
    assert g.hazards() == []
    reader = g.add_memcpy(x, y, shape=(1, 4), src_origin=(2, 2), dst_origin=(7, 0))  # reads bytes 136-152 of y
    assert found(g) == [(READ_WRITE, (copy, reader), ("write", "read"), (136, 152)),
                        (READ_WRITE, (crossing, reader), ("write", "read"), (140, 148))]
    assert between not in {n for h in g.hazards() for n in h.nodes}


def test_three_dimensional_copies_overlap_by_their_rows(device):
    src, dst = device.zeros((4, 4, 8)), device.zeros((4, 4, 8))  # rows of 32 bytes, slices of 128
    g = gg.Graph(device)
    box = g.add_memcpy(dst, src, shape=(2, 2, 2), dst_origin=(1, 1, 2))  # 168-176, 200-208, 296-304, 328-336
    gap = g.add_memcpy(dst, src, shape=(1, 1, 2), dst_origin=(1, 3, 2))  # 232-240: in the box's span, not its rows
    assert g.hazards() == []
    hit = g.add_memcpy(dst, src, shape=(1, 1, 2), dst_origin=(2, 2, 2))  # 328-336
    assert found(g) == [(WRITE_WRITE, (box, hit), ("write", "write"), (328, 336))]
    assert gap not in g.hazards()[0].nodes


# Host nodes and memory operations


def test_host_nodes_read_and_write_their_arrays_unless_they_declare(device):
    host = np.zeros(32, np.float32)
    other = np.zeros(32, np.float32)
    g = gg.Graph(device)
    undeclared_1 = g.add_host(np.copyto, host, 1.0)
    undeclared_2 = g.add_host(np.copyto, host, 2.0)
    reader_1 = g.add_host(print, reads=host)
    reader_2 = g.add_host(print, reads=[host])
    elsewhere = g.add_host(np.copyto, host, 1.0, writes=[other])  # declared: touches only `other`
    assert found(g) == [(WRITE_WRITE, (undeclared_1, undeclared_2), ("write", "write"), (0, 128)),
                        (READ_WRITE, (undeclared_1, reader_1), ("write", "read"), (0, 128)),
                        (READ_WRITE, (undeclared_1, reader_2), ("write", "read"), (0, 128)),
                        (READ_WRITE, (undeclared_2, reader_1), ("write", "read"), (0, 128)),
                        (READ_WRITE, (undeclared_2, reader_2), ("write", "read"), (0, 128))]
    assert g.hazards()[0].array is host
    assert elsewhere.params.reads == () and elsewhere.params.writes == (other,)
    view = g.add_host(np.copyto, other[8:16], 0.0)  # a view of `other`: its bytes 32-64
    assert found(g)[-1] == (WRITE_WRITE, (elsewhere, view), ("write", "write"), (32, 64))


def test_host_memory_a_copy_reads_and_a_host_node_writes(device):
    host, target = np.zeros(16, np.float32), device.zeros(16)
    g = gg.Graph(device)
    fill = g.add_host(np.copyto, host, 1.0)
    upload = g.add_memcpy(target, host)
    assert found(g) == [(READ_WRITE, (fill, upload), ("write", "read"), (0, 64))]
    g.add_dependency(fill, upload)
    assert g.hazards() == []


def test_memory_operations_touch_their_element(device):
    flags = device.zeros(4, np.int32)
    g = gg.Graph(device)
    write = g.add_mem_ops(gg.WriteValue(flags, 1, index=2))
    wait_same = g.add_mem_ops(gg.WaitValue(flags, 1, index=2))
    g.add_mem_ops(gg.WaitValue(flags, 1, index=1))  # another element
    assert found(g) == [(READ_WRITE, (write, wait_same), ("write", "read"), (8, 12))]


# Graph memory


def test_graph_memory_outside_its_lifetime(device):
    g = gg.Graph(device)
    alloc = g.add_alloc(256, np.float32)
    kernel = g.add_kernel(K.scale, 1, 256, alloc.array, 2.0, 256)  # not after the allocation
    free = g.add_free(alloc, after=alloc)  # nor before the free
    assert found(g) == [(LIFETIME, (alloc, kernel), ("allocate", "write"), (0, 1024)),
                        (LIFETIME, (kernel, free), ("write", "free"), (0, 1024))]
    first, second = g.hazards()
    assert (first.edge, second.edge, first.backwards) == ((alloc, kernel), (kernel, free), False)
    assert str(first).startswith(f"{kernel!r} writes bytes 0 to 1024 of {alloc.array!r} outside its allocation's "
                                 f"lifetime: it is not ordered after {alloc!r}, which allocates it; add an edge")
    g.add_dependency(alloc, kernel)
    g.add_dependency(kernel, free)
    assert g.hazards() == []


def test_graph_memory_used_the_wrong_way_round(device):
    g = gg.Graph(device)
    alloc = g.add_alloc(64, np.float32)
    free = g.add_free(alloc, after=alloc)
    late = g.add_kernel(K.scale, 1, 64, alloc.array, 2.0, 64, after=free)  # (a memset there is refused at the add)
    (hazard,) = g.hazards()
    assert (hazard.kind, hazard.nodes, hazard.accesses, hazard.backwards) == (LIFETIME, (late, free),
                                                                              ("write", "free"), True)
    assert f"it runs after {free!r}, which frees it; it must run the other way round" in str(hazard)
    early = gg.Graph(device)
    alloc = early.add_alloc(64, np.float32)
    use = early.add_memset(alloc.array, 0.0)
    early.add_dependency(use, alloc)
    (hazard,) = early.hazards()
    assert (hazard.nodes, hazard.accesses, hazard.edge, hazard.backwards) == ((alloc, use), ("allocate", "write"),
                                                                              (alloc, use), True)
    assert f"it runs before {alloc!r}, which allocates it; it must run the other way round" in str(hazard)


def test_an_address_given_again_after_a_free_is_two_lifetimes(device):
    g = gg.Graph(device)
    first = g.add_alloc(256, np.float32)
    use_first = g.add_kernel(K.scale, 1, 256, first.array, 2.0, 256, after=first)
    free_first = g.add_free(first, after=use_first)
    second = g.add_alloc(256, np.float32, after=free_first)  # (CUDA and the CPU backend may give it first's address)
    use_second = g.add_kernel(K.scale, 1, 256, second.array, 2.0, 256, after=second)
    g.add_free(second, after=use_second)
    assert g.hazards() == []


# Child graphs, conditional bodies, captures


def test_a_child_graphs_nodes_are_ordered_as_their_node(device):
    x = device.zeros(64)
    inner = gg.Graph(device)
    inner.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    g = gg.Graph(device)
    child = g.add_child(inner)
    outer = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    (hazard,) = g.hazards()
    copied = child.params.graph.nodes[0]
    assert (hazard.nodes, hazard.edge, hazard.inside) == ((copied, outer), (child, outer), ((child,), ()))
    assert str(hazard).startswith(f"{copied!r} inside {child!r} writes and {outer!r} writes")
    assert str(hazard).endswith(f"add an edge from {child!r} to {outer!r}")
    g.add_dependency(child, outer)
    assert g.hazards() == []
    twice = gg.Graph(device)
    a = twice.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    b = twice.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    nested = gg.Graph(device).add_child(twice)
    assert [h.nodes for h in nested.graph.hazards()] == [tuple(nested.params.graph.nodes)]
    assert [h.nodes for h in twice.hazards()] == [(a, b)]


def test_conditional_bodies_run_apart_and_as_their_node(device):
    x, flag = device.zeros(64), device.zeros(1, np.uint32)
    g = gg.Graph(device)
    condition = g.condition(default=1)
    setter = g.add_kernel(K.set_flag, 1, 1, flag, 1)
    branch = g.add_if(condition, has_else=True, after=setter)
    then, otherwise = branch.bodies
    in_then = then.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    in_else = otherwise.add_kernel(K.scale, 1, 64, x, 3.0, 64)  # never runs with in_then: no hazard
    assert g.hazards() == []
    loop = g.add_while(g.condition(), after=setter)  # not ordered with the if node
    first, second = (loop.bodies[0].add_kernel(K.scale, 1, 64, x, 2.0, 64) for _ in range(2))
    switch = g.add_switch(g.condition(), 2, after=[branch, loop])
    for body in switch.bodies:
        body.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    hazards = g.hazards()
    assert [(h.nodes, h.edge) for h in hazards] == [
        ((in_then, first), (branch, loop)), ((in_then, second), (branch, loop)),
        ((in_else, first), (branch, loop)), ((in_else, second), (branch, loop)),
        ((first, second), (first, second))]
    assert hazards[0].inside == ((branch,), (loop,))
    for hazard in (hazards[4], hazards[0]):  # (the fix's edge, in the graph that holds both)
        hazard.edge[0].graph.add_dependency(*hazard.edge)
    assert g.hazards() == []


def test_an_empty_child_graph_or_body_orders_as_its_node(device):
    x = device.zeros(64)
    g = gg.Graph(device)
    first = g.add_kernel(K.scale, 1, 64, x, 2.0, 64)
    child = g.add_child(gg.Graph(device), after=first)
    branch = g.add_if(g.condition(), has_else=True, after=child)
    g.add_kernel(K.scale, 1, 64, x, 2.0, 64, after=branch)
    assert g.hazards() == []
    memory = g.add_alloc(64, np.float32)  # (graph memory's lifetime is ordered as well with empty bodies about)
    g.add_free(memory, after=g.add_memset(memory.array, 0.0, after=memory))
    assert g.hazards() == []


def test_a_capture_forked_through_events(device):
    x = device.zeros(64)
    main, side = device.stream(), device.stream()
    with main.capture() as cap:
        side.wait(main.record())  # fork
        main.launch(K.scale, 1, 64, x, 2.0, 64)
        side.launch(K.scale, 1, 64, x, 3.0, 64)  # not after main's launch
        main.wait(side.record())  # join
    kernels = [n for n in cap.graph.nodes if n.kind is gg.NodeKind.KERNEL]
    assert found(cap.graph) == [(WRITE_WRITE, tuple(kernels), ("write", "write"), (0, 256))]
    with main.capture() as cap:
        side.wait(main.record())
        main.launch(K.scale, 1, 64, x, 2.0, 64)
        side.wait(main.record())  # the side stream waits for the first launch
        side.launch(K.scale, 1, 64, x, 3.0, 64)
        main.wait(side.record())
    assert cap.graph.hazards() == []


def test_a_captured_collective_reads_its_send_buffer_and_writes_its_receive_buffer(device):
    """A collective beside a kernel, unordered: reading what it sends is no hazard, writing what it receives is (on
    CUDA NCCL's kernels are another library's nodes, which Graph.hazards does not see)."""
    if device.backend != "cpu":
        pytest.skip("on CUDA a collective's nodes are NCCL's kernels, which Graph.hazards does not see")
    (comm,) = gg.communicators([device])
    try:
        send, recv, c = device.zeros(64, np.float32), device.zeros(64, np.float32), device.zeros(64, np.float32)
        main, side = device.stream(), device.stream()
        for target, expected in ((send, []), (recv, [READ_WRITE])):
            with main.capture() as cap:
                side.wait(main.record())
                comm.all_reduce(send, recv, stream=main)
                side.launch(K.add, 1, 64, c, target, target, 64)  # add(float* out, const float* a, const float* b, n)
                main.wait(side.record())
            assert [hazard.kind for hazard in cap.graph.hazards()] == expected
    finally:
        comm.close()


def test_capture_add_host_declares_what_it_touches(device):
    host = np.zeros(8, np.float32)
    stream = device.stream()
    with stream.capture() as cap:
        node = cap.add_host(print, reads=host)
    assert (node.params.reads, node.params.writes) == ((host,), ())


# The examples' graphs report nothing; the ROCm page's program's graph, as the page has it, reports its dropped edge


def test_the_examples_graphs_have_no_missing_edge(device):
    host = np.zeros(explicit_graph.ARRAY_SIZE)
    assert explicit_graph.build(device, host).hazards() == []
    assert capture_graph.capture(device.stream(), host).hazards() == []
    assert conditional_solver.build(conditional_solver.Problem(device)).hazards() == []
    setup, stream_a, stream_b = async_streams._Setup(device), device.stream(), device.stream()
    with stream_a.capture() as cap:  # the example's graph()
        stream_b.wait(stream_a.record())
        async_streams._events_iteration(setup, stream_a, stream_b)
    assert cap.graph.hazards() == []
    buffers, stream = dynamic_parameters.Buffers(device), device.stream()
    with stream.capture() as cap:  # the example's param()
        dynamic_parameters.enqueue_iteration(stream, buffers.input, buffers.ping, buffers.pong,
                                             [gg.Param(1.0) for _ in range(4)])
    assert len(cap.graph) == 8 and cap.graph.hazards() == []
    ones, square = device.zeros((4, 4), np.int64), device.zeros((16, 16), np.float32)
    with stream.capture() as cap, gg.use_stream(stream):  # what @captured captures of each function
        captured.f.__wrapped__(ones)
    assert cap.graph.hazards() == []
    with stream.capture() as cap, gg.use_stream(stream):
        captured.add_sin_cos.__wrapped__(square, 3)
    assert len(cap.graph) == 9 and cap.graph.hazards() == []


def test_the_data_parallel_examples_graph_has_no_missing_edge(device):
    """The one graph of a training step over every device of the backend (forked streams, collectives)."""
    if device.backend != "cpu" and importlib.util.find_spec("nccl") is None:
        pytest.skip(f"{device.backend}: collectives need nccl4py (pip install '.[nccl]' in a gpugraph checkout)")
    devices = [gg.Device(f"{device.backend}:{i}") for i in range(device._backend.device_count())]
    comms = gg.communicators(devices)
    try:
        shards = data_parallel.make_shards(len(devices))
        replicas = [data_parallel.Replica(comm, x, y) for comm, (x, y) in zip(comms, shards)]
        graph = data_parallel.capture_step(replicas)
        assert len(graph) >= 4 * len(devices) and graph.hazards() == []
    finally:
        for comm in comms:
            comm.close()


def graph_as_the_page_has_it(device: gg.Device, host: np.ndarray) -> tuple[gg.Graph, gg.Node, gg.Node, gg.Node]:
    """The ROCm page's program's graph (the explicit_graph example) with kernelC waiting for kernelA alone (the page's
    dependency count of 1)."""
    g = gg.Graph(device)
    alloc_a = g.add_alloc(explicit_graph.ARRAY_SIZE, np.float64)
    alloc_b = g.add_alloc(explicit_graph.ARRAY_SIZE, np.int32)
    fill = g.add_host(explicit_graph.set_vector, host, explicit_graph.INIT_VALUE)
    to_device = g.add_memcpy(alloc_a.array, host, after=(alloc_a, fill))
    node_a = g.add_kernel(explicit_graph.kernelA, 1024, 1024, alloc_a.array, explicit_graph.ARRAY_SIZE, after=to_device)
    node_b = g.add_kernel(explicit_graph.kernelB, 1024, 1024, alloc_b.array, explicit_graph.ARRAY_SIZE, after=alloc_b)
    node_c = g.add_kernel(explicit_graph.kernelC, 1024, 1024, alloc_a.array, alloc_b.array, explicit_graph.ARRAY_SIZE,
                          after=node_a)
    to_host = g.add_memcpy(host, alloc_a.array, after=node_c)
    g.add_free(alloc_a, after=to_host)
    g.add_free(alloc_b, after=(node_b, node_c))
    return g, alloc_b, node_b, node_c


def test_the_seed_graph_without_kernel_cs_second_edge(device):
    g, alloc_b, node_b, node_c = graph_as_the_page_has_it(device, np.zeros(explicit_graph.ARRAY_SIZE))
    # kernelC reads B with nothing ordering it after kernelB, which writes B, nor after B's allocation
    assert found(g) == [(LIFETIME, (alloc_b, node_c), ("allocate", "read"), (0, 4 * explicit_graph.ARRAY_SIZE)),
                        (READ_WRITE, (node_b, node_c), ("write", "read"), (0, 4 * explicit_graph.ARRAY_SIZE))]
    with pytest.raises(gg.HazardError) as refused:
        g.instantiate(check_hazards=True)
    assert str(refused.value) == (f"instantiate: a missing edge: {g.hazards()[0]}; and 1 more hazard (graph.hazards() "
                                  f"lists them) (set GPUGRAPH_CHECK_HAZARDS=1 before gpugraph is imported to have the "
                                  f"lines that added the nodes)")
    assert refused.value.hazards == g.hazards() and isinstance(refused.value, gg.GraphError)
    g.add_dependency(node_b, node_c)
    with g.instantiate(check_hazards=True):  # (a graph with memory nodes has one executable graph at a time: the
        pass                                  # refused instantiate made none)


# Many accesses to one memory: compared in groups


def test_accesses_ordered_before_a_later_one_are_compared_as_a_group(device):
    """Accesses ordered before a later one that overlaps them are compared with those after as one group (by a node
    that each is ordered before); a node not ordered after that one is compared with each, so with each group in it."""
    x = device.zeros(64)
    g = gg.Graph(device)
    chain = [g.add_kernel(K.scale, 1, 64, x, 2.0, 64)]
    for _ in range(39):
        chain.append(g.add_kernel(K.scale, 1, 64, x, 2.0, 64, after=chain[-1]))
    assert g.hazards() == []
    stray = g.add_kernel(K.scale, 1, 64, x, 2.0, 64, after=chain[9])  # after the first ten only
    assert found(g) == [(WRITE_WRITE, (node, stray), ("write", "write"), (0, 256)) for node in chain[10:]]


def test_many_readers_then_a_row_each_after_them(device):
    rows = device.zeros((16, 4))
    g = gg.Graph(device)
    readers = [g.add_host(print, reads=rows) for _ in range(12)]
    join = g.add_empty(after=readers)
    writers = [g.add_memset(rows, 1.0, shape=(1, 4), origin=(r, 0), after=join) for r in range(16)]
    assert g.hazards() == []
    early = g.add_memset(rows, 2.0, shape=(1, 4), origin=(5, 0), after=readers[:4])  # after four readers only
    assert found(g) == [*((READ_WRITE, (reader, early), ("read", "write"), (80, 96)) for reader in readers[4:]),
                        (WRITE_WRITE, (writers[5], early), ("write", "write"), (80, 96))]
    late = g.add_host(print, reads=rows, after=readers)  # reads with no edge to the writers
    assert [h for h in found(g) if late in h[1]] == [
        *((READ_WRITE, (writer, late), ("write", "read"), (16 * r, 16 * r + 16)) for r, writer in enumerate(writers)),
        (READ_WRITE, (early, late), ("write", "read"), (80, 96))]


def test_a_group_ordered_after_a_later_node_compares_what_is_in_it(device):
    rows = device.zeros((4, 4))
    g = gg.Graph(device)
    second_row = g.add_memset(rows, 1.0, shape=(1, 4), origin=(1, 0))
    first_rows = g.add_memset(rows, 2.0, shape=(2, 4))
    again = g.add_memset(rows, 3.0, shape=(2, 4), after=[first_rows, second_row])
    g.add_memset(rows, 4.0, after=again)  # groups first_rows and again, ordered after second_row
    assert found(g) == [(WRITE_WRITE, (second_row, first_rows), ("write", "write"), (16, 32))]


def test_an_access_that_has_ended_is_not_compared_in_its_group(device):
    rows = device.zeros((4, 4))
    g = gg.Graph(device)
    first_row = g.add_memset(rows, 1.0, shape=(1, 4))
    whole = g.add_memset(rows, 2.0, after=first_row)
    g.add_memset(rows, 3.0, shape=(1, 4), after=whole)  # groups the two (the group ends with whole)
    third_row = g.add_memset(rows, 4.0, shape=(1, 4), origin=(2, 0))
    assert found(g) == [(WRITE_WRITE, (whole, third_row), ("write", "write"), (32, 48))]


def test_a_read_is_compared_with_the_writes_in_a_group(device):
    x = device.zeros(16)
    g = gg.Graph(device)
    write = g.add_kernel(K.scale, 1, 16, x, 2.0, 16)
    read = g.add_host(print, reads=x, after=write)
    again = g.add_kernel(K.scale, 1, 16, x, 2.0, 16, after=read)  # groups write and read
    other = g.add_host(print, reads=x)
    assert found(g) == [(READ_WRITE, (write, other), ("write", "read"), (0, 64)),
                        (READ_WRITE, (again, other), ("write", "read"), (0, 64))]


# Nodes far apart in the order: more than WINDOW nodes between them


def test_a_fork_join_wider_than_the_window(device):
    n = WINDOW + 8
    x, y = device.zeros((n, 4)), device.zeros((n, 4))
    g = gg.Graph(device)
    root = g.add_memset(x, 0.0)
    branches = [g.add_memset(x, 1.0, shape=(1, 4), origin=(r, 0), after=root) for r in range(n)]
    copy = g.add_memcpy(y, x, after=g.add_empty(after=branches))
    assert g.hazards() == []
    stray = g.add_memset(x, 2.0, shape=(1, 4))  # with no edge
    late = g.add_memset(x, 3.0, shape=(1, 4), origin=(n - 1, 0), after=root)  # after the root only
    assert found(g) == [(WRITE_WRITE, (root, stray), ("write", "write"), (0, 16)),
                        (WRITE_WRITE, (branches[0], stray), ("write", "write"), (0, 16)),
                        (WRITE_WRITE, (branches[-1], late), ("write", "write"), (16 * n - 16, 16 * n)),
                        (READ_WRITE, (copy, stray), ("read", "write"), (0, 16)),
                        (READ_WRITE, (copy, late), ("read", "write"), (16 * n - 16, 16 * n))]


def test_two_long_streams_joined_now_and_then(device):
    """Two chains of nodes longer than the window, an edge from the first to the second every 100 nodes: the first's
    first node is ordered before the second's last by a long path (the last's access, of lower address, is compared
    first); the second's first and the first's last are not ordered."""
    x, y, a, b = device.zeros((2, 4)), device.zeros(16), device.zeros(16), device.zeros(16)
    g = gg.Graph(device)
    first = [g.add_memset(x, 1.0, shape=(1, 4), origin=(1, 0))]
    second = [g.add_kernel(K.scale, 1, 16, y, 2.0, 16)]
    for i in range(1, WINDOW + 200):
        first.append(g.add_kernel(K.scale, 1, 16, a, 2.0, 16, after=first[-1]))
        second.append(g.add_kernel(K.scale, 1, 16, b, 2.0, 16,
                                   after=[second[-1], first[-1]] if i % 100 == 0 else second[-1]))
    last_first = g.add_kernel(K.scale, 1, 16, y, 2.0, 16, after=first[-1])
    g.add_memset(x, 2.0, after=second[-1])
    assert found(g) == [(WRITE_WRITE, (second[0], last_first), ("write", "write"), (0, 64))]


def test_a_fan_in_to_a_line_and_a_fan_out_from_it(device):
    """Each row of an Array set before a line of nodes longer than the window, and again after it: each pair far
    apart in the order, ordered by the line."""
    n = WINDOW + 10
    rows, y = device.zeros((n, 4)), device.zeros(16)
    g = gg.Graph(device)
    before = [g.add_memset(rows, 1.0, shape=(1, 4), origin=(r, 0)) for r in range(n)]
    node = g.add_kernel(K.scale, 1, 16, y, 2.0, 16, after=before)
    for _ in range(n):
        node = g.add_kernel(K.scale, 1, 16, y, 2.0, 16, after=node)
    after = [g.add_memset(rows, 2.0, shape=(1, 4), origin=(r, 0), after=node) for r in range(n)]
    assert g.hazards() == []
    stray = g.add_memset(rows, 3.0, shape=(1, 4), origin=(3, 0), after=before[3])  # after its row's first only
    assert found(g) == [(WRITE_WRITE, (after[3], stray), ("write", "write"), (48, 64))]


def test_child_graphs_and_bodies_far_apart(device):
    x, y = device.zeros(16), device.zeros(16)
    g = gg.Graph(device)
    start = node = g.add_kernel(K.scale, 1, 16, x, 2.0, 16)
    for _ in range(WINDOW + 10):
        node = g.add_kernel(K.scale, 1, 16, y, 2.0, 16, after=node)
    inner = gg.Graph(device)
    inner.add_kernel(K.scale, 1, 16, x, 2.0, 16)
    child = g.add_child(inner, after=node)
    branch = g.add_if(g.condition(), has_else=True, after=child)
    in_bodies = [body.add_kernel(K.scale, 1, 16, x, 2.0, 16) for body in branch.bodies]
    end = g.add_kernel(K.scale, 1, 16, x, 2.0, 16, after=branch)
    assert g.hazards() == []
    late = g.add_kernel(K.scale, 1, 16, x, 2.0, 16, after=start)
    in_child = child.params.graph.nodes[0]
    assert [(h.nodes, h.edge, h.inside) for h in g.hazards()] == [
        ((in_child, late), (child, late), ((child,), ())),
        ((in_bodies[0], late), (branch, late), ((branch,), ())),
        ((in_bodies[1], late), (branch, late), ((branch,), ())),
        ((end, late), (end, late), ((), ()))]


# Against the rule itself, pair by pair, on random graphs


def random_graph(device: gg.Device, rng: random.Random, memory: list[gg.Array], into: gg.Graph | None = None,
                 depth: int = 0, child: bool = False, body: bool = False) -> gg.Graph:
    """Kernels, memsets of rows and host nodes on ``memory`` (the last: 4 rows of 4), child graphs and conditional
    bodies (none in a ``child`` graph, no host node in a ``body`` or what it holds), each after up to three of the
    eight nodes made before it, and an edge or two from a later node to an earlier one."""
    g = gg.Graph(device) if into is None else into
    nodes: list[gg.Node] = []
    for _ in range(rng.randint(1, 5 if depth else 40)):
        after, choice = rng.sample(nodes[-8:], min(len(nodes[-8:]), rng.randint(0, 3))), rng.random()
        if depth < 2 and choice < 0.08:
            node = g.add_child(random_graph(device, rng, memory, None, depth + 1, True, body), after=after)
        elif depth < 2 and not child and choice < 0.16:
            node = (g.add_if(g.condition(), has_else=True, after=after) if choice < 0.12 else
                    g.add_while(g.condition(), after=after))
            for inner in node.bodies:
                random_graph(device, rng, memory, inner, depth + 1, False, True)
        elif choice < 0.5:
            node = g.add_kernel(K.add, 1, 16, *(rng.choice(memory) for _ in range(3)), 16, after=after)
        elif choice < 0.7:
            row = rng.randrange(4)
            node = g.add_memset(memory[-1], 1.0, shape=(rng.randint(1, 4 - row), 4), origin=(row, 0), after=after)
        elif choice < 0.8 and not body:
            node = g.add_host(print, reads=rng.choice(memory), after=after)
        else:
            node = g.add_kernel(K.scale, 1, 16, rng.choice(memory), 2.0, 16, after=after)
        nodes.append(node)
    for _ in range(2):
        later, earlier = sorted(rng.sample(range(len(nodes)), 2), reverse=True) if len(nodes) > 1 else (0, 0)
        if not (reaches(g, nodes[earlier], nodes[later]) or reaches(g, nodes[later], nodes[earlier])):
            g.add_dependency(nodes[later], nodes[earlier])
    return g


def reaches(g: gg.Graph, a: gg.Node, b: gg.Node) -> bool:
    """Whether a path of ``g``'s edges leads from ``a`` to ``b`` (or ``a`` is ``b``)."""
    after: dict[gg.Node, list[gg.Node]] = {}
    for x, y in g.edges:
        after.setdefault(x, []).append(y)
    todo, seen = [a], {a}
    while todo:
        node = todo.pop()
        if node is b:
            return True
        for y in after.get(node, ()):
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def pairwise(graph: gg.Graph) -> list[tuple[str, tuple[gg.Node, gg.Node]]]:
    """The hazards by the rule, pair by pair: two nodes with accesses that overlap, one writing, unless the graph
    holding both (or the nodes embedding them) orders them, or they are in two bodies of one conditional node."""
    flat: list[tuple[gg.Node, tuple[tuple[gg.Graph, gg.Node], ...]]] = []  # each node, with (graph, node) from the top

    def walk(g: gg.Graph, outer: tuple[tuple[gg.Graph, gg.Node], ...]) -> None:
        for node in g.nodes:
            flat.append((node, (*outer, (g, node))))
            inner = (node.params.graph,) if node.kind is gg.NodeKind.GRAPH else (
                node.bodies if node.kind is gg.NodeKind.CONDITIONAL else ())
            for body in inner:
                walk(body, (*outer, (g, node)))

    closures: dict[int, dict[gg.Node, set[gg.Node]]] = {}  # per graph (by id), what each node reaches

    def ordered(one: tuple, other: tuple) -> bool:
        for (g, a), (h, b) in zip(one, other):
            if g is not h:
                return True  # two bodies of one conditional node
            if a is not b:
                if id(g) not in closures:
                    closures[id(g)] = {node: {y for y in g.nodes if reaches(g, node, y)} for node in g.nodes}
                return b in closures[id(g)][a] or a in closures[id(g)][b]
        return True

    walk(graph, ())
    touched = [_accesses(node.params, {}) for node, _ in flat]
    expected = []
    for i, j in itertools.combinations(range(len(flat)), 2):
        kinds = {WRITE_WRITE if p[2] and q[2] else READ_WRITE for p in touched[i] for q in touched[j]
                 if (p[2] or q[2]) and max(p[0], q[0]) < min(p[1], q[1])}
        if kinds and not ordered(flat[i][1], flat[j][1]):
            expected.append((min(kinds, key=(WRITE_WRITE, READ_WRITE).index), (flat[i][0], flat[j][0])))
    return expected


@pytest.mark.parametrize("window, search",
                         [(_hazard_order.WINDOW, _hazard_order.SEARCH), (1, 0), (2, 1), (2, 4), (3, 8)])
def test_hazards_are_the_pairs_the_rule_finds(device, monkeypatch, window, search):
    """The same hazards, with the order of nodes far apart answered by the window's bitsets, by a search, or by the
    chains' labels (a window and a search made small)."""
    monkeypatch.setattr(_hazard_order, "WINDOW", window)
    monkeypatch.setattr(_hazard_order, "SEARCH", search)
    memory = [device.zeros(16), device.zeros(16), device.zeros((4, 4))]
    for seed in range(40):
        graph = random_graph(device, random.Random(seed), memory)
        assert [(h.kind, h.nodes) for h in graph.hazards()] == pairwise(graph), seed


# The check at instantiate


def test_instantiate_checks_when_asked(device):
    x = device.zeros(16)
    g = gg.Graph(device)
    for _ in range(3):
        g.add_kernel(K.scale, 1, 16, x, 2.0, 16)
    with pytest.raises(gg.HazardError, match=r"^instantiate: a missing edge: .* \(write/write\): add an edge from "
                                             r"Node\(n0, kernel scale\) to Node\(n1, kernel scale\); and 2 more "
                                             r"hazards \(graph.hazards\(\) lists them\)"):
        g.instantiate(check_hazards=True)
    g.instantiate().close()  # off by default
    with pytest.raises(TypeError, match=r"^instantiate\(check_hazards\): expected True or False, got str 'yes'$"):
        g.instantiate(check_hazards="yes")


def run_child(code: str, setting: str | None, backend: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    """Run ``code`` (after imports of gpugraph, numpy and the test kernels) in a fresh interpreter whose
    $GPUGRAPH_CHECK_HAZARDS is ``setting`` (None: unset)."""
    program = tmp_path / "program.py"
    program.write_text("import gpugraph as gg\nimport numpy as np\nimport kernels as K\n"
                       f"dev = gg.Device({backend!r})\n" + textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items() if k != "GPUGRAPH_CHECK_HAZARDS"}
    if setting is not None:
        env["GPUGRAPH_CHECK_HAZARDS"] = setting
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(__file__).parent), *sys.path])
    return subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)


CHILD = """
x = dev.zeros(16)
g = gg.Graph(dev)
a = g.add_kernel(K.scale, 1, 16, x, 2.0, 16)
b = g.add_kernel(K.scale, 1, 16, x, 2.0, 16)
print(g.hazards()[0].where)
try:
    g.instantiate()
except gg.HazardError as e:
    print("refused:", e)
g.add_dependency(a, b)
g.instantiate().close()
print("instantiated")
"""


def test_the_environment_turns_the_check_on_with_the_lines(device, tmp_path):
    done = run_child(CHILD, "1", device.backend, tmp_path)
    assert done.returncode == 0, done.stderr
    program = tmp_path / "program.py"
    lines = done.stdout.splitlines()
    assert lines[0] == str((f"{program}:8", f"{program}:9"))  # (the 4 lines run_child puts first, then CHILD's)
    assert lines[1].startswith(f"refused: instantiate: a missing edge: Node(n0, kernel scale) (added at {program}:8) "
                               f"writes and Node(n1, kernel scale) (added at {program}:9) writes bytes 0 to 64")
    assert lines[2] == "instantiated"
    done = run_child(CHILD, "0", device.backend, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["(None, None)", "instantiated"]


CAPTURED = """
x = dev.zeros(16)
main, side = dev.stream(), dev.stream()
with main.capture() as cap:
    side.wait(main.record())
    main.launch(K.scale, 1, 16, x, 2.0, 16)
    side.memset(x, 1.0)
    main.wait(side.record())
print(cap.graph.hazards()[0].where)
"""


def test_the_environment_notes_the_lines_of_what_a_capture_recorded(device, tmp_path):
    done = run_child(CAPTURED, "1", device.backend, tmp_path)
    assert done.returncode == 0, done.stderr
    program = tmp_path / "program.py"
    assert done.stdout.splitlines() == [str((f"{program}:10", f"{program}:11"))]


def test_a_bad_environment_value_is_refused_at_instantiate(device, tmp_path):
    done = run_child("gg.Graph(dev).instantiate()\n", "yes", device.backend, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ValueError: instantiate: $GPUGRAPH_CHECK_HAZARDS is 'yes'; set it to 1 to check every instantiate for "
        "missing edges, or to 0 (or leave it unset) not to")


# Bad arguments


def test_add_host_refuses_what_is_not_memory(device):
    host = np.zeros(4)
    g = gg.Graph(device)
    for reads, got in (("abc", "str 'abc'"), (5, "int 5")):
        with pytest.raises(TypeError, match=rf"^add_host\(reads\): expected Arrays or NumPy arrays \(one, or a list of "
                                            rf"them\), got {got}$"):
            g.add_host(print, reads=reads)
    with pytest.raises(TypeError, match=r"^add_host\(writes\): expected Arrays or NumPy arrays, got list \[1\] among "
                                        r"them$"):
        g.add_host(print, reads=[host], writes=[host, [1]])
    assert len(g) == 0  # refused: no node
    with pytest.raises(TypeError, match=r"takes 1 positional argument but 2 were given"):
        g.hazards(True)  # type: ignore[call-arg]


def test_the_graph_of_a_removed_child_node_refuses(device):
    g = gg.Graph(device)
    node = g.add_child(gg.Graph(device))
    inner = node.params.graph
    g.remove_node(node)
    with pytest.raises(gg.GraphError, match="removed"):
        inner.hazards()

"""Edges that wait for less than a whole node: programmatic dependent launch between kernel nodes
("programmatic", "launch_order": CUDA's edge data). Added, read back, kept by clones and executable graphs,
refused where CUDA refuses them (measured on the H200), and run: the CPU backend runs them as full edges."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg

N = 256
# NVRTC has no CUDA runtime header here: the two device calls are defined as CUDA's header does. The CPU
# backend's header has its own.
SOURCE = r"""
#ifdef __CUDACC_RTC__
__device__ inline void cudaTriggerProgrammaticLaunchCompletion() { asm volatile("griddepcontrol.launch_dependents;"); }
__device__ inline void cudaGridDependencySynchronize() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#endif
extern "C" __global__ void produce(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2 * i;
    cudaTriggerProgrammaticLaunchCompletion();
}
extern "C" __global__ void consume(const int* x, int* y, int n) {
    cudaGridDependencySynchronize();  // the producer has finished and its writes show
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1;
}
"""
PRODUCE, CONSUME = gg.Kernel(SOURCE, "produce"), gg.Kernel(SOURCE, "consume")


def pipeline(device, kind="programmatic"):
    x, y = device.zeros(N, np.int32), device.zeros(N, np.int32)
    graph = gg.Graph(device)
    producer = graph.add_kernel(PRODUCE, 2, 128, x, N)
    consumer = graph.add_kernel(CONSUME, 2, 128, x, y, N)
    graph.add_dependency(producer, consumer, kind=kind)
    return graph, producer, consumer, x, y


@pytest.mark.parametrize("kind", ["programmatic", "full"])
def test_a_programmatic_edge_lets_the_consumer_read_what_the_producer_wrote(device, stream, kind):
    graph, producer, consumer, _, y = pipeline(device, kind)
    assert graph.dependency_kind(producer, consumer) == kind
    assert graph.edges == ((producer, consumer),) and consumer.dependencies == (producer,)
    with graph.instantiate() as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)


def test_a_launch_order_edge_runs(device, stream):
    graph, producer, consumer, x, y = pipeline(device, "launch_order")
    assert graph.dependency_kind(producer, consumer) == "launch_order"
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), 2 * np.arange(N))
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)


def test_edge_kinds_are_kept_by_clones_and_child_graphs(device, stream):
    graph, producer, consumer, _, y = pipeline(device)
    copy = graph.clone()
    assert copy.dependency_kind(copy.find(producer), copy.find(consumer)) == "programmatic"
    outer = gg.Graph(device)
    node = outer.add_child(graph)
    embedded = node.params.graph
    first, second = embedded.nodes
    assert embedded.dependency_kind(first, second) == "programmatic"
    with outer.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)


def test_a_removed_edge_comes_back_as_asked(device):
    graph, producer, consumer, _, _ = pipeline(device)
    graph.remove_dependency(producer, consumer)
    with pytest.raises(gg.GraphError, match=r"dependency_kind\(.*\): .* does not wait for .* directly"):
        graph.dependency_kind(producer, consumer)
    graph.add_dependency(producer, consumer)
    assert graph.dependency_kind(producer, consumer) == "full"


def test_edge_kinds_are_checked(device):
    graph, producer, consumer, x, _ = pipeline(device)
    memset = graph.add_memset(x, 0)
    empty = graph.add_empty()
    with pytest.raises(ValueError, match=r"add_dependency\(kind\): expected one of full, programmatic, launch_order, "
                                         r"got 'partial'"):
        graph.add_dependency(memset, empty, kind="partial")
    for a, b in ((producer, memset), (empty, consumer)):
        with pytest.raises(gg.GraphError, match=rf"kind='programmatic'\): a programmatic edge joins two kernel "
                                                 rf"nodes; got a {a.kind.value} node to a {b.kind.value} node"):
            graph.add_dependency(a, b, kind="programmatic")
    with pytest.raises(gg.GraphError, match="the edge exists already"):
        graph.add_dependency(producer, consumer, kind="launch_order")  # (one edge a pair, whatever its kind)
    with pytest.raises(gg.GraphError, match="the edge would make a cycle"):
        graph.add_dependency(consumer, producer, kind="programmatic")
    assert graph.edges == ((producer, consumer),)
    assert graph.dependency_kind(producer, consumer) == "programmatic"


@pytest.mark.parametrize("kind", ["full", "launch_order"])
def test_an_update_cannot_change_an_edges_kind(device, stream, kind):
    graph, *_ = pipeline(device)
    other, *_ = pipeline(device, kind)
    with graph.instantiate() as exe:
        with pytest.raises(gg.GraphUpdateError, match="topology changed"):
            exe.update(other)
        same, _, _, _, y = pipeline(device)  # the same kinds, other arrays: taken
        exe.update(same)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)

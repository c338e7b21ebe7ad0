"""Edges that wait for less than a whole node: programmatic dependent launch between kernel nodes
("programmatic", "launch_order": CUDA's edge data). Added, read back, kept by clones and executable graphs,
refused where CUDA refuses them (measured on the H200), and run: the CPU backend runs them as full edges."""

from __future__ import annotations

import signal

import numpy as np
import pytest

import gpugraph as gg
from test_reliability_threads import pythons_sigint_handler

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


# Capture: the frontier's edge data (cudaStreamGetCaptureInfo, cudaStreamUpdateCaptureDependencies). On the H200
# (2026-11-24): kinds set from a kernel node reach the next captured kernel; the driver refuses them from a memset
# node (CUDA_ERROR_INVALID_VALUE); after the next work the frontier is full again.

@pytest.mark.parametrize("kind", ["programmatic", "launch_order"])
@pytest.mark.parametrize("how", ["launch", "add_kernel"])
def test_a_capture_frontier_gives_its_kinds_to_the_next_kernel(device, stream, kind, how):
    x, y = device.zeros(N, np.int32), device.zeros(N, np.int32)
    with stream.capture() as cap:
        stream.launch(PRODUCE, 2, 128, x, N)
        (producer,) = cap.dependencies
        assert cap.dependency_kinds == ("full",)
        cap.set_dependencies(producer, kinds=kind)
        assert cap.dependencies == (producer,) and cap.dependency_kinds == (kind,)
        if how == "launch":
            stream.launch(CONSUME, 2, 128, x, y, N)
        else:
            cap.add_kernel(CONSUME, 2, 128, x, y, N)
        (consumer,) = cap.dependencies
        assert cap.dependency_kinds == ("full",)
        stream.memset(x, 0)  # (the kinds were taken: other work is captured again)
    assert cap.graph.dependency_kind(producer, consumer) == kind
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)
    np.testing.assert_array_equal(x.to_numpy(), 0)


def test_capture_kinds_are_given_per_node(device, stream):
    x, y, z = device.zeros(N, np.int32), device.zeros(N, np.int32), device.zeros(N, np.int32)
    with stream.capture() as cap:
        stream.launch(PRODUCE, 2, 128, x, N)
        (producer,) = cap.dependencies
        stream.memset(z, 7)
        (memset,) = cap.dependencies
        cap.set_dependencies([producer, memset], kinds=["programmatic", "full"])
        assert cap.dependency_kinds == ("programmatic", "full")
        consumer = cap.add_kernel(CONSUME, 2, 128, x, y, N)
    graph = cap.graph
    assert graph.dependency_kind(producer, consumer) == "programmatic"
    assert graph.dependency_kind(memset, consumer) == "full"
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)
    np.testing.assert_array_equal(z.to_numpy(), 7)


def test_capture_kinds_are_checked(device, stream):
    x, y = device.zeros(N, np.int32), device.zeros(N, np.int32)
    event = device.event()
    with stream.capture() as cap:
        stream.memset(x, 0)
        (memset,) = cap.dependencies
        stream.launch(PRODUCE, 2, 128, x, N)
        (producer,) = cap.dependencies
        with pytest.raises(gg.GraphError, match=r"set_dependencies\(Node\(n0, memset\), kinds='programmatic'\): a "
                                                r"programmatic edge leaves a kernel node; got a memset node"):
            cap.set_dependencies(memset, kinds="programmatic")
        with pytest.raises(ValueError, match=r"set_dependencies\(kinds\): expected one of full, programmatic, "
                                             r"launch_order, got 'partial'"):
            cap.set_dependencies(producer, kinds="partial")
        with pytest.raises(ValueError, match=r"expected one kind per node \(1\), got 2"):
            cap.set_dependencies(producer, kinds=["full", "full"])
        assert cap.dependencies == (producer,) and cap.dependency_kinds == ("full",)  # (nothing changed)
        cap.set_dependencies(producer, kinds="programmatic")
        refused = [lambda: stream.memset(y, 1), lambda: cap.add_memset(y, 1), lambda: stream.record(event),
                   lambda: cap.add_empty(), lambda: stream.host(print)]
        for call, api in zip(refused, ["Stream.memset", "Capture.add_memset", "Stream.record", "Capture.add_empty",
                                       "Stream.host"]):
            with pytest.raises(gg.CaptureError, match=rf"{api}: the capture frontier carries a programmatic edge "
                                                      rf"\(set_dependencies\(kinds=...\)\), which only a kernel node "
                                                      rf"may take"):
                call()
        assert cap.dependencies == (producer,) and cap.dependency_kinds == ("programmatic",)
        assert len(cap.graph.nodes) == 2  # (nothing half-done)
        cap.set_dependencies(producer)  # full again: other work may follow
        stream.memset(y, 1)
    assert cap.graph.dependency_kind(producer, cap.graph.nodes[-1]) == "full"


def test_a_ctrl_c_while_a_kinded_node_is_captured_leaves_it_whole(device, stream, monkeypatch):
    """The node, its programmatic edge and the frontier's move come together; the interrupt is raised after."""
    x, y = device.zeros(N, np.int32), device.zeros(N, np.int32)
    add_dependency = gg.Graph.add_dependency

    def interrupted(graph: gg.Graph, a: gg.Node, b: gg.Node, kind: str = "full") -> None:
        signal.raise_signal(signal.SIGINT)  # (Ctrl-C between the node and its edge)
        add_dependency(graph, a, b, kind)

    # Python's own SIGINT handler, whatever this process inherited: one started with SIGINT ignored (as a
    # shell starts a job in the background) keeps ignoring it, and raise_signal would raise nothing.
    with pythons_sigint_handler(), stream.capture() as cap:
        stream.launch(PRODUCE, 2, 128, x, N)
        (producer,) = cap.dependencies
        cap.set_dependencies(producer, kinds="programmatic")
        with monkeypatch.context() as patch:
            patch.setattr(gg.Graph, "add_dependency", interrupted)
            with pytest.raises(KeyboardInterrupt):
                cap.add_kernel(CONSUME, 2, 128, x, y, N)
        (consumer,) = cap.dependencies
        assert consumer is not producer and cap.dependency_kinds == ("full",)
    assert cap.graph.dependency_kind(producer, consumer) == "programmatic"
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)


def test_a_kinded_edge_refused_while_captured_leaves_the_node_fully_ordered(device, stream, monkeypatch):
    """Should the programmatic edge be refused, the node (which a capture cannot drop) waits for its producer
    fully, joins the frontier, and the error goes on."""
    x, y = device.zeros(N, np.int32), device.zeros(N, np.int32)
    add_dependency = gg.Graph.add_dependency

    def refusing(graph: gg.Graph, a: gg.Node, b: gg.Node, kind: str = "full") -> None:
        if kind != "full":
            raise gg.GraphError("refused (simulated)")
        add_dependency(graph, a, b, kind)

    with stream.capture() as cap:
        stream.launch(PRODUCE, 2, 128, x, N)
        (producer,) = cap.dependencies
        cap.set_dependencies(producer, kinds="programmatic")
        with monkeypatch.context() as patch:
            patch.setattr(gg.Graph, "add_dependency", refusing)
            with pytest.raises(gg.GraphError, match=r"refused \(simulated\)"):
                cap.add_kernel(CONSUME, 2, 128, x, y, N)
        (consumer,) = cap.dependencies
        assert consumer is not producer and cap.dependency_kinds == ("full",)
    assert cap.graph.dependency_kind(producer, consumer) == "full"
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(N) + 1)

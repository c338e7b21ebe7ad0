"""The compiled CUDA path's lanes (``gpugraph.backends.cuda._fast``): whatever they do not take in the common way
they decline, for the Python path to convert or explain, and what they take they record as the Python path does
(their arguments are written by ``gpugraph._argpack``, whose tests hold the bytes). Runs where the compiled path
is built and importable (it needs cuda-bindings, not a GPU); skipped elsewhere, saying why."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
from gpugraph._argpack import Layout
from gpugraph._placement import load_kernel
from gpugraph.backends.cuda import _compiled

fast = _compiled.fast
pytestmark = pytest.mark.skipif(fast is None, reason=f"the compiled CUDA path is {_compiled.status}")

SLOTS = 4


@pytest.fixture(scope="module")
def device() -> gg.Device:
    return gg.Device("cpu")


class _Function:
    """What a Launcher reads of a loaded kernel (the CUDA backend's Function)."""

    def __init__(self, codes: bytes | None, wants: tuple) -> None:
        self.layout, self.raw = None if codes is None else Layout(codes, wants, 0), 0


class _Capture:
    """What ``Launcher.captured`` reads of the backend's capture record."""

    def __init__(self, active: bool) -> None:
        import threading
        import types
        self.lock, self.active, self.graph = threading.Lock(), active, types.SimpleNamespace(pending=[])


@pytest.mark.parametrize("grid, block, args", [((1, 1), 32, (1,)), (1, 32, (2.5,)), (1, 32, (1, 2))])
def test_a_captured_launch_declines_before_calling_the_driver_and_records_nothing(device, grid, block, args):
    capture = _Capture(active=True)
    kernel = gg.Kernel('extern "C" __global__ void k(int n) {}', "k")
    assert fast.Launcher(0, device).captured(capture, kernel, _Function(b"i", (np.int32,)), grid, block,
                                             args) is False
    assert capture.graph.pending == []


def test_a_launch_into_a_capture_that_ended_is_left_to_the_python_path(device):
    capture = _Capture(active=False)  # (ended on another thread: the Python path launches it uncaptured)
    kernel = gg.Kernel('extern "C" __global__ void k(int n) {}', "k")
    assert fast.Launcher(0, device).captured(capture, kernel, _Function(b"i", (np.int32,)), 1, 32, (1,)) is False
    assert fast.Launcher(0, device).captured(None, kernel, _Function(b"i", (np.int32,)), 1, 32, (1,)) is False
    assert capture.graph.pending == []


@pytest.mark.gpu
def test_captured_launches_record_the_nodes_the_python_path_records(monkeypatch):
    import kernels as K
    gpu = gg.Device("cuda")
    x = gpu.zeros(8, np.int32)
    load_kernel(gpu, K.fill)
    graphs = []
    for lane in ("compiled", "python"):
        stream = gpu.stream()
        if lane == "python":
            monkeypatch.setattr(stream, "_fast", None)
        calls = []
        backend = stream._backend
        real = backend.stream_launch
        monkeypatch.setattr(backend, "stream_launch",
                            lambda *args, calls=calls, real=real: calls.append(args) or real(*args))
        with stream.capture() as cap:
            stream.launch(K.fill, 1, 8, x, 3, 8)
            stream.launch(K.fill, 2, 4, x, 7, 8)
        monkeypatch.undo()
        assert len(calls) == (0 if lane == "compiled" else 2)
        graphs.append(cap.graph)
    compiled, python = ([node.params for node in g.nodes] for g in graphs)
    assert compiled == python
    for a, b in zip(compiled, python):
        assert [type(v) for v in a.args] == [type(v) for v in b.args]  # typed as graph nodes keep them
    exe = graphs[0].instantiate()
    stream = gpu.stream()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 7, np.int32))


def _counting(monkeypatch, backend, name):
    """Count the calls of the backend's ``name`` (the Python path's), still making them."""
    calls = []
    real = getattr(backend, name)
    monkeypatch.setattr(backend, name, lambda *args: calls.append(args) or real(*args))
    return calls


@pytest.mark.gpu
def test_add_kernel_takes_the_compiled_lane_and_notes_what_the_python_path_notes(monkeypatch):
    import kernels as K
    gpu = gg.Device("cuda")
    load_kernel(gpu, K.fill)
    topologies = []
    for lane in ("compiled", "python"):
        x = gpu.zeros(8, np.int32)
        graph = gg.Graph(gpu)
        if lane == "python":
            graph._fast = None
        adds = _counting(monkeypatch, gpu._backend, "graph_add_node")
        first = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
        second = graph.add_kernel(K.fill, 2, 4, x, 2, 8, after=first)
        third = graph.add_kernel(K.fill, 1, 8, x, 3, 4, after=None)
        monkeypatch.undo()
        assert len(adds) == (0 if lane == "compiled" else 3)
        assert graph.nodes == (first, second, third) and second.dependencies == (first,) and not third.dependencies
        assert [n.kind for n in graph.nodes] == [gg.NodeKind.KERNEL] * 3
        topologies.append(([(n.params.args[1:], [type(a) for a in n.params.args]) for n in graph.nodes],
                           len(graph.edges)))
        graph.add_dependency(second, third)
        stream = gpu.stream()
        with graph.instantiate() as exe:
            exe.launch(stream)
            stream.synchronize()
        np.testing.assert_array_equal(x.to_numpy(), np.array([3] * 4 + [2] * 4, np.int32))
    assert topologies[0] == topologies[1]


@pytest.mark.gpu
def test_add_kernel_leaves_the_unusual_to_the_python_path(monkeypatch):
    import kernels as K
    gpu = gg.Device("cuda")
    load_kernel(gpu, K.fill)
    x = gpu.zeros(8, np.int32)
    graph = gg.Graph(gpu)
    first = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
    exe = graph.instantiate()  # watching the graph: told by the Python path before the graph changes
    adds = _counting(monkeypatch, gpu._backend, "graph_add_node")
    second = graph.add_kernel(K.fill, 1, 8, x, 2, 8, after=first)
    node = graph.add_kernel(K.fill, (1,), 8, x, 2, 8)  # a tuple shape
    graph.add_kernel(K.fill, 1, 8, x, gg.Param(np.int32(5)), 8, after=[second])  # a list, a Param
    assert len(adds) == 3
    with pytest.raises(gg.GraphError, match="belongs to another graph"):
        gg.Graph(gpu).add_kernel(K.fill, 1, 8, x, 1, 8, after=first)
    with pytest.raises(TypeError):
        graph.add_kernel(K.fill, 1, 8, x, "two", 8)
    with pytest.raises(ValueError):
        graph.add_kernel(K.fill, 0, 8, x, 2, 8)
    assert len(graph.nodes) == 4 and node.dependencies == ()
    exe.close()

"""The compiled CUDA path's lanes (``gpugraph.backends.cuda._fast``): whatever they do not take in the common way
they decline, for the Python path to convert or explain, and what they take they record as the Python path does
(their arguments are written by ``gpugraph._argpack``, whose tests hold the bytes). Runs where the compiled path
is built and importable (it needs cuda-bindings, not a GPU); skipped elsewhere, saying why."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
from gpugraph._placement import load_kernel
from gpugraph.backends.cuda import _compiled

fast = _compiled.fast
pytestmark = pytest.mark.skipif(fast is None, reason=f"the compiled CUDA path is {_compiled.status}")

SLOTS = 4


@pytest.fixture(scope="module")
def device() -> gg.Device:
    return gg.Device("cpu")


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

"""The CUDA driver calls of the paths users repeat (gpugraph.backends.cuda._leaves, compiled or plain): each returns
the driver's result, and the backend raises a refusal as every other driver call's (a BackendError naming the call
and CUDA's error), leaving nothing half done."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg

INVALID_VALUE = 1  # CUDA_ERROR_INVALID_VALUE
INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT
CAPTURE_INVALIDATED = 901  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED


@pytest.mark.gpu
@pytest.mark.parametrize(("call", "answer", "api"), [
    ("graph_nodes", INVALID_VALUE, "cuGraphGetNodes"),
    ("begin_capture", INVALID_VALUE, "cuStreamBeginCapture"),
    ("capture_graph", (INVALID_VALUE, 0), "cuStreamGetCaptureInfo"),
    ("exec_update", (INVALID_VALUE, 0, 0), "cuGraphExecUpdate"),
    ("launch_kernel", INVALID_VALUE, "cuLaunchKernel"),
])
def test_a_refused_driver_call_is_raised_as_the_driver_error(monkeypatch, call, answer, api):
    from gpugraph._errors import BackendError
    from gpugraph.backends.cuda import _leaves
    gpu = gg.Device("cuda")
    stream, x = gpu.stream(), gpu.zeros(4, np.float32)
    kernel = gg.Kernel('extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }', "k")
    graph = gg.Graph(gpu)
    graph.add_kernel(kernel, 1, 4, x)
    with graph.instantiate() as exe:
        monkeypatch.setattr(_leaves, call, lambda *args: answer)
        with pytest.raises((BackendError, gg.CaptureError), match=f"{api}.*CUDA_ERROR_INVALID_VALUE") as info:
            if call == "graph_nodes":
                gpu._backend.graph_nodes(graph._handle)
            elif call == "exec_update":
                exe.update(graph)
            elif call == "launch_kernel":
                monkeypatch.setattr(stream, "_hot_address", 0)  # (the compiled core, where built, calls C itself)
                stream.launch(kernel, 1, 4, x)
            else:
                with stream.capture():
                    stream.launch(kernel, 1, 4, x)
        monkeypatch.undo()
        assert isinstance(info.value, gg.GpuGraphError)
        with stream.capture() as cap:  # (the stream captures again: nothing was left half begun)
            stream.launch(kernel, 1, 4, x)
        exe.update(cap.graph)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))


@pytest.mark.gpu
def test_the_hot_kernel_calls_launch_and_set_a_node_with_packed_slots():
    from gpugraph._argpack import Slots
    from gpugraph._graph_node import handle_of
    from gpugraph._placement import load_kernel
    gpu = gg.Device("cuda")
    hot = gpu._backend.hot
    stream, x = gpu.stream(), gpu.zeros(4, np.float32)
    kernel = gg.Kernel('extern "C" __global__ void add(float* x, float v) { x[threadIdx.x] += v; }', "add")
    function = load_kernel(gpu, kernel).raw
    slots = Slots(2)
    assert slots.fill(b"Pf", (x, 2.0)) == -1
    assert hot.launch_kernel(function, 1, 1, 1, 4, 1, 1, 0, stream._hot_address, slots.kernel_params()) == 0
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.0, np.float32))
    graph = gg.Graph(gpu)
    node = graph.add_kernel(kernel, 1, 4, x, 1.0)
    with graph.instantiate() as exe:
        assert slots.fill(b"Pf", (x, 0.5)) == -1  # (the driver copies the arguments: the slots may change after)
        at = hot.node_address(handle_of(node))
        assert hot.exec_kernel_node_set(exe._hot_set, 0, at, function, 1, 1, 1, 4, 1, 1, 0,
                                        slots.kernel_params()) == INVALID_CONTEXT  # (not current: not called)
        assert hot.exec_kernel_node_set(exe._hot_set, exe._hot_context, at, function, 1, 1, 1, 4, 1, 1, 0,
                                        slots.kernel_params()) == 0
        slots.fill(b"Pf", (x, 100.0))
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 2.5, np.float32))
    assert hot.launch_kernel(function, 0, 1, 1, 4, 1, 1, 0, stream._hot_address, slots.kernel_params()) == \
        INVALID_VALUE  # (a refusal is the driver's result, raised by no one here)


def test_a_captured_launch_into_a_capture_that_no_longer_records_is_neither_made_nor_queued():
    pytest.importorskip("cuda.bindings", reason="the CUDA backend's hot calls need cuda-bindings")
    import threading
    import types

    from gpugraph.backends.cuda._leaves import CudaHot
    hot = CudaHot()
    for capture in (types.SimpleNamespace(lock=None, active=True, graph=types.SimpleNamespace(pending=[])),
                    types.SimpleNamespace(lock=threading.RLock(), active=False,
                                          graph=types.SimpleNamespace(pending=[]))):
        # (No driver call is made: a kernel address of 0 would fault, were it.)
        assert hot.captured_launch(capture, ("record",), 0, 1, 1, 1, 32, 1, 1, 0, 0, 0) == CAPTURE_INVALIDATED
        assert capture.graph.pending == []

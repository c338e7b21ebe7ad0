"""Interop on CUDA: other libraries' work on a gpugraph stream is captured, and gpugraph Arrays are used
by CuPy and PyTorch without copies. Each test skips, saying why, where its library is absent."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K

N = 1024


@pytest.fixture
def cuda_device(gpu_device: gg.Device) -> gg.Device:
    if gpu_device.backend != "cuda":
        pytest.skip(f"interop needs the cuda backend, got {gpu_device.backend}")
    return gpu_device


@pytest.mark.gpu
def test_cupy_uses_an_array_without_a_copy(cuda_device):
    cp = pytest.importorskip("cupy")
    x = cuda_device.asarray(np.arange(N, dtype=np.float32))
    view = cp.asarray(x)
    assert view.data.ptr == x.ptr and view.shape == (N,) and view.dtype == np.float32
    view *= 2
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(N, dtype=np.float32) * 2)


@pytest.mark.gpu
def test_torch_uses_an_array_without_a_copy(cuda_device):
    torch = pytest.importorskip("torch")
    x = cuda_device.asarray(np.arange(N, dtype=np.float32))
    view = torch.as_tensor(x, device="cuda")
    assert view.data_ptr() == x.ptr
    view.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(N, dtype=np.float32) + 1)


@pytest.mark.gpu
def test_cupy_work_on_a_gpugraph_stream_is_captured_and_replays(cuda_device):
    cp = pytest.importorskip("cupy")
    stream = cuda_device.stream()
    x = cuda_device.asarray(np.ones(N, np.float32))
    y = cuda_device.zeros(N, np.float32)
    cx, cy = cp.asarray(x), cp.asarray(y)
    with cp.cuda.ExternalStream(stream.ptr):
        cp.add(cy, cx, out=cy)  # warm up: CuPy compiles its kernel outside the capture
    stream.synchronize()
    with stream.capture() as cap:
        with cp.cuda.ExternalStream(stream.ptr):
            cp.add(cy, cx, out=cy)
            cp.multiply(cy, 2, out=cy)
    kinds = [n.kind for n in cap.graph.nodes]
    assert kinds == [gg.NodeKind.KERNEL, gg.NodeKind.KERNEL]
    assert all(isinstance(n.params.kernel.name, str) for n in cap.graph.nodes)
    np.testing.assert_array_equal(y.to_numpy(), np.ones(N))  # only the warm-up ran so far
    with cap.graph.instantiate() as exe:
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
    expected = 1.0
    for _ in range(3):
        expected = (expected + 1) * 2
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, expected, np.float32))


@pytest.mark.gpu
def test_torch_work_on_a_gpugraph_stream_is_captured_and_replays(cuda_device):
    torch = pytest.importorskip("torch")
    stream = cuda_device.stream()
    x = cuda_device.zeros(N, np.float32)
    t = torch.as_tensor(x, device="cuda")
    external = torch.cuda.ExternalStream(stream.ptr)
    with torch.cuda.stream(external):
        t.add_(1.0)  # warm up outside the capture
    stream.synchronize()
    with stream.capture() as cap:
        with torch.cuda.stream(external):
            t.mul_(3.0)
            t.add_(1.0)
    assert len(cap.graph.nodes) >= 2
    assert all(n.kind is gg.NodeKind.KERNEL for n in cap.graph.nodes)
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, ((1 * 3 + 1) * 3 + 1), np.float32))


@pytest.mark.gpu
def test_gpugraph_and_cupy_kernels_in_one_capture(cuda_device):
    cp = pytest.importorskip("cupy")
    stream = cuda_device.stream()
    x = cuda_device.asarray(np.full(N, 2.0, np.float32))
    cx = cp.asarray(x)
    with cp.cuda.ExternalStream(stream.ptr):
        cp.sqrt(cx, out=cx)
    stream.launch(K.scale, N // 256, 256, x, 1.0, N)
    stream.synchronize()
    x_host = np.sqrt(np.full(N, 2.0, np.float32))
    with stream.capture() as cap:
        stream.launch(K.scale, N // 256, 256, x, 4.0, N)
        with cp.cuda.ExternalStream(stream.ptr):
            cp.sqrt(cx, out=cx)
    names = [n.params.kernel.name for n in cap.graph.nodes]
    assert names[0] == "scale" and len(names) == 2
    assert cap.graph.nodes[0].params.kernel is K.scale  # gpugraph's own node keeps its Kernel
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_allclose(x.to_numpy(), np.sqrt(x_host * 4.0), rtol=1e-6)


def test_cuda_array_interface_is_absent_on_the_cpu_backend():
    x = gg.Device("cpu").zeros(4)
    assert not hasattr(x, "__cuda_array_interface__")


def test_dlpack_on_the_cpu_backend_is_a_numpy_view():
    device = gg.Device("cpu")
    x = device.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    view = np.from_dlpack(x)
    assert view.shape == (2, 3) and view.dtype == np.float32
    np.testing.assert_array_equal(view, np.arange(6).reshape(2, 3))
    assert x.__dlpack_device__() == (1, 0)


@pytest.mark.gpu
def test_torch_from_dlpack_shares_memory(cuda_device):
    torch = pytest.importorskip("torch")
    x = cuda_device.asarray(np.arange(8, dtype=np.int32))
    t = torch.from_dlpack(x)
    assert t.data_ptr() == x.ptr and t.device.type == "cuda" and t.dtype == torch.int32
    t.mul_(3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8) * 3)
    assert x.__dlpack_device__() == (2, cuda_device.index)


@pytest.mark.gpu
def test_cupy_from_dlpack_shares_memory(cuda_device):
    cp = pytest.importorskip("cupy")
    x = cuda_device.asarray(np.ones((4, 4), np.float64))
    c = cp.from_dlpack(x)
    assert c.data.ptr == x.ptr and c.shape == (4, 4)
    c += 1
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full((4, 4), 2.0))

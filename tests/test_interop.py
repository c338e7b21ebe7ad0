"""Interop: other libraries' work on a gpugraph stream is captured, gpugraph Arrays are used by CuPy,
PyTorch and NumPy without copies (DLPack as the array API standard says, the CUDA Array Interface), and
gpugraph uses other libraries' streams (the CUDA stream protocol) and arrays (DLPack, the CUDA Array
Interface) without copies. GPU tests skip, saying why, where their library is absent."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _dlpack

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
    with cp.cuda.Stream.from_external(stream):
        cp.add(cy, cx, out=cy)  # warm up: CuPy compiles its kernel outside the capture
    stream.synchronize()
    with stream.capture() as cap, cp.cuda.Stream.from_external(stream):
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
    with stream.capture() as cap, torch.cuda.stream(external):
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
    with cp.cuda.Stream.from_external(stream):
        cp.sqrt(cx, out=cx)
    stream.launch(K.scale, N // 256, 256, x, 1.0, N)
    stream.synchronize()
    x_host = np.sqrt(np.full(N, 2.0, np.float32))
    with stream.capture() as cap:
        stream.launch(K.scale, N // 256, 256, x, 4.0, N)
        with cp.cuda.Stream.from_external(stream):
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


# Helpers: stand-ins for other libraries' objects, so the import rules run on every backend.

class CudaArray:
    """An object that describes memory through the CUDA Array Interface."""

    def __init__(self, **fields):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False),
                                         "version": 3, "strides": None, "stream": None, **fields}


class DLPackOn:
    """An object that says it lives on DLPack device ``where`` (its capsule is never asked for)."""

    def __init__(self, where):
        self.where = where

    def __dlpack_device__(self):
        return self.where

    def __dlpack__(self, **kwargs):
        raise AssertionError("the device check comes first")


class StreamProtocol:
    """An object that speaks the CUDA stream protocol with whatever answer it is given."""

    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


def _capsule_struct(capsule):
    """The DLManagedTensorVersioned of an unused versioned capsule."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _dlpack._ManagedTensorVersioned.from_address(get(capsule, b"dltensor_versioned"))


# DLPack export (Array.__dlpack__)

def test_dlpack_export_honours_max_version(device):
    x = device.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    versioned = x.__dlpack__(max_version=(1, 0))
    assert '"dltensor_versioned"' in repr(versioned)
    managed = _capsule_struct(versioned)
    assert (managed.version.major, managed.version.minor) == (1, 0)
    assert managed.flags == 0  # READ_ONLY clear: an Array is writable; not a copy either
    tensor = managed.dl_tensor
    assert tensor.data == device._backend.data_address(x) and tensor.ndim == 2
    assert [tensor.shape[i] for i in range(2)] == [2, 3] and [tensor.strides[i] for i in range(2)] == [3, 1]
    assert (tensor.device.device_type, tensor.device.device_id) == x.__dlpack_device__()
    assert '"dltensor_versioned"' in repr(x.__dlpack__(max_version=(1, 3)))  # the same major version
    for legacy in (None, (0, 8)):
        assert '"dltensor"' in repr(x.__dlpack__(max_version=legacy))
    with pytest.raises(TypeError, match=r"__dlpack__\(max_version\): expected None or a \(major, minor\)"):
        x.__dlpack__(max_version=1)


def test_numpy_from_dlpack_gets_a_writable_view_and_the_array_lives_while_it_is_used():
    x = gg.Device("cpu").asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    exported = len(_dlpack._alive)
    view = np.from_dlpack(x)  # NumPy 2 passes max_version=(1, 0): a versioned capsule
    assert view.flags.writeable and view.shape == (2, 3) and view.dtype == np.float32
    alive = weakref.ref(x)
    del x
    gc.collect()
    assert alive() is not None  # the consumer's view keeps the Array (its memory) alive
    view[0, 0] = 42.0
    assert alive().to_numpy()[0, 0] == 42.0  # a view, not a copy
    del view
    gc.collect()
    assert alive() is None and len(_dlpack._alive) == exported  # the deleter ran: nothing leaks


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_an_unused_capsule_releases_the_array(device, max_version):
    x = device.zeros(4)
    exported = len(_dlpack._alive)
    capsule = x.__dlpack__(max_version=max_version)
    alive = weakref.ref(x)
    del x
    gc.collect()
    assert alive() is not None and len(_dlpack._alive) == exported + 1
    del capsule
    gc.collect()
    assert alive() is None and len(_dlpack._alive) == exported


def test_dlpack_export_refuses_a_stream_for_cpu_memory():
    x = gg.Device("cpu").zeros(4)
    for stream in (1, -1, 7):
        with pytest.raises(ValueError, match=r"__dlpack__: stream must be None for CPU memory .*got " + str(stream)):
            x.__dlpack__(stream=stream, max_version=(1, 0))
    assert '"dltensor_versioned"' in repr(x.__dlpack__(stream=None, max_version=(1, 0)))


@pytest.mark.gpu
def test_dlpack_export_checks_a_gpu_stream(cuda_device):
    x = cuda_device.zeros(4)
    for stream in (None, -1, 1, 2):
        assert "dltensor" in repr(x.__dlpack__(stream=stream))
    with pytest.raises(ValueError, match=r"0 is ambiguous"):
        x.__dlpack__(stream=0)
    with pytest.raises(TypeError, match=r"__dlpack__\(stream\): expected None or an int"):
        x.__dlpack__(stream=cuda_device.stream())


def test_dlpack_export_dl_device_and_copy(device):
    x = device.asarray(np.arange(4, dtype=np.int32))
    with pytest.raises(BufferError, match=r"dl_device asked for kDLVulkan:0"):
        x.__dlpack__(max_version=(1, 0), dl_device=(7, 0))
    with pytest.raises(TypeError, match=r"__dlpack__\(copy\): expected True, False or None"):
        x.__dlpack__(copy="yes")
    copied = x.__dlpack__(max_version=(1, 0), copy=True)
    managed = _capsule_struct(copied)
    assert managed.flags == _dlpack.IS_COPIED and managed.dl_tensor.data != device._backend.data_address(x)
    host = np.from_dlpack(x, device="cpu", copy=True)  # a host copy on every backend
    host[0] = 99
    np.testing.assert_array_equal(x.to_numpy(), np.arange(4))
    np.testing.assert_array_equal(host, [99, 1, 2, 3])


@pytest.mark.gpu
def test_dlpack_export_to_the_host_needs_a_copy(cuda_device):
    x = cuda_device.asarray(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), np.arange(4))
    with pytest.raises(BufferError, match=r"needs a copy, and copy=False forbids it"):
        x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match=r"dl_device asked for kDLCUDA:7"):
        x.__dlpack__(max_version=(1, 0), dl_device=(2, 7))


def test_dlpack_export_refuses_a_dtype_dlpack_cannot_express():
    x = gg.Device("cpu").empty(2, np.dtype(">f4"))
    with pytest.raises(BufferError, match=r"__dlpack__: DLPack has no type for >f4"):
        x.__dlpack__()


# DLPack import (gg.from_dlpack)

def test_from_dlpack_views_numpy_memory_on_the_cpu_device():
    host = np.arange(8, dtype=np.float32)
    x = gg.from_dlpack(host)  # host memory: the CPU backend's device, whatever the default backend
    assert x.device is gg.Device("cpu") and x.ptr == host.ctypes.data
    assert x.shape == (8,) and x.dtype == np.float32
    stream = x.device.stream()
    stream.launch(K.scale, 1, 8, x, 2.0, 8)
    stream.synchronize()
    np.testing.assert_array_equal(host, np.arange(8) * 2)  # the kernel wrote NumPy's memory
    alive = weakref.ref(host)
    del host
    gc.collect()
    assert alive() is not None  # the Array keeps the producer's memory alive
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8) * 2)
    del x
    gc.collect()
    assert alive() is None  # and calls its deleter once collected


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float64, np.complex64])
def test_from_dlpack_keeps_shape_and_dtype(dtype):
    host = np.zeros((2, 3, 4), dtype)
    x = gg.from_dlpack(host)
    assert (x.shape, x.dtype, x.ptr) == ((2, 3, 4), np.dtype(dtype), host.ctypes.data)


def test_from_dlpack_of_a_gpugraph_array_shares_its_memory(device):
    x = device.asarray(np.arange(6, dtype=np.float32).reshape(3, 2))
    y = gg.from_dlpack(x)  # through gpugraph's own export, on x's device
    assert y.device is device and (y.shape, y.dtype, y.ptr) == (x.shape, x.dtype, x.ptr)
    stream = device.stream()
    stream.launch(K.scale, 1, 6, y, 3.0, 6)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(6).reshape(3, 2) * 3)


def test_a_view_of_a_gpugraph_array_keeps_it_alive_until_the_view_goes(device):
    # Arrays never launched: under compute-sanitizer a launch's frame (and its arguments) outlives the call.
    x = device.asarray(np.arange(6, dtype=np.float32))
    y = gg.from_dlpack(x)
    alive = weakref.ref(x)
    del x
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(y.to_numpy(), np.arange(6))
    del y
    gc.collect()
    assert alive() is None


def test_from_dlpack_of_stream_memory_is_the_same_allocation(device):
    """A gpugraph Array imported again is an Array on its allocation record, on every backend: the same
    address, and the lifetime checks and frees of stream memory apply through either Array."""
    stream = device.stream()
    x = stream.alloc(4, np.float32)
    stream.memset(x, 2.0)
    view = gg.from_dlpack(x)
    assert view is not x and view.device is device and view.ptr == x.ptr and view._alloc is x._alloc
    np.testing.assert_array_equal(view.to_numpy(), np.full(4, 2.0))
    copied = gg.from_dlpack(x, copy=True)  # the producer's copy: memory of its own
    assert copied.ptr != x.ptr and copied._alloc is not x._alloc
    np.testing.assert_array_equal(copied.to_numpy(), np.full(4, 2.0))
    stream.free(view)  # frees x's allocation: it is one allocation
    stream.synchronize()
    for array in (view, x):
        with pytest.raises(gg.GpuGraphError, match=r"was used outside its allocation's lifetime"):
            array.to_numpy()
    with pytest.raises(ValueError, match=r"^free\(array\): the stream allocation at 0x[0-9a-f]+ is not allocated "
                                         r"now \(double free"):
        stream.free(x)


def test_from_dlpack_copy_asks_the_producer_for_a_copy():
    host = np.ones(4, np.float32)
    copied = gg.from_dlpack(host, copy=True)
    assert copied.ptr != host.ctypes.data
    np.testing.assert_array_equal(copied.to_numpy(), host)
    assert gg.from_dlpack(host, copy=False).ptr == host.ctypes.data


def test_from_dlpack_refuses_what_an_array_cannot_view():
    with pytest.raises(BufferError, match=r"from_dlpack: ndarray is not C-contiguous \(shape \(4,\), strides \(2,\)"):
        gg.from_dlpack(np.arange(8.0)[::2])
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    alive = weakref.ref(frozen)
    with pytest.raises(BufferError, match=r"from_dlpack: ndarray exported read-only memory"):
        gg.from_dlpack(frozen)
    del frozen
    gc.collect()
    assert alive() is None  # the refused capsule stayed unused and released the producer
    with pytest.raises(TypeError, match=r"from_dlpack: list does not support DLPack"):
        gg.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError, match=r"from_dlpack\(copy\): expected True, False or None"):
        gg.from_dlpack(np.zeros(2), copy=1)


def test_from_dlpack_refuses_memory_of_another_device():
    cpu = gg.Device("cpu")
    with pytest.raises(ValueError, match=r"from_dlpack: DLPackOn is in kDLCUDA:0 memory and cannot be viewed on "
                                         r"cpu:0, whose memory is kDLCPU:0"):
        gg.from_dlpack(DLPackOn((2, 0)), device=cpu)
    # Each backend says which memory it uses (Backend.dlpack_device_type); the unavailable ones say why.
    with pytest.raises(ValueError, match=r"^from_dlpack: DLPackOn is in kDLVulkan:0 memory, which no gpugraph "
                                         r"backend uses here \(cpu uses kDLCPU memory; hip: the HIP backend"):
        gg.from_dlpack(DLPackOn((7, 0)))
    with pytest.raises(TypeError, match=r"from_dlpack\(stream\): expected a gpugraph Stream or None, got int"):
        gg.from_dlpack(np.zeros(2), stream=1)


@pytest.mark.gpu
def test_from_dlpack_refuses_host_memory_on_a_gpu(cuda_device):
    with pytest.raises(ValueError,
                       match=r"ndarray is in kDLCPU:0 memory and cannot be viewed on cuda:\d.*dev\.asarray"):
        gg.from_dlpack(np.zeros(4, np.float32), device=cuda_device)


# The CUDA Array Interface (gg.from_cuda_array_interface, and kernel arguments)

CAI = r"CudaArray's __cuda_array_interface__ "


@pytest.mark.parametrize("fields, error, message", [
    ({"strides": (8,)}, BufferError, r"CudaArray is not C-contiguous \(shape \(4,\), strides \(8,\) bytes\)"),
    ({"data": (0x1000, True)}, BufferError, r"CudaArray is read-only"),
    ({"mask": object()}, BufferError, r"CudaArray is a masked array"),
    ({"typestr": "|O"}, BufferError, CAI + r"has 'typestr' '\|O'; an Array holds native-endian numbers"),
    ({"typestr": ">f4"}, BufferError, CAI + r"has 'typestr' '>f4'"),
    ({"version": None}, ValueError, CAI + r"has no valid 'version'"),
    ({"shape": [4]}, ValueError, CAI + r"'shape' must be a tuple of non-negative ints"),
    ({"stream": 0}, ValueError, CAI + r"'stream' must be None or a stream handle"),
])
def test_a_malformed_cuda_array_interface_gets_the_same_error_everywhere(device, fields, error, message):
    bad = CudaArray(**fields)
    with pytest.raises(error, match=r"^from_cuda_array_interface: " + message):
        gg.from_cuda_array_interface(bad, device=device)
    with pytest.raises(error, match=r"^Kernel\('scale'\) argument 0 \(float\* x\): " + message):
        device.stream().launch(K.scale, 1, 4, bad, 2.0, 4)


def test_c_contiguity_ignores_the_strides_of_extent_one_dimensions():
    # Strides of dimensions of extent 1 (and of empty arrays) do not matter: the memory is contiguous.
    assert _dlpack.c_contiguous((4, 1), (4, 999), 4) and _dlpack.c_contiguous((0, 3), (5, 7), 4)
    assert not _dlpack.c_contiguous((2, 3), (4, 8), 4)


def test_numpy_has_no_cuda_array_interface_on_every_backend(device):
    with pytest.raises(TypeError, match=r"^from_cuda_array_interface: ndarray has no __cuda_array_interface__ "
                                        r"\(it is not CUDA memory\); copy host data with dev\.asarray"):
        gg.from_cuda_array_interface(np.zeros(4, np.float32), device=device)
    with pytest.raises(TypeError, match=r"expects a device Array, got ndarray.*dev\.asarray"):
        device.stream().launch(K.scale, 1, 4, np.zeros(4, np.float32), 2.0, 4)


def test_cuda_memory_is_refused_by_the_cpu_backend():
    cpu = gg.Device("cpu")
    with pytest.raises(ValueError, match=r"^from_cuda_array_interface: CudaArray is CUDA memory "
                                         r"\(__cuda_array_interface__\) and cpu:0 is not a CUDA device"):
        gg.from_cuda_array_interface(CudaArray(), device=cpu)
    with pytest.raises(ValueError, match=r"argument 0 \(float\* x\): CudaArray is CUDA memory"):
        cpu.stream().launch(K.scale, 1, 4, CudaArray(), 2.0, 4)
    with pytest.raises(ValueError, match=r"argument 0 \(float\* x\): DLPackOn is in kDLCUDA:0 memory and cannot be "
                                         r"used by a launch on cpu:0"):
        cpu.stream().launch(K.scale, 1, 4, DLPackOn((2, 0)), 2.0, 4)


def test_host_memory_is_no_kernel_argument_even_with_dlpack(device):
    """Kernels take device memory on every backend: NumPy's DLPack export is not used (on the CPU
    backend it would be host memory that a GPU could not read)."""
    with pytest.raises(TypeError, match=r"expects a device Array, got DLPackOn"):
        device.stream().launch(K.scale, 1, 4, DLPackOn((1, 0)), 2.0, 4)


# Streams: the CUDA stream protocol

def test_a_cpu_stream_does_not_claim_the_cuda_stream_protocol():
    cpu = gg.Device("cpu")
    for stream in (cpu.stream(), cpu.default_stream):
        assert not hasattr(stream, "__cuda_stream__")
    with pytest.raises(AttributeError, match=r"__cuda_stream__: Stream\(#\d+, device=cpu:0.*is not a CUDA stream"):
        cpu.stream().__cuda_stream__()


def test_stream_from_external_refuses_what_is_not_a_cuda_stream(device):
    stream = device.stream()
    assert gg.Stream.from_external(stream) is stream and gg.Stream.from_external(stream, device) is stream
    with pytest.raises(TypeError, match=r"^Stream\.from_external: expected a gpugraph Stream or an object with "
                                        r"__cuda_stream__ .* got int"):
        gg.Stream.from_external(12345, device)
    for answer, message in (((1, 0x1000), r" speaks version 1 of the CUDA stream protocol"),
                            ([0, 0x1000], r"\.__cuda_stream__\(\) must return \(version, handle\) as two ints"),
                            ((0, -5), r"\.__cuda_stream__\(\) gave the handle -5, not an address")):
        with pytest.raises(ValueError, match=r"^Stream\.from_external: StreamProtocol" + message):
            gg.Stream.from_external(StreamProtocol(answer), device)


@pytest.mark.gpu
def test_stream_from_external_takes_the_default_handles_and_refuses_the_per_thread_stream(cuda_device):
    """The map's answer for the _spt calls (hipGraphLaunch_spt, hipStreamBeginCapture_spt, ...): CUDA's legacy
    default stream handles (0 and 1) are the device's default Stream; the per-thread one (2) is refused."""
    for handle in (0, 1):
        assert gg.Stream.from_external(StreamProtocol((0, handle)), cuda_device) is cuda_device.default_stream
    with pytest.raises(ValueError, match=r"^Stream\.from_external: handle 2 is CUDA's per-thread default stream, "
                                         r"which gpugraph does not model; use a stream of its own \(dev\.stream\(\)\) "
                                         r"or the legacy default stream$"):
        gg.Stream.from_external(StreamProtocol((0, 2)), cuda_device)


def test_the_protocols_follow_the_backends_facts_not_its_name(monkeypatch):
    """Which protocols apply is the backend's fact (Backend.speaks_cuda, Backend.dlpack_device_type), never a
    test of its name in the front end."""
    cpu = gg.Device("cpu")
    backend = cpu._backend
    assert (backend.speaks_cuda, backend.dlpack_device_type) == (False, 1)
    x = cpu.zeros(4, np.float32)
    assert x.__dlpack_device__() == (1, 0) and not hasattr(x, "__cuda_array_interface__")
    monkeypatch.setattr(backend, "dlpack_device_type", 13)
    assert x.__dlpack_device__() == (13, 0)
    monkeypatch.setattr(backend, "speaks_cuda", True)
    assert x.__cuda_array_interface__["data"] == (x.ptr, False)


def test_a_cuda_stream_is_refused_by_the_cpu_backend():
    with pytest.raises(ValueError, match=r"^Stream\.from_external: StreamProtocol is a CUDA stream "
                                         r"\(__cuda_stream__\) and cpu:0 is not a CUDA device"):
        gg.Stream.from_external(StreamProtocol((0, 0x1000)), gg.Device("cpu"))


def test_graph_exec_points_other_libraries_streams_to_from_external(device):
    graph = gg.Graph(device)
    graph.add_empty()
    with graph.instantiate() as exe:
        for call in (exe.launch, exe.upload):
            with pytest.raises(TypeError, match=r"expected a Stream, got StreamProtocol \(wrap another library's "
                                                r"stream once with gg\.Stream\.from_external\(stream\)\)"):
                call(StreamProtocol((0, 0x1000)))
        with pytest.raises(TypeError, match=r"expected a Stream, got int$"):
            exe.launch(7)


# On CUDA: other libraries' streams and arrays in gpugraph

@pytest.mark.gpu
def test_stream_protocol_round_trip_gives_the_same_stream(cuda_device):
    cp = pytest.importorskip("cupy")
    stream = cuda_device.stream()
    assert stream.__cuda_stream__() == (0, stream.ptr)
    assert gg.Stream.from_external(cp.cuda.Stream.from_external(stream), cuda_device) is stream
    assert gg.Stream.from_external(cp.cuda.Stream.null, cuda_device) is cuda_device.default_stream


@pytest.mark.gpu
def test_a_streams_handle_gives_it_back_however_it_was_obtained(cuda_device):
    """Every Stream gpugraph makes is known by its handle from the start, not only once exported through
    __cuda_stream__: a handle read from ptr gives the same Stream, so there is one capture state."""
    stream = cuda_device.stream()
    ours = gg.Stream.from_external(StreamProtocol((0, stream.ptr)), cuda_device)  # never through __cuda_stream__
    assert ours is stream
    with stream.capture():
        assert ours.is_capturing


@pytest.mark.gpu
def test_a_torch_external_stream_of_ptr_gives_the_stream_back(cuda_device):
    torch = pytest.importorskip("torch")
    stream = cuda_device.stream()
    theirs = torch.cuda.ExternalStream(stream.ptr, device=f"cuda:{cuda_device.index}")
    if not hasattr(theirs, "__cuda_stream__"):
        pytest.skip(f"torch {torch.__version__} streams do not speak the CUDA stream protocol")
    assert gg.Stream.from_external(theirs, cuda_device) is stream
    x = cuda_device.zeros(N, np.float32)
    with stream.capture() as cap:
        assert gg.Stream.from_external(theirs, cuda_device).is_capturing
        stream.launch(K.scale, N // 256, 256, x, 2.0, N)
    assert len(cap.graph.nodes) == 1


@pytest.mark.gpu
def test_a_handle_the_driver_does_not_know_is_refused(cuda_device, monkeypatch):
    """The driver's refusal of a stream handle is the caller's mistake, said as such (what the driver
    answers is simulated: it may also crash on a handle it never made)."""
    from cuda.bindings import driver

    def unknown(handle):
        return (driver.CUresult.CUDA_ERROR_INVALID_HANDLE, None)
    unknown.__name__ = "cuStreamGetDevice"
    monkeypatch.setattr(driver, "cuStreamGetDevice", unknown)
    with pytest.raises(ValueError, match=r"^Stream\.from_external: the handle 0x1000 is not a CUDA stream handle of "
                                         r"this process \(the driver says .*CUDA_ERROR_INVALID_HANDLE"):
        gg.Stream.from_external(StreamProtocol((0, 0x1000)), cuda_device)


@pytest.mark.gpu
def test_host_memory_is_not_viewed_as_device_memory(cuda_device):
    pageable = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"^from_cuda_array_interface: the memory at 0x[0-9a-f]+ is not CUDA memory "
                                         r"\(the driver does not know the address: pageable host memory"):
        gg.from_cuda_array_interface(CudaArray(data=(pageable.ctypes.data, False)), device=cuda_device)
    pinned = cuda_device.pinned(4, np.float32)
    with pytest.raises(ValueError, match=r"^from_cuda_array_interface: the memory at 0x[0-9a-f]+ is page-locked "
                                         r"host memory, not device memory"):
        gg.from_cuda_array_interface(CudaArray(data=(pinned.ctypes.data, False)), device=cuda_device)


@pytest.mark.gpu
def test_from_cuda_array_interface_of_a_gpugraph_array_is_the_same_allocation(cuda_device):
    stream = cuda_device.stream()
    x = stream.alloc(N, np.float32)
    view = gg.from_cuda_array_interface(x, device=cuda_device)
    assert view is not x and view.ptr == x.ptr and view._alloc is x._alloc
    stream.free(view)
    stream.synchronize()
    with pytest.raises(gg.GpuGraphError, match=r"was used outside its allocation's lifetime"):
        x.to_numpy()
    kept = weakref.ref(x)
    del x
    gc.collect()
    assert kept() is not None  # the view keeps the Array alive
    del view
    gc.collect()
    assert kept() is None


@pytest.mark.gpu
def test_a_cupy_stream_runs_launches_copies_captures_and_graphs(cuda_device):
    cp = pytest.importorskip("cupy")
    theirs = cp.cuda.Stream(non_blocking=True)
    stream = gg.Stream.from_external(theirs, cuda_device)
    assert gg.Stream.from_external(theirs, cuda_device) is stream  # one Stream per native stream
    assert stream.ptr == theirs.ptr and stream.non_blocking
    x = cuda_device.asarray(np.ones(N, np.float32))
    stream.launch(K.scale, N // 256, 256, x, 2.0, N)
    host = np.empty(N, np.float32)
    stream.memcpy(host, x)
    stream.synchronize()
    np.testing.assert_array_equal(host, np.full(N, 2.0))
    cx = cp.asarray(x)
    with theirs:
        scratch = cp.zeros(N, dtype=cp.float32)
        cp.add(scratch, 1, out=scratch)  # warm up: CuPy compiles its kernel outside the capture
    stream.synchronize()
    with stream.capture() as cap:
        stream.launch(K.scale, N // 256, 256, x, 3.0, N)
        with theirs:  # CuPy's work on its own stream, captured by gpugraph's capture
            cp.add(cx, 1, out=cx)
    assert len(cap.graph.nodes) == 2
    with cap.graph.instantiate() as exe:
        exe.upload(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7.0))
    alive = weakref.ref(theirs)
    del theirs
    gc.collect()
    assert alive() is not None  # the Stream keeps the other library's stream (its owner) alive
    del stream, cap, exe
    gc.collect()
    assert alive() is None


@pytest.mark.gpu
def test_a_torch_stream_is_a_stream(cuda_device):
    torch = pytest.importorskip("torch")
    theirs = torch.cuda.Stream(device=cuda_device.index)
    if not hasattr(theirs, "__cuda_stream__"):
        pytest.skip(f"torch {torch.__version__} streams do not speak the CUDA stream protocol")
    stream = gg.Stream.from_external(theirs, cuda_device)
    assert stream.ptr == theirs.cuda_stream
    x = cuda_device.zeros(N, np.float32)
    stream.memset(x, 1.0)
    stream.launch(K.scale, N // 256, 256, x, 5.0, N)
    theirs.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 5.0))


@pytest.mark.gpu
def test_cupy_and_torch_arrays_are_viewed_without_copies(cuda_device):
    cp = pytest.importorskip("cupy")
    c = cp.arange(N, dtype=cp.float32)
    for view in (gg.from_dlpack(c), gg.from_cuda_array_interface(c, device=cuda_device)):
        assert view.device is cuda_device and view.ptr == c.data.ptr and view.shape == (N,)
    stream = cuda_device.stream()
    stream.launch(K.scale, N // 256, 256, gg.from_dlpack(c, stream=stream), 2.0, N)
    stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), np.arange(N) * 2)
    with pytest.raises(BufferError, match=r"is not C-contiguous"):
        gg.from_dlpack(c[::2])
    with pytest.raises(BufferError, match=r"is not C-contiguous"):
        gg.from_cuda_array_interface(c[::2], device=cuda_device)
    torch = pytest.importorskip("torch")
    # PyTorch's capsule holds its C++ tensor, not the Python one: watch the memory its tensors hold instead.
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(cuda_device.index)
    t = torch.ones(N, device=f"cuda:{cuda_device.index}")
    x = gg.from_dlpack(t)
    assert x.ptr == t.data_ptr()
    del t
    gc.collect()
    assert torch.cuda.memory_allocated(cuda_device.index) > before  # the view keeps the tensor's memory
    del x
    gc.collect()
    assert torch.cuda.memory_allocated(cuda_device.index) == before  # released with the view


@pytest.mark.gpu
def test_other_libraries_arrays_are_kernel_arguments(cuda_device):
    cp = pytest.importorskip("cupy")
    stream = cuda_device.stream()
    with cp.cuda.Stream.from_external(stream):  # CuPy's work ordered before the launches: the same stream
        c = cp.ones(N, dtype=cp.float32)
        c += 1
    stream.launch(K.scale, N // 256, 256, c, 3.0, N)
    with stream.capture() as cap:
        stream.launch(K.scale, N // 256, 256, c, 2.0, N)
    with cap.graph.instantiate() as exe:
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), np.full(N, 12.0))
    with pytest.raises(TypeError, match=r"expects float32 data, got an Array of int32"):
        stream.launch(K.scale, 1, 4, cp.zeros(4, cp.int32), 2.0, 4)
    with pytest.raises(BufferError, match=r"argument 0 \(float\* x\): ndarray is not C-contiguous"):
        stream.launch(K.scale, 1, 4, c[::2], 2.0, 4)
    torch = pytest.importorskip("torch")
    t = torch.ones(N, device=f"cuda:{cuda_device.index}")
    torch.cuda.synchronize()
    stream.launch(K.scale, N // 256, 256, t, 4.0, N)
    stream.synchronize()
    assert float(t.sum()) == 4.0 * N


@pytest.mark.gpu
def test_from_cuda_array_interface_orders_after_the_producers_stream(cuda_device):
    cp = pytest.importorskip("cupy")
    theirs = cp.cuda.Stream(non_blocking=True)
    stream = cuda_device.stream()
    with theirs:
        c = cp.zeros(N, dtype=cp.float32)
        c += 5  # pending on CuPy's stream, which the CUDA Array Interface names
        x = gg.from_cuda_array_interface(c, device=cuda_device, stream=stream)
    stream.launch(K.scale, N // 256, 256, x, 2.0, N)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 10.0))

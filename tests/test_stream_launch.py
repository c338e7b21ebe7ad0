"""Stream.launch: the common case, which the compiled core (gpugraph._stream_state, compiled) launches itself through
the backend's hot calls (gpugraph.backends._hot) with its arguments packed by gpugraph._argpack, and every other
case, which the checked path launches or refuses. A recording HotCalls stands in for a backend's here: it notes each
launch with its arguments as packed, and refuses it, so that the checked path then launches it (as after any
refusal), and the results are the backend's own on every backend."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _stream_state
from gpugraph._kernel import keep_function, loaded_function
from gpugraph._placement import load_kernel
from gpugraph.backends._hot import HotCalls

COMPILED = not str(_stream_state.__file__).endswith(".py")
REFUSED = 1  # a driver's refusal (CUDA_ERROR_INVALID_VALUE): the checked path launches again and explains it
FUNCTION, STREAM = 7, 9  # the addresses the recording stands in for


class Recording(HotCalls):
    """Hot calls that note each kernel launch, with the first argument slots as packed, and refuse it."""

    def __init__(self, slots: int) -> None:
        self.slots, self.launches, self.captured = slots, [], []

    def launch_kernel(self, function: int, grid_x: int, grid_y: int, grid_z: int, block_x: int, block_y: int,
                      block_z: int, shared_mem: int, stream: int, kernel_params: int) -> int:
        pointers = (ctypes.c_void_p * self.slots).from_address(kernel_params)
        packed = [ctypes.string_at(pointers[i], 8) for i in range(self.slots)]
        self.launches.append((function, (grid_x, grid_y, grid_z), (block_x, block_y, block_z), shared_mem, stream,
                              packed))
        return REFUSED

    def captured_launch(self, capture: object, record: object, function: int, grid_x: int, grid_y: int, grid_z: int,
                        block_x: int, block_y: int, block_z: int, shared_mem: int, stream: int,
                        kernel_params: int) -> int:
        self.launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream,
                           kernel_params)
        self.captured.append((capture, record))
        return REFUSED


def _recorded(stream: gg.Stream, kernel: gg.Kernel, slots: int) -> Recording:
    load_kernel(stream.device, kernel)
    function = loaded_function(kernel, stream.device)
    if getattr(function, "layout", None) is None:
        keep_function(kernel, stream.device, K.WithLayout(function, kernel, FUNCTION))
    hot = Recording(slots)
    stream._hot, stream._hot_address = hot, STREAM
    return hot


@pytest.fixture
def restore_inc(device):
    """K.inc's loaded function as it was (a test gives it a Layout)."""
    load_kernel(device, K.inc)
    function = loaded_function(K.inc, device)
    yield
    keep_function(K.inc, device, function)


def test_the_common_case_reaches_the_hot_call_packed_and_everything_else_the_checked_path(device, restore_inc):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    hot = _recorded(stream, K.inc, 2)
    stream.launch(K.inc, 1, 8, x, 8)
    stream.launch(K.inc, 1, 8, x, np.int32(8))  # a NumPy scalar: the converter's (checked path)
    stream.launch(K.inc, (1, 1), 8, x, 8)  # a 3-D shape
    stream.launch(K.inc, 1, 8, x, 8, shared_mem=16)  # dynamic shared memory
    with stream.capture() as cap:  # into a capture: the hot captured launch (refused), then the checked path
        stream.launch(K.inc, 1, 8, x, 8)
    other = device.stream()  # a stream without a hot address
    other.launch(K.inc, 1, 8, x, 8)
    stream.synchronize()
    other.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 5.0))
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.KERNEL]
    # (Compiled, the first launch and the captured one reached the hot calls, their arguments packed as the kernel
    # reads them.)
    expected = (FUNCTION, (1, 1, 1), (8, 1, 1), 0, STREAM, [x.ptr.to_bytes(8, "little"), (8).to_bytes(8, "little")])
    assert hot.launches == ([expected] * 2 if COMPILED else [])
    assert len(hot.captured) == (1 if COMPILED else 0)


def test_arguments_the_slots_do_not_take_as_they_are_are_converted_or_refused_by_the_checked_path(device,
                                                                                                 restore_inc):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    hot = _recorded(stream, K.inc, 2)
    with pytest.raises(TypeError, match="expects float64 data"):
        stream.launch(K.inc, 1, 8, device.zeros(8, np.float32), 8)  # another dtype
    with pytest.raises(TypeError, match="takes 2 arguments"):
        stream.launch(K.inc, 1, 8, x)
    with pytest.raises(ValueError, match="grid"):
        stream.launch(K.inc, 0, 8, x, 8)
    with pytest.raises(TypeError, match="expected a Kernel"):
        stream.launch("inc", 1, 8, x, 8)
    stream.launch(K.inc, 1, 8, x, 2.0)  # a float for an int: refused by the slot, taken by the converter
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.array([1.0] * 2 + [0.0] * 6))
    assert hot.launches == []


class OwnStream(gg.Stream):
    """A Stream subclass: its launches take the checked path."""


def test_a_stream_subclass_and_the_legacy_stream_have_no_hot_address(device):
    assert OwnStream(device)._hot_address == 0
    assert device.default_stream._hot_address == 0
    assert device.stream()._hot is device._backend.hot


def test_a_launch_into_a_capture_with_an_error_or_under_hazard_checking_is_the_checked_paths(device, restore_inc,
                                                                                               monkeypatch):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    hot = _recorded(stream, K.inc, 2)
    monkeypatch.setattr(_stream_state, "CHECKING", True)  # (hazard checking notes each captured call)
    with stream.capture() as cap:
        stream.launch(K.inc, 1, 8, x, 8)
    assert len(cap.graph.nodes) == 1 and hot.captured == []
    monkeypatch.undo()
    with pytest.raises(gg.CaptureError), stream.capture():  # (its end raises the error it took)
        with pytest.raises(gg.CaptureError):
            device.zeros(8, np.float64)  # (forbidden while a capture runs: the capture takes the error)
        with pytest.raises(gg.CaptureError, match="invalidated"):
            stream.launch(K.inc, 1, 8, x, 8)  # (the checked path's refusal: the capture has an error)
    assert hot.captured == []


@pytest.mark.gpu
def test_on_a_gpu_a_typical_launch_is_the_cores_and_the_rest_the_checked_paths(monkeypatch):
    gpu = gg.Device("cuda")
    stream = gpu.stream()
    x = gpu.zeros(8, np.int32)
    load_kernel(gpu, K.fill)
    calls = []
    backend = stream._backend
    real = backend.stream_launch
    monkeypatch.setattr(backend, "stream_launch", lambda *args: calls.append(args) or real(*args))
    stream.launch(K.fill, 1, 8, x, 3, 8)  # typed, 1-D, common arguments: the compiled core's
    assert len(calls) == (0 if COMPILED else 1)
    stream.launch(K.fill, (1,), 8, x, 4, 8)  # a tuple shape: the Python path's
    stream.launch(K.fill, 1, 8, x, gg.Param(np.int32(5)), 8)  # a Param
    stream.launch(K.fill, 1, 8, x, 6, 8, shared_mem=16)
    assert len(calls) == (3 if COMPILED else 4)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 6, np.int32))
    with pytest.raises(ValueError, match="shared_mem: expected a non-negative int, got None"):
        stream.launch(K.fill, 1, 8, x, 1, 8, shared_mem=None)


class Accepting(Recording):
    """Hot calls that note each kernel launch and take it (nothing runs)."""

    def launch_kernel(self, *args: int) -> int:
        super().launch_kernel(*args)
        return 0


def test_a_launch_the_hot_call_takes_goes_no_further(device, restore_inc, monkeypatch):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    _recorded(stream, K.inc, 2)
    hot = Accepting(2)
    stream._hot = hot
    checked = []
    monkeypatch.setattr(type(device._backend), "stream_launch", lambda *args: checked.append(args))
    stream.launch(K.inc, 1, 8, x, 8)
    assert (len(hot.launches), len(checked)) == ((1, 0) if COMPILED else (0, 1))


def test_a_captured_launch_reaches_the_hot_call_with_the_record_the_checked_path_records(device, restore_inc):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    hot = _recorded(stream, K.inc, 2)
    other = device.zeros(8, np.float32)
    with stream.capture() as cap:
        stream.launch(K.inc, 1, 8, x, 8)  # refused by the recording: recorded by the checked path
        stream.launch(K.inc, 1, 8, x, np.int32(8))  # a NumPy scalar: the checked path's
        with pytest.raises(TypeError, match="expects float64 data"):
            stream.launch(K.inc, 1, 8, other, 8)
    recorded = [node.params for node in cap.graph.nodes]
    assert len(recorded) == 2
    if COMPILED:
        assert len(hot.captured) == 1
        backend_capture, record = hot.captured[0]
        # (The checked path's record names the function the CPU backend was given: here the test's Loaded.)
        assert backend_capture is not None and record.kernel is K.inc and record[1:] == recorded[0][1:]
        assert [type(v) for v in record.args] == [type(v) for v in recorded[0].args]  # (typed as nodes keep them)
        assert hot.launches[0][-1] == [x.ptr.to_bytes(8, "little"), (8).to_bytes(8, "little")]
    else:
        assert hot.captured == [] and hot.launches == []
    cap.graph.instantiate().launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 2.0))


@pytest.mark.gpu
def test_on_a_gpu_captured_launches_record_the_nodes_the_checked_path_records(monkeypatch):
    gpu = gg.Device("cuda")
    x = gpu.zeros(8, np.int32)
    load_kernel(gpu, K.fill)
    graphs = []
    for lane in ("compiled", "python"):
        stream = gpu.stream()
        if lane == "python":
            stream._hot_address = 0  # (no hot address: the checked path launches and records)
        calls = []
        backend = stream._backend
        real = backend.stream_launch
        monkeypatch.setattr(backend, "stream_launch",
                            lambda *args, calls=calls, real=real: calls.append(args) or real(*args))
        with stream.capture() as cap:
            stream.launch(K.fill, 1, 8, x, 3, 8)
            stream.launch(K.fill, 2, 4, x, 7, 8)
        monkeypatch.undo()
        assert len(calls) == (0 if lane == "compiled" and COMPILED else 2)
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

"""GraphExec.launch: the common case, which the compiled core (gpugraph._exec_state, compiled) launches itself
through the backend's hot calls (gpugraph.backends._hot), and every other case, which the Python path checks and
launches; and the lock that keeps the two apart. A recording HotCalls stands in for a backend's here: it answers
each call with a refusal, so that the Python path then makes the launch (as it does after any refusal), and the
results are the backend's own on every backend."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _exec_state
from gpugraph._argpack import Slots
from gpugraph._exec_state import KernelPatch
from gpugraph.backends._hot import HotCalls

COMPILED = not str(_exec_state.__file__).endswith(".py")
REFUSED = 1  # a driver's refusal (CUDA_ERROR_INVALID_VALUE): the Python path launches again and explains it


class Recording(HotCalls):
    """Hot calls that note each launch (with the executable graph's gate then) and refuse it."""

    def __init__(self, exe: gg.GraphExec) -> None:
        self.exe, self.launches = exe, []

    def graph_launch(self, graph_exec: int, stream: int) -> int:
        self.launches.append((graph_exec, stream, self.exe._lock.gate))
        return REFUSED


def _recorded(exe: gg.GraphExec, stream: gg.Stream) -> Recording:
    hot = Recording(exe)
    exe._hot, exe._hot_address, stream._hot_address = hot, 7, 9
    return hot


def test_the_common_case_reaches_the_hot_call_and_everything_else_the_python_path(device):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    graph = gg.Graph(device)
    graph.add_kernel(K.inc, 1, 8, x, 8)
    exe = graph.instantiate()
    hot = _recorded(exe, stream)
    exe.launch(stream)  # the first: its event-record nodes (none) are looked up by the Python path
    assert hot.launches == []
    exe.launch(stream)
    exe.launch(stream)
    with stream.capture() as cap:  # into a capture: embedded as a child graph by the Python path
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 3.0))
    assert [n.kind for n in cap.graph.nodes] == [gg.NodeKind.GRAPH]
    # (Compiled, the two launches outside the capture reached the hot call, the gate closed while they did.)
    assert hot.launches == ([(7, 9, 1)] * 2 if COMPILED else [])
    other = device.stream()  # a stream without a hot address: the Python path's
    exe.launch(other)
    other.synchronize()
    assert len(hot.launches) == (2 if COMPILED else 0) and getattr(exe._lock, "gate", 0) == 0
    exe.close()
    with pytest.raises(gg.GraphError, match="closed"):
        exe.launch(stream)
    assert len(hot.launches) == (2 if COMPILED else 0)


def test_params_are_patched_before_the_hot_launch_under_the_lock(device):
    stream = device.stream()
    x = device.zeros(8, np.float64)
    count = gg.Param(8)
    graph = gg.Graph(device)
    graph.add_kernel(K.inc, 1, 8, x, count)
    with graph.instantiate() as exe:
        hot = _recorded(exe, stream)
        exe.launch(stream)
        exe.launch(stream)
        count.value = 4  # pending: patched, then launched, under the lock (a patch runs Python)
        exe.launch(stream)
        stream.synchronize()
        assert hot.launches == ([(7, 9, 1), (7, 9, 2)] if COMPILED else [])
    np.testing.assert_array_equal(x.to_numpy(), np.array([3.0] * 4 + [2.0] * 4))


class OwnStream(gg.Stream):
    """A Stream subclass: refused as every call taking a Stream refuses it."""


def test_bad_streams_are_refused_by_the_python_path(device):
    graph = gg.Graph(device)
    graph.add_kernel(K.inc, 1, 8, device.zeros(8, np.float64), 8)
    with graph.instantiate() as exe:
        stream = device.stream()
        hot = _recorded(exe, stream)
        exe.launch(stream)  # (its event-record nodes looked up: the next launches may take the hot call)
        own = OwnStream(device)
        assert own._hot_address == 0  # (no hot address: its launches take the checked path, which refuses it)
        for bad in (None, object(), own):
            with pytest.raises(TypeError, match="expected a Stream"):
                exe.launch(bad)
        assert hot.launches == []


def test_the_legacy_stream_and_graphs_recording_events_take_the_python_path(device):
    x = device.zeros(8, np.float64)
    graph = gg.Graph(device)
    graph.add_kernel(K.inc, 1, 8, x, 8)
    with graph.instantiate() as exe:
        stream = device.default_stream
        hot = _recorded(exe, stream)
        assert device.default_stream._hot_address == 9  # (as _recorded set it: the legacy stream is checked anyway)
        stream._hot_address = 0  # (as Stream gives the legacy stream)
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
        assert hot.launches == []
    event = device.event()
    recording = gg.Graph(device)
    recording.add_event_record(event, after=recording.add_kernel(K.inc, 1, 8, x, 8))
    with recording.instantiate() as exe:
        stream = device.stream()
        hot = _recorded(exe, stream)
        for _ in range(3):
            exe.launch(stream)
        stream.synchronize()
        assert hot.launches == []
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 6.0))


class Raising(HotCalls):
    def graph_launch(self, graph_exec: int, stream: int) -> int:
        raise RuntimeError("the driver's loader is missing")


@pytest.mark.skipif(not COMPILED, reason="plain, every launch takes the Python path (no hot call)")
def test_an_error_of_the_hot_call_leaves_the_lock_free_and_unpatched_params_pending(device):
    stream = device.stream()
    count = gg.Param(8)
    graph = gg.Graph(device)
    graph.add_kernel(K.inc, 1, 8, device.zeros(8, np.float64), count)
    with graph.instantiate() as exe:
        exe.launch(stream)
        exe._hot, exe._hot_address, stream._hot_address = Raising(), 7, 9
        for value in (None, 4):
            if value is not None:
                count.value = value
            with pytest.raises(RuntimeError, match="loader"):
                exe.launch(stream)
            assert exe._lock.gate == 0 and _in_thread(lambda: exe._lock.acquire(False) and not exe._lock.release())
        assert not exe._params.pending  # (patched before the call that failed)
        exe._hot = None
        exe.launch(stream)
        stream.synchronize()


@pytest.mark.gpu
def test_on_a_gpu_the_core_launches_the_common_case_itself(monkeypatch):
    gpu = gg.Device("cuda")
    stream = gpu.stream()
    x = gpu.zeros(8, np.float64)
    graph = gg.Graph(gpu)
    graph.add_kernel(K.inc, 1, 8, x, 8)
    exe = graph.instantiate()
    launches = []
    monkeypatch.setattr(exe, "_launch", lambda *args, real=exe._launch: launches.append(args) or real(*args))
    exe.launch(stream)  # the first: its event-record nodes (none) are looked up by the Python path
    exe.launch(stream)
    exe.launch(stream)
    stream.synchronize()
    assert len(launches) == (1 if COMPILED else 3)
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 3.0))
    with stream.capture() as cap:  # into a capture: embedded by the Python path
        exe.launch(stream)
    assert len(launches) == (2 if COMPILED else 4) and [n.kind for n in cap.graph.nodes] == [gg.NodeKind.GRAPH]
    count = gg.Param(8)
    patched = gg.Graph(gpu)
    patched.add_kernel(K.inc, 1, 8, x, count)
    with patched.instantiate() as exe2:
        monkeypatch.setattr(exe2, "_launch", lambda *args, real=exe2._launch: launches.append(args) or real(*args))
        exe2.launch(stream)
        exe2.launch(stream)
        count.value = 4  # pending: patched, then launched, by the core
        exe2.launch(stream)
        stream.synchronize()
        assert len(launches) == (3 if COMPILED else 7)
    np.testing.assert_array_equal(x.to_numpy(), np.array([6.0] * 4 + [5.0] * 4))
    exe.close()
    with pytest.raises(gg.GraphError, match="closed"):
        exe.launch(stream)
    with pytest.raises(TypeError, match="expected a Stream"), patched.instantiate() as exe3:
        exe3.launch(None)


def test_a_hold_of_the_lock_waits_for_a_launch_in_the_driver_and_keeps_new_ones_out():
    lock = _exec_state.TurnLock()
    lock.gate = 1  # (as a compiled launch leaves it while the driver launches, the GIL released)
    held = threading.Event()

    def hold() -> None:
        with lock:
            held.set()

    thread = threading.Thread(target=hold)
    thread.start()
    assert not held.wait(0.2)  # (it waits for the launch; however slow the machine, it cannot have held it yet)
    lock.gate -= 1  # the launch returned
    thread.join(30)
    assert held.is_set() and lock.gate == 0
    with lock:
        assert lock.gate == 2  # a compiled launch starts only at 0
        with lock:  # reentrant, as threading.RLock
            assert lock.gate == 4
        assert not _in_thread(lambda: lock.acquire(False))  # another thread's try fails at once
    assert lock.gate == 0 and _in_thread(lambda: lock.acquire(False) and (lock.release() or True))


def _in_thread(call):
    result = []
    thread = threading.Thread(target=lambda: result.append(call()))
    thread.start()
    thread.join(30)
    return result[0]


class Setting(HotCalls):
    """Hot calls that note each node set with its first slots' bytes, answering each with the next of ``answers``."""

    def __init__(self, answers: list[int]) -> None:
        self.answers, self.sets = answers, []

    def exec_kernel_node_set(self, graph_exec: int, context: int, node: int, function: int, grid_x: int,
                             grid_y: int, grid_z: int, block_x: int, block_y: int, block_z: int, shared_mem: int,
                             kernel_params: int) -> int:
        pointers = (ctypes.c_void_p * 2).from_address(kernel_params)
        self.sets.append((graph_exec, context, node, function, (grid_x, grid_y, grid_z), (block_x, block_y, block_z),
                          shared_mem, [ctypes.string_at(pointers[i], 8) for i in range(2)]))
        return self.answers.pop(0)


def test_a_kernel_patch_writes_the_params_current_values_and_sets_the_node_in_its_context(device):
    x = device.zeros(8, np.float64)
    array, count = gg.Param(x), gg.Param(np.int32(3))
    slots = Slots(2)
    used, failed = [], []
    hot = Setting([201, 0, 0, 700, 700])  # not in the context, then done; done; a refusal, again once current
    patch = KernelPatch(hot, 11, 13, 17, 19, (2, 1, 1), (8, 1, 1), 16, slots,
                        [(0, ord("P"), array, True), (1, ord("i"), count, False)],
                        lambda: used.append(True), lambda call, code: failed.append((call, code)))
    patch()
    expected = (11, 13, 17, 19, (2, 1, 1), (8, 1, 1), 16, [x.ptr.to_bytes(8, "little"), (3).to_bytes(8, "little")])
    assert hot.sets == [expected, expected] and used == [True] and failed == []
    count.value = -4
    patch()
    assert hot.sets[-1][-1][1] == (-4 % 2**32).to_bytes(4, "little") + bytes(4)
    patch()
    assert failed == [("cuGraphExecKernelNodeSetParams", 700)] and used == [True, True]
    count.value = 2**20  # (an untyped Param: a Python int, which a short's slot does not hold)
    wide = KernelPatch(hot, 11, 13, 17, 19, (1, 1, 1), (1, 1, 1), 0, Slots(2), [(1, ord("h"), count, False)],
                       lambda: None, lambda call, code: None)  # (a slot its value does not fit: gpugraph's error)
    with pytest.raises(TypeError, match="does not fit its kernel's slot 1"):
        wide()
    assert len(hot.sets) == 5  # (nothing more set)


@pytest.mark.gpu
def test_on_a_gpu_param_patches_write_each_slot_type():
    gpu = gg.Device("cuda")
    source = ('extern "C" __global__ void mix(double* out, float a, double b, int c, unsigned int d, long long e, '
              'short f, unsigned char g, unsigned long long h, const double* src) {'
              ' out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = (double)e; out[5] = f; out[6] = g;'
              ' out[7] = (double)h; out[8] = src[0]; }')
    mix = gg.Kernel(source, "mix")
    out = gpu.zeros(9, np.float64)
    first, second = gpu.asarray(np.array([1.5])), gpu.asarray(np.array([-2.25]))
    params = [gg.Param(0.0), gg.Param(0.0), gg.Param(0), gg.Param(0), gg.Param(0), gg.Param(0), gg.Param(0),
              gg.Param(0), gg.Param(first)]
    graph = gg.Graph(gpu)
    graph.add_kernel(mix, 1, 1, out, *params)
    exe = graph.instantiate()
    stream = gpu.stream()
    values = [0.25, 1e300, -7, 4_000_000_000, -(2**40), -300, 200, 2**63 + 5, second]
    for param, value in zip(params, values):
        param.value = value
    exe.launch(stream)
    stream.synchronize()
    expected = [0.25, 1e300, -7, 4_000_000_000, -(2**40), -300, 200, float(2**63 + 5), -2.25]
    np.testing.assert_array_equal(out.to_numpy(), np.array(expected))

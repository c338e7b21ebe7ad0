"""GraphExec.set_params: the common case (new arguments alone for a kernel node taking no Params), which the compiled
core (gpugraph._exec_state, compiled) sets itself through the backend's hot node setter with the arguments packed by
gpugraph._argpack, and every other case, which the checked path sets or refuses. A recording HotCalls stands in for a
backend's here: it notes each set with its arguments as packed, and refuses it, so that the checked path then sets
the node (as after any refusal), and the results are the backend's own on every backend."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _exec_state
from gpugraph._kernel import keep_function, loaded_function
from gpugraph._placement import load_kernel
from gpugraph.backends._hot import HotCalls

COMPILED = not str(_exec_state.__file__).endswith(".py")
REFUSED = 201  # the driver's CUDA_ERROR_INVALID_CONTEXT: the checked path sets it again, in the device's context
FUNCTION, EXEC, CONTEXT, NODE = 7, 11, 13, 17  # the addresses the recording stands in for


class Recording(HotCalls):
    """Hot calls that note each node set, with the argument slots as packed, and refuse it."""

    def __init__(self, slots: int) -> None:
        self.slots, self.sets = slots, []

    def node_address(self, node: object) -> int:
        return NODE

    def exec_kernel_node_set(self, graph_exec: int, context: int, node: int, function: int, grid_x: int,
                             grid_y: int, grid_z: int, block_x: int, block_y: int, block_z: int, shared_mem: int,
                             kernel_params: int) -> int:
        pointers = (ctypes.c_void_p * self.slots).from_address(kernel_params)
        packed = [ctypes.string_at(pointers[i], 8) for i in range(self.slots)]
        self.sets.append((graph_exec, context, node, function, (grid_x, grid_y, grid_z), (block_x, block_y, block_z),
                          shared_mem, packed))
        return REFUSED


@pytest.fixture
def recorded_fill(device):
    """K.fill loaded with a Layout (restored after the test)."""
    load_kernel(device, K.fill)
    function = loaded_function(K.fill, device)
    keep_function(K.fill, device, K.WithLayout(function, K.fill, FUNCTION))
    yield
    keep_function(K.fill, device, function)


def _counting(monkeypatch, backend, name):
    """Count the calls of the backend's ``name`` (the checked path's), still making them."""
    calls = []
    real = getattr(backend, name)
    monkeypatch.setattr(backend, name, lambda *args: calls.append(args) or real(*args))
    return calls


def _recorded(exe: gg.GraphExec, slots: int) -> Recording:
    hot = Recording(slots)
    exe._hot, exe._hot_set, exe._hot_context = hot, EXEC, CONTEXT
    return hot


def test_the_common_case_reaches_the_hot_setter_packed_and_everything_else_the_checked_path(device, recorded_fill):
    stream = device.stream()
    x, y = device.zeros(8, np.int32), device.zeros(8, np.int32)
    graph = gg.Graph(device)
    node = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
    with graph.instantiate() as exe:
        hot = _recorded(exe, 3)
        exe.set_params(node, y, 9, 8)  # the common case: refused by the recording, set by the checked path
        exe.set_params(node, y, np.int32(7), 8)  # a NumPy scalar: the converter's
        exe.set_params(node, y, 5, 8, grid=1)  # a shape: the checked path's
        exe.set_params(node, y, gg.Param(np.int32(6)), 8)  # a Param
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), np.full(8, 6, np.int32))
        expected = [(EXEC, CONTEXT, NODE, FUNCTION, (1, 1, 1), (8, 1, 1), 0,
                     [y.ptr.to_bytes(8, "little"), (9).to_bytes(8, "little"), (8).to_bytes(8, "little")])]
        assert hot.sets == (expected if COMPILED else [])
        assert exe._changed


def test_nodes_taking_params_other_graphs_and_bad_arguments_take_the_checked_path(device, recorded_fill):
    x = device.zeros(8, np.int32)
    graph = gg.Graph(device)
    count = gg.Param(4, dtype=np.int32)
    with_param = graph.add_kernel(K.fill, 1, 8, x, 2, count)
    other = gg.Graph(device).add_kernel(K.fill, 1, 8, x, 1, 8)
    with graph.instantiate() as exe:
        hot = _recorded(exe, 3)
        with pytest.raises(TypeError):
            exe.set_params(with_param, x, "nine", 8)
        assert not exe._changed  # (nothing was set)
        with pytest.raises(gg.GraphError, match="not a node of the graph"):
            exe.set_params(other, x, 9, 8)
        exe.set_params(with_param, x, 7, 8)  # the node took a Param: forgotten by the checked path
        assert hot.sets == [] and set(exe._params.positions()) == set()
        exe._hot_set = 0  # (no hot node setter: a device_launch graph's, say)
        exe.set_params(with_param, x, 7, 8)
        assert hot.sets == []
    with pytest.raises(gg.GraphError, match="closed"):
        exe.set_params(with_param, x, 9, 8)


class Accepting(Recording):
    """Hot calls that note each node set and take it (the backend's node is left as it was)."""

    def exec_kernel_node_set(self, *args: int) -> int:
        super().exec_kernel_node_set(*args)
        return 0


def test_a_set_the_hot_setter_takes_keeps_the_record_the_checked_path_keeps(device, recorded_fill):
    x, y = device.zeros(8, np.int32), device.zeros(8, np.int32)
    records = []
    for hot in (Accepting(3), None):
        graph = gg.Graph(device)
        node = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
        with graph.instantiate() as exe:
            if hot is not None:
                exe._hot, exe._hot_set, exe._hot_context = hot, EXEC, CONTEXT
            exe.set_params(node, y, 9, 8)
            assert exe._changed
            if hot is not None:
                assert len(hot.sets) == (1 if COMPILED else 0)  # (compiled, the core set it itself)
            records.append(exe._read_layout().params[0])
    taken, checked = records
    assert taken.args[0] is y and taken.args[1:] == checked.args[1:] == (9, 8)
    assert [type(v) for v in taken.args] == [type(v) for v in checked.args]
    assert (taken.kernel, taken.grid, taken.block, taken.shared_mem, taken.device) == \
        (checked.kernel, checked.grid, checked.block, checked.shared_mem, checked.device)


@pytest.mark.gpu
def test_on_a_gpu_set_params_common_case_is_the_cores_and_keeps_the_records_the_checked_path_keeps(monkeypatch):
    gpu = gg.Device("cuda")
    stream = gpu.stream()
    x = gpu.zeros(8, np.int32)
    records = []
    for lane in ("compiled", "python"):
        y = gpu.zeros(8, np.int32)
        graph = gg.Graph(gpu)
        node = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
        exe = graph.instantiate()
        if lane == "python":
            exe._hot_set = 0  # (no hot node setter: the checked path sets it)
        sets = _counting(monkeypatch, gpu._backend, "exec_set_node")
        exe.set_params(node, y, 9, 8)
        exe.launch(stream)
        stream.synchronize()
        monkeypatch.undo()
        assert len(sets) == (0 if lane == "compiled" and COMPILED else 1)
        np.testing.assert_array_equal(y.to_numpy(), np.full(8, 9, np.int32))
        records.append(exe._read_layout().params[0])
    compiled, python = records
    assert compiled.args[1:] == python.args[1:] and [type(v) for v in compiled.args] == [type(v) for v in python.args]


@pytest.mark.gpu
def test_on_a_gpu_params_and_bad_arguments_are_the_checked_paths():
    gpu = gg.Device("cuda")
    stream = gpu.stream()
    x = gpu.zeros(8, np.int32)
    graph = gg.Graph(gpu)
    plain = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
    count = gg.Param(4, dtype=np.int32)
    with_param = graph.add_kernel(K.fill, 1, 8, x, 2, count, after=plain)
    other = gg.Graph(gpu).add_kernel(K.fill, 1, 8, x, 1, 8)
    exe = graph.instantiate()
    with pytest.raises(TypeError):
        exe.set_params(plain, x, "nine", 8)  # the Python path explains it
    assert not exe._changed  # (nothing was set)
    with pytest.raises(gg.GraphError, match="not a node of the graph"):
        exe.set_params(other, x, 9, 8)
    exe.set_params(plain, x, gg.Param(np.int32(5)), 8)  # a Param argument: registered by the Python path
    exe.set_params(with_param, x, 7, 8)  # the node took a Param: forgotten by the Python path
    count.value = 8  # no longer taken by the node: no patch
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 7, np.int32))
    assert set(exe._params.positions()) == {0}  # the node given a Param takes one; the other no longer does
    exe.close()
    with pytest.raises(gg.GraphError, match="closed"):
        exe.set_params(plain, x, 9, 8)


@pytest.mark.gpu
def test_a_param_patch_from_a_new_thread_makes_the_context_current_through_the_backend():
    gpu = gg.Device("cuda")
    stream = gpu.stream()
    x, z = gpu.zeros(8, np.int32), gpu.zeros(8, np.float64)
    graph = gg.Graph(gpu)
    node = graph.add_kernel(K.fill, 1, 8, x, 1, 8)
    count = gg.Param(8)
    graph.add_kernel(K.inc, 1, 8, z, count, after=node)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    errors = []

    def work():
        try:
            count.value = 4  # the thread's first call: a launch that patches (no context current yet)
            exe.launch(stream)
            exe.set_params(node, x, 5, 8)
            exe.launch(stream)
            stream.synchronize()
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 5, np.int32))
    np.testing.assert_array_equal(z.to_numpy(), np.array([3.0] * 4 + [1.0] * 4))

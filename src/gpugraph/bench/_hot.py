"""The "hot" workload: each CUDA hot path of gpugraph beside the in-process floor (the thinnest Python call into C
making the same driver call: ``_thinnest.Calls``, built with the package) and the peers' own call for the same
work (raw cuda-bindings, CuPy, PyTorch, cuda.core), timed in interleaved rounds of one process, so that every
ratio comes from one run and drift hits each alike.

Paths: a graph launch of a 1,000-node chain of tiny kernels (a synchronize after each, untimed); a stream launch
of one tiny kernel (rounds of 100, a synchronize after each round, untimed); ``exe.set_params`` of one kernel node;
a Param set followed by the launch that patches it (against the floor's set + launch). Peers not installed, and
the floor where it was not built, are left out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import Graph, Kernel, Param
from .._placement import load_kernel
from ._core import Options, Row, ValidationError, gc_held, workload
from ._gpu import TINY

NODES = 1000  # the chain's length
BATCH = 100  # stream launches and set_params calls per timed round
Timed = Callable[[], float]  # one timed run: its µs per call


def _interleaved(variants: dict[str, Timed], options: Options, rounds: int) -> dict[str, list[float]]:
    """Each variant's µs per call over ``rounds`` rounds that run every variant once, after ``options.warmup``
    rounds more (the garbage collector held off)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    with gc_held():
        for round_ in range(options.warmup + rounds):
            for name, fn in variants.items():
                value = fn()
                if round_ >= options.warmup:
                    samples[name].append(value)
    return samples


def _one(call: Callable[[], object], after: Callable[[], object]) -> Timed:
    """One call timed, then ``after`` (a synchronize), untimed."""
    def timed() -> float:
        start = time.perf_counter()
        call()
        seconds = time.perf_counter() - start
        after()
        return seconds * 1e6
    return timed


def _batch(call: Callable[[], object], after: Callable[[], object]) -> Timed:
    """``BATCH`` calls timed, then ``after``, untimed: µs per call."""
    def timed() -> float:
        start = time.perf_counter()
        for _ in range(BATCH):
            call()
        seconds = time.perf_counter() - start
        after()
        return seconds * 1e6 / BATCH
    return timed


def _rows(path: str, samples: dict[str, list[float]], ours: str, floor_target: str, peer_target: str) -> list[Row]:
    """The rows of one path: each variant's, then gpugraph's against the floor and the fastest peer."""
    rows = [Row.of("hot", f"{path}: {name}", "µs", values) for name, values in samples.items()]
    mine = statistics.median(samples[ours])
    thinnest = samples.get("thinnest Python call into C")
    if thinnest:
        rows.append(Row.of("hot", f"{path}: gpugraph / thinnest call", "×", [mine / statistics.median(thinnest)],
                           floor_target))
    peers = {name: statistics.median(v) for name, v in samples.items() if name != ours and not name.startswith("thin")}
    if peer_target and peers:
        fastest = min(peers, key=peers.__getitem__)
        rows.append(Row.of("hot", f"{path}: gpugraph / fastest peer ({fastest})", "×", [mine / peers[fastest]],
                           peer_target))
    return rows


def _thinnest(function: int, x: Any) -> Any:
    """The floor's calls for tiny(x, 32), or None where ``_thinnest`` was not built (setup.py says why)."""
    try:
        from ._thinnest import Calls  # type: ignore[import-not-found]  # (an optional extension)
    except ImportError:
        return None
    return Calls(function, x.ptr)


@workload("hot", "GPU: each hot path beside the thinnest Python call into C and the peers, interleaved", gpu=True)
def hot(device: Any, options: Options) -> list[Row]:
    kernel, stream = Kernel(TINY, "tiny"), device.stream()
    x = device.zeros(32, np.float32)
    function = load_kernel(device, kernel)
    calls = _thinnest(int(function.handle), x)
    rows = _graph_launch(device, kernel, stream, x, calls, options)
    rows += _stream_launch(device, kernel, stream, x, calls, options)
    rows += _set_params(device, kernel, stream, x, calls, options)
    rows += _param_patch(device, kernel, stream, x, calls, options)
    stream.synchronize()
    if not np.isfinite(x.to_numpy()).all():
        raise ValidationError("hot: the tiny kernel's array holds non-finite values")
    return rows


def _set_params(device: Any, kernel: Kernel, stream: Any, x: Any, calls: Any, options: Options) -> list[Row]:
    """``exe.set_params`` of one kernel node, the same arguments each time, against the floor's."""
    graph = Graph(device)
    node = graph.add_kernel(kernel, 1, 32, x, 32)
    with graph.instantiate() as exe:
        raw_exe, raw_node = int(exe._handle.handle), int(node._handle)
        variants = {"gpugraph exe.set_params": _batch(lambda: exe.set_params(node, x, 32), stream.synchronize)}
        if calls is not None:
            variants["thinnest Python call into C"] = _batch(lambda: calls.set_params(raw_exe, raw_node),
                                                             stream.synchronize)
        return _rows("set_params of a kernel node", _interleaved(variants, options, 100), "gpugraph exe.set_params",
                     "≤ 1.5", "")


def _param_patch(device: Any, kernel: Kernel, stream: Any, x: Any, calls: Any, options: Options) -> list[Row]:
    """A Param of a one-node graph set, and the launch that patches its node, against the floor's set_params and
    graph launch."""
    graph = Graph(device)
    count = Param(32)
    node = graph.add_kernel(kernel, 1, 32, x, count)
    values = iter(range(1 << 62))
    with graph.instantiate() as exe:
        raw_exe, raw_node, raw_stream = int(exe._handle.handle), int(node._handle), stream.ptr

        def set_and_launch() -> None:
            count.value = 31 + next(values) % 2  # (a new value each time: each launch patches the node)
            exe.launch(stream)
        variants = {"gpugraph Param set + launch": _one(set_and_launch, stream.synchronize)}
        if calls is not None:
            def floor_set_and_launch() -> None:
                calls.set_params(raw_exe, raw_node)
                calls.graph_launch(raw_exe, raw_stream)
            variants["thinnest Python call into C"] = _one(floor_set_and_launch, stream.synchronize)
        return _rows("Param set + patched launch, one-node graph", _interleaved(variants, options, 300),
                     "gpugraph Param set + launch", "≤ 1.5", "")


def _graph_launch(device: Any, kernel: Kernel, stream: Any, x: Any, calls: Any, options: Options) -> list[Row]:
    """A 1,000-node chain's graph launch: gpugraph, the floor, raw cuda-bindings and the peers' captured chains."""
    from cuda.bindings import driver as cu
    y = device.zeros(32, np.float32)
    with stream.capture() as cap:
        for _ in range(NODES):
            stream.launch(kernel, 1, 32, y, 32)
    launched = [0]
    with cap.graph.instantiate() as exe:
        handle, stream_handle = exe._handle.handle, stream._handle.handle
        raw_exe, raw_stream = int(handle), stream.ptr

        def ours() -> None:
            exe.launch(stream)
            launched[0] += 1
        variants = {"gpugraph GraphExec.launch": _one(ours, stream.synchronize)}
        if calls is not None:
            def thinnest() -> None:
                calls.graph_launch(raw_exe, raw_stream)
                launched[0] += 1
            variants["thinnest Python call into C"] = _one(thinnest, stream.synchronize)

        def raw() -> None:
            cu.cuGraphLaunch(handle, stream_handle)
            launched[0] += 1
        variants["raw cuda-bindings cuGraphLaunch"] = _one(raw, stream.synchronize)
        variants.update(_peer_graphs(device))
        rows = _rows(f"graph launch, {NODES}-node chain", _interleaved(variants, options, 300),
                     "gpugraph GraphExec.launch", "≤ 1.10", "≤ 1")
    stream.synchronize()
    if y.to_numpy()[0] != NODES * launched[0]:
        raise ValidationError(f"hot: the chain ran {y.to_numpy()[0]:g} kernels, not {NODES * launched[0]}")
    return rows


def _peer_graphs(device: Any) -> dict[str, Timed]:
    """The peers' launches of their own captured chain of ``NODES`` tiny kernels, each on its own stream."""
    variants: dict[str, Timed] = {}
    try:
        import cupy as cp
    except ImportError:
        pass
    else:
        with cp.cuda.Device(device.index):
            raw_kernel, cx = cp.RawKernel(TINY, "tiny"), cp.zeros(32, cp.float32)
            cupy_stream = cp.cuda.Stream(non_blocking=True)
            with cupy_stream:
                cupy_stream.begin_capture()
                for _ in range(NODES):
                    raw_kernel((1,), (32,), (cx, np.int32(32)))
                cupy_graph = cupy_stream.end_capture()
            cupy_graph.upload(cupy_stream)
        variants["CuPy Graph.launch"] = _one(lambda: cupy_graph.launch(cupy_stream), cupy_stream.synchronize)
    try:
        import torch
    except ImportError:
        pass
    else:
        tensor = torch.zeros(32, device=f"cuda:{device.index}")
        torch_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(torch_graph):
            for _ in range(NODES):
                tensor.add_(1.0)
        torch.cuda.synchronize(device.index)
        current = torch.cuda.current_stream(device.index)
        variants["PyTorch CUDAGraph.replay"] = _one(torch_graph.replay, current.synchronize)
    core = _cuda_core_graph(device)
    if core is not None:
        variants["cuda.core Graph.launch"] = core
    return variants


def _cuda_core_graph(device: Any) -> Timed | None:
    """cuda.core's launch of its own captured chain (GraphBuilder), if cuda.core is installed and has graphs."""
    try:
        from cuda.core import Device as CoreDevice
        from cuda.core import LaunchConfig, Program, launch
    except ImportError:
        return None
    core_device = CoreDevice(device.index)
    core_device.set_current()
    core_kernel = Program(TINY, code_type="c++").compile("cubin").get_kernel("tiny")
    core_stream = core_device.create_stream()
    if not hasattr(core_stream, "create_graph_builder"):  # (a cuda.core without graphs)
        return None
    buffer = core_device.allocate(32 * 4, stream=core_stream)
    config, args = LaunchConfig(grid=1, block=32), (buffer, np.int32(32))
    builder = core_stream.create_graph_builder().begin_building()
    for _ in range(NODES):
        launch(builder, config, core_kernel, *args)
    core_graph = builder.end_building().complete()
    core_graph.upload(core_stream)
    core_stream.sync()
    return _one(lambda: core_graph.launch(core_stream), core_stream.sync)


def _stream_launch(device: Any, kernel: Kernel, stream: Any, x: Any, calls: Any, options: Options) -> list[Row]:
    """A tiny kernel's stream launch: gpugraph, the floor, raw cuda-bindings and the peers' launches."""
    from cuda.bindings import driver as cu
    function = load_kernel(device, kernel)
    with function.lock:
        params = function.pack((x, 32))
    handle, stream_handle, raw_stream = function.handle, stream._handle.handle, stream.ptr
    variants = {"gpugraph Stream.launch": _batch(lambda: stream.launch(kernel, 1, 32, x, 32), stream.synchronize)}
    if calls is not None:
        variants["thinnest Python call into C"] = _batch(lambda: calls.launch(raw_stream), stream.synchronize)
    variants["raw cuda-bindings cuLaunchKernel"] = _batch(
        lambda: cu.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, stream_handle, params, 0), stream.synchronize)
    try:
        import cupy as cp
    except ImportError:
        pass
    else:
        with cp.cuda.Device(device.index):
            raw_kernel, cx = cp.RawKernel(TINY, "tiny"), cp.zeros(32, cp.float32)
            cupy_stream, n = cp.cuda.Stream(non_blocking=True), np.int32(32)
        launch_cupy = _batch(lambda: raw_kernel((1,), (32,), (cx, n)), cupy_stream.synchronize)

        def cupy_launch() -> float:
            with cupy_stream:  # (its launches go to the current stream: this one, made current untimed)
                return launch_cupy()
        variants["CuPy RawKernel"] = cupy_launch
    try:
        import torch
    except ImportError:
        pass
    else:
        tensor = torch.zeros(32, device=f"cuda:{device.index}")
        variants["PyTorch tensor.add_"] = _batch(lambda: tensor.add_(1.0), torch.cuda.current_stream(device.index)
                                                 .synchronize)
    return _rows("stream launch of a tiny kernel", _interleaved(variants, options, 100), "gpugraph Stream.launch",
                 "≤ 1.10", "< 1")

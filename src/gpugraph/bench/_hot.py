"""The "hot" workload: each CUDA hot path of gpugraph beside the in-process floor (the thinnest Python call into C
making the same driver call, the GIL held: ``_thinnest.Calls``, built with the package) and the peers' call for the
same work (CuPy, PyTorch, cuda.core; raw cuda-bindings as a reference), timed in interleaved rounds of one process
(the order rotating each round), so that every ratio comes from one run and drift hits each alike.

Paths: a graph launch of a 1,000-node chain of tiny kernels (a synchronize after each, untimed); a stream launch of
one tiny kernel (rounds of 100, a synchronize after each round, untimed); ``exe.set_params`` of one kernel node; a
Param set followed by the launch that patches it (against the floor's set + launch); capture and explicit build
of a 1,000-node chain, per node. Every path's work is checked: each tiny kernel adds 1 to its array's first 32
elements, and each array must hold its count of launches. Peers not installed are left out; so is the floor
where the build left it out (setup.py says why), and an error importing a floor that was built is raised.
"""

from __future__ import annotations

import importlib.util
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import Graph, Kernel, Param
from .._placement import load_kernel
from ._core import Options, Row, ValidationError, gc_held, workload
from ._gpu import TINY, cuda_core_tiny

NODES = 1000  # the chain's length
BATCH = 100  # stream launches and set_params calls per timed round
THINNEST = "thinnest Python call into C"
Timed = Callable[[], float]  # one timed run: its µs per call


class Counted:
    """A device array of 32 float32 that tiny kernels add 1 to, and the number of kernels that ran on it."""

    def __init__(self, device: Any) -> None:
        self.array, self.kernels = device.zeros(32, np.float32), 0

    def check(self, what: str) -> None:
        got = self.array.to_numpy()
        if not (got == self.kernels).all():
            raise ValidationError(f"hot: {what} ran {got[0]:g} kernels, not {self.kernels}")


def _interleaved(variants: dict[str, Timed], rounds: int, warmup: int) -> dict[str, list[float]]:
    """Each variant's µs per call over ``rounds`` rounds that run every variant once, in an order rotating each
    round, after ``warmup`` rounds more (the garbage collector held off)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    with gc_held():
        for round_ in range(warmup + rounds):
            shift = round_ % len(order)
            for name, fn in order[shift:] + order[:shift]:
                value = fn()
                if round_ >= warmup:
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


def _batch(call: Callable[[], object], after: Callable[[], object], count: int = BATCH) -> Timed:
    """``count`` calls timed, then ``after``, untimed: µs per call."""
    def timed() -> float:
        start = time.perf_counter()
        for _ in range(count):
            call()
        seconds = time.perf_counter() - start
        after()
        return seconds * 1e6 / count
    return timed


def _counted_batch(counted: Counted, call: Callable[[], object], after: Callable[[], object]) -> Timed:
    """``_batch`` of ``call``, each a tiny kernel on ``counted``'s array, counted there."""
    timed = _batch(call, after)

    def run() -> float:
        counted.kernels += BATCH
        return timed()
    return run


def _rows(path: str, samples: dict[str, list[float]], ours: str, floor_target: str, peer_target: str,
          unit: str = "µs") -> list[Row]:
    """The rows of one path: each variant's; then gpugraph's against the floor, and against the fastest peer (raw
    cuda-bindings is a reference, not a peer)."""
    rows = [Row.of("hot", f"{path}: {name}", unit, values) for name, values in samples.items()]
    mine = statistics.median(samples[ours])
    if THINNEST in samples:
        floor = statistics.median(samples[THINNEST])
        rows.append(Row.of("hot", f"{path}: gpugraph / thinnest call", "×", [mine / floor], floor_target))
    peers = {name: statistics.median(values) for name, values in samples.items()
             if name not in (ours, THINNEST) and not name.startswith("raw ")}
    if peer_target and peers:
        fastest = min(peers, key=peers.__getitem__)
        rows.append(Row.of("hot", f"{path}: gpugraph / fastest peer ({fastest})", "×", [mine / peers[fastest]],
                           peer_target))
    return rows


def _thinnest(function: int, x: Any) -> Any:
    """The floor's calls for tiny(x, 32), or None where setup.py did not build ``_thinnest``."""
    if importlib.util.find_spec(f"{__package__}._thinnest") is None:
        return None
    from ._thinnest import Calls  # type: ignore[import-not-found]  # (an optional extension)
    return Calls(function, x.ptr)


@workload("hot", "GPU: each hot path beside the thinnest Python call into C and the peers, interleaved", gpu=True)
def hot(device: Any, options: Options) -> list[Row]:
    kernel, stream = Kernel(TINY, "tiny"), device.stream()
    rounds = 15 * options.repeats  # (per-call figures of a few µs: many short samples)
    rows = _graph_launch(device, kernel, stream, rounds, options)
    rows += _stream_launch(device, kernel, stream, rounds, options)
    rows += _set_params(device, kernel, stream, rounds, options)
    rows += _param_patch(device, kernel, stream, rounds, options)
    rows += _build_and_capture(device, kernel, stream, options)
    return rows


def _calls(device: Any, kernel: Kernel, counted: Counted) -> Any:
    return _thinnest(int(load_kernel(device, kernel).handle), counted.array)


def _graph_launch(device: Any, kernel: Kernel, stream: Any, rounds: int, options: Options) -> list[Row]:
    """A 1,000-node chain's graph launch: gpugraph, the floor, raw cuda-bindings and the peers' captured chains."""
    from cuda.bindings import driver as cu
    ours = Counted(device)
    calls = _calls(device, kernel, ours)
    with stream.capture() as cap:
        for _ in range(NODES):
            stream.launch(kernel, 1, 32, ours.array, 32)
    with cap.graph.instantiate() as exe:
        handle, stream_handle = exe._handle.handle, stream._handle.handle
        raw_exe, raw_stream = int(handle), stream.ptr

        def counting(call: Callable[[], object]) -> Callable[[], None]:
            def counted() -> None:
                call()
                ours.kernels += NODES
            return counted
        variants = {"gpugraph GraphExec.launch": _one(counting(lambda: exe.launch(stream)), stream.synchronize),
                    "raw cuda-bindings cuGraphLaunch": _one(counting(lambda: cu.cuGraphLaunch(handle, stream_handle)),
                                                            stream.synchronize)}
        if calls is not None:
            variants[THINNEST] = _one(counting(lambda: calls.graph_launch(raw_exe, raw_stream)), stream.synchronize)
        peers, checks = _peer_graphs(device)
        variants.update(peers)
        samples = _interleaved(variants, rounds, options.warmup)
    ours.check("the graph launches")
    for check in checks:
        check()
    return _rows(f"graph launch, {NODES}-node chain", samples, "gpugraph GraphExec.launch", "≤ 1.10", "≤ 1")


def _cupy_tiny(device: Any) -> tuple[Any, Counted, Any, Any, Any] | None:
    """CuPy, a counted array with CuPy's view of it, TINY as CuPy's RawKernel and a CuPy stream of ``device``;
    None where CuPy is not installed."""
    try:
        import cupy as cp
    except ImportError:
        return None
    counted = Counted(device)
    with cp.cuda.Device(device.index):
        return cp, counted, cp.RawKernel(TINY, "tiny"), cp.asarray(counted.array), cp.cuda.Stream(non_blocking=True)


def _torch_tiny(device: Any) -> tuple[Any, Counted, Any] | None:
    """PyTorch, a counted array and PyTorch's view of it; None where PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    counted = Counted(device)
    return torch, counted, torch.as_tensor(counted.array, device=f"cuda:{device.index}")


def _peer_graphs(device: Any) -> tuple[dict[str, Timed], list[Callable[[], None]]]:
    """The peers' launches of their own captured chain of ``NODES`` tiny kernels (each on its own stream, on an
    array of its own), and the checks of what they ran."""
    variants: dict[str, Timed] = {}
    checks: list[Callable[[], None]] = []
    cupy = _cupy_tiny(device)
    if cupy is not None:
        cp, on_cupy, raw_kernel, cx, cupy_stream = cupy
        with cp.cuda.Device(device.index):
            with cupy_stream:
                cupy_stream.begin_capture()
                for _ in range(NODES):
                    raw_kernel((1,), (32,), (cx, np.int32(32)))
                cupy_graph = cupy_stream.end_capture()
            cupy_graph.upload(cupy_stream)

        def cupy_launch() -> None:
            cupy_graph.launch(cupy_stream)
            on_cupy.kernels += NODES
        variants["CuPy Graph.launch"] = _one(cupy_launch, cupy_stream.synchronize)
        checks.append(lambda: on_cupy.check("CuPy's graph launches"))
    found_torch = _torch_tiny(device)
    if found_torch is not None:
        torch, on_torch, tensor = found_torch
        with torch.cuda.device(device.index):
            torch_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(torch_graph):
                for _ in range(NODES):
                    tensor.add_(1.0)
            torch.cuda.synchronize(device.index)
            current = torch.cuda.current_stream(device.index)

        def replay() -> None:
            torch_graph.replay()
            on_torch.kernels += NODES
        variants["PyTorch CUDAGraph.replay"] = _one(replay, current.synchronize)
        checks.append(lambda: on_torch.check("PyTorch's graph replays"))
    core = _cuda_core_graph(device)
    if core is not None:
        variants["cuda.core Graph.launch"], check = core
        checks.append(check)
    return variants, checks


def _cuda_core_graph(device: Any) -> tuple[Timed, Callable[[], None]] | None:
    """cuda.core's launch of its own captured chain (GraphBuilder), if cuda.core is installed and has graphs."""
    found = cuda_core_tiny(device)
    if found is None:
        return None
    core, core_device, core_kernel = found
    core_stream = core_device.create_stream()
    if not hasattr(core_stream, "create_graph_builder"):  # (a cuda.core without graphs)
        return None
    on_core = Counted(device)
    config, args = core.LaunchConfig(grid=1, block=32), (np.uintp(on_core.array.ptr), np.int32(32))
    builder = core_stream.create_graph_builder().begin_building()
    for _ in range(NODES):
        core.launch(builder, config, core_kernel, *args)
    core_graph = builder.end_building().complete()
    core_graph.upload(core_stream)
    core_stream.sync()

    def launch() -> None:
        core_graph.launch(core_stream)
        on_core.kernels += NODES
    return _one(launch, core_stream.sync), lambda: on_core.check("cuda.core's graph launches")


def _stream_launch(device: Any, kernel: Kernel, stream: Any, rounds: int, options: Options) -> list[Row]:
    """A tiny kernel's stream launch: gpugraph, the floor, raw cuda-bindings and the peers' launches."""
    from cuda.bindings import driver as cu
    ours = Counted(device)
    calls = _calls(device, kernel, ours)
    x = ours.array
    function = load_kernel(device, kernel)
    with function.lock:
        params = function.pack((x, 32))
    handle, stream_handle, raw_stream = function.handle, stream._handle.handle, stream.ptr

    def counting(call: Callable[[], object]) -> Timed:
        return _counted_batch(ours, call, stream.synchronize)
    variants = {"gpugraph Stream.launch": counting(lambda: stream.launch(kernel, 1, 32, x, 32)),
                "raw cuda-bindings cuLaunchKernel": counting(
                    lambda: cu.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, stream_handle, params, 0))}
    if calls is not None:
        variants[THINNEST] = counting(lambda: calls.launch(raw_stream))
    peers, checks = _peer_launches(device)
    variants.update(peers)
    samples = _interleaved(variants, rounds, options.warmup)
    stream.synchronize()
    ours.check("the stream launches")
    for check in checks:
        check()
    return _rows("stream launch of a tiny kernel", samples, "gpugraph Stream.launch", "≤ 1.10", "< 1")


def _peer_launches(device: Any) -> tuple[dict[str, Timed], list[Callable[[], None]]]:
    """The peers' stream launches of a tiny kernel (CuPy's RawKernel, PyTorch's add_, cuda.core's launch), each on
    a stream and an array of its own, and the checks of what they ran."""
    variants: dict[str, Timed] = {}
    checks: list[Callable[[], None]] = []
    cupy = _cupy_tiny(device)
    if cupy is not None:
        _, on_cupy, raw_kernel, cx, cupy_stream = cupy
        n = np.int32(32)
        launch_cupy = _counted_batch(on_cupy, lambda: raw_kernel((1,), (32,), (cx, n)), cupy_stream.synchronize)

        def cupy_launch() -> float:
            with cupy_stream:  # (its launches go to the current stream: this one, made current untimed)
                return launch_cupy()
        variants["CuPy RawKernel"] = cupy_launch
        checks.append(lambda: on_cupy.check("CuPy's launches"))
    found_torch = _torch_tiny(device)
    if found_torch is not None:
        torch, on_torch, tensor = found_torch
        variants["PyTorch tensor.add_"] = _counted_batch(on_torch, lambda: tensor.add_(1.0),
                                                         torch.cuda.current_stream(device.index).synchronize)
        checks.append(lambda: on_torch.check("PyTorch's launches"))
    found = cuda_core_tiny(device)
    if found is not None:
        core, core_device, core_kernel = found
        on_core = Counted(device)
        core_stream = core_device.create_stream()
        config, args = core.LaunchConfig(grid=1, block=32), (np.uintp(on_core.array.ptr), np.int32(32))
        variants["cuda.core launch"] = _counted_batch(
            on_core, lambda: core.launch(core_stream, config, core_kernel, *args), core_stream.sync)
        checks.append(lambda: on_core.check("cuda.core's launches"))
    return variants, checks


def _set_params(device: Any, kernel: Kernel, stream: Any, rounds: int, options: Options) -> list[Row]:
    """``exe.set_params`` of one kernel node, the same arguments each time, against the floor's; then one launch,
    which must run the kernel with them."""
    ours = Counted(device)
    calls = _calls(device, kernel, ours)
    graph = Graph(device)
    node = graph.add_kernel(kernel, 1, 32, ours.array, 0)  # (n = 0: the set below makes it 32)
    with graph.instantiate() as exe:
        raw_exe, raw_node, x = int(exe._handle.handle), int(node._handle), ours.array
        variants = {"gpugraph exe.set_params": _batch(lambda: exe.set_params(node, x, 32), stream.synchronize)}
        if calls is not None:
            variants[THINNEST] = _batch(lambda: calls.set_params(raw_exe, raw_node), stream.synchronize)
        samples = _interleaved(variants, rounds, options.warmup)
        exe.launch(stream)
        ours.kernels += 1
        stream.synchronize()
    ours.check("the node as set_params left it")
    return _rows("set_params of a kernel node", samples, "gpugraph exe.set_params", "≤ 1.5", "")


def _param_patch(device: Any, kernel: Kernel, stream: Any, rounds: int, options: Options) -> list[Row]:
    """A Param of a one-node graph set, and the launch that patches its node, against the floor's set_params and
    graph launch."""
    ours = Counted(device)
    calls = _calls(device, kernel, ours)
    graph = Graph(device)
    count = Param(32)
    node = graph.add_kernel(kernel, 1, 32, ours.array, count)
    values = itertools.cycle((31, 32))  # (a new value each time: each launch patches the node)
    with graph.instantiate() as exe:
        raw_exe, raw_node, raw_stream = int(exe._handle.handle), int(node._handle), stream.ptr

        def set_and_launch() -> None:
            count.value = next(values)
            exe.launch(stream)
        variants = {"gpugraph Param set + launch": _one(set_and_launch, stream.synchronize)}
        if calls is not None:
            def floor_set_and_launch() -> None:
                calls.set_params(raw_exe, raw_node)
                calls.graph_launch(raw_exe, raw_stream)
            variants[THINNEST] = _one(floor_set_and_launch, stream.synchronize)
        samples = _interleaved(variants, rounds, options.warmup)
    stream.synchronize()
    got = ours.array.to_numpy()
    if not (got[:31] == got[0]).all() or got[0] <= got[31]:  # (n 31 and 32 alternate: element 31 gets fewer)
        raise ValidationError(f"hot: the patched launches left {got.tolist()}, not the first 31 elements ahead")
    return _rows("Param set + patched launch, one-node graph", samples, "gpugraph Param set + launch", "≤ 1.5", "")


def _build_and_capture(device: Any, kernel: Kernel, stream: Any, options: Options) -> list[Row]:
    """Capture and explicit build of a 1,000-node chain, per node, against the floor's calls (each graph dropped
    untimed, as the floor destroys its own)."""
    ours = Counted(device)
    calls = _calls(device, kernel, ours)
    x, raw_stream = ours.array, stream.ptr
    made: list[Any] = []

    def per_node(fn: Callable[[], object]) -> Timed:
        def timed() -> float:
            made.clear()  # (untimed: the last graph goes)
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) / NODES * 1e6
        return timed

    def capture() -> None:
        with stream.capture() as cap:
            for _ in range(NODES):
                stream.launch(kernel, 1, 32, x, 32)
        made.append(cap.graph)

    def build() -> None:
        graph, last = Graph(device), None
        for _ in range(NODES):
            last = graph.add_kernel(kernel, 1, 32, x, 32, after=last)
        made.append(graph)
    rows = []
    for path, ours_fn, floor_fn in (("capture", capture, lambda: _floor_capture(calls, raw_stream)),
                                    ("explicit build", build, lambda: _floor_build(calls))):
        variants = {f"gpugraph {path}": per_node(ours_fn)}
        if calls is not None:
            variants[THINNEST] = per_node(floor_fn)
        samples = _interleaved(variants, 2 * options.repeats, options.warmup)
        rows += _rows(f"{path} of a {NODES}-node chain, per node", samples, f"gpugraph {path}", "", "", "µs/node")
    made.clear()
    if calls is not None:
        calls.destroy_captured()
        calls.destroy_graph()
    stream.synchronize()
    ours.check("capture and build (nothing runs)")
    return rows


def _floor_capture(calls: Any, raw_stream: int) -> None:
    calls.begin_capture(raw_stream)
    for _ in range(NODES):
        calls.launch(raw_stream)
    calls.end_capture(raw_stream)


def _floor_build(calls: Any) -> None:
    calls.new_graph()
    last = None
    for _ in range(NODES):
        last = calls.add(last)

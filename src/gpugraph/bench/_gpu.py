"""GPU workloads: gpugraph beside raw cuda-bindings, CuPy, PyTorch and a C++ program (the floor), in one
process run on one GPU. They are registered as GPU workloads: ``bench.run`` skips them on other backends.

Each gpugraph figure with a target (docs/performance.md, "Targets") gets a ratio row against the C++ floor,
computed from medians of the same run; peers that are not installed are left out.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import Graph, Kernel
from .._placement import load_kernel
from ._core import Options, Row, ValidationError, gc_held, workload

TINY = 'extern "C" __global__ void tiny(float* x, int n){ int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'
LAUNCHES = 10_000
_floor_cache: dict[str, Any] = {}


def _samples(fn: Callable[[], float], options: Options, repeats: int | None = None) -> list[float]:
    """Warm up, then collect ``repeats`` values returned by ``fn``."""
    for _ in range(options.warmup):
        fn()
    return [fn() for _ in range(repeats or options.repeats)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def driver_version() -> str:
    """The NVIDIA driver's version (nvidia-smi's answer) and the CUDA version it runs, in words."""
    from ..backends.cuda._driver import driver_version as cuda_version
    cuda = cuda_version()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        smi = []
    return f"{smi[0] if smi else 'unknown (nvidia-smi did not answer)'}, CUDA {cuda // 1000}.{cuda % 1000 // 10}"


def _vs_floor(name: str, figure: str, ours: Row, floor: float | None, target: str) -> list[Row]:
    if floor is None or floor <= 0:
        return []
    return [Row.of(name, f"{figure} / C++", "×", [ours.median / floor], target)]


FLOOR_RUNS = 3  # the C++ program's runs each time it is asked; each figure is their median


def floor(device: Any, seed_iterations: int = 4000, runs: int = FLOOR_RUNS) -> dict[str, float] | None:
    """The C++ program's figures, measured now (each the median of ``runs`` runs), or None where nvcc is
    absent. Each workload asks right after measuring its own figures (``dynamic`` after each of its rounds),
    so that a ratio compares two measurements minutes apart at most: a machine's speed drifts within a run (about
    15% in one process on an H200: docs/results/2026-11-23-h200-b/inprocess-floor.txt). ``seed_iterations``: the
    dynamic-parameter workload's iterations (only ``dynamic`` needs many)."""
    program = _floor_program(device)
    if program is None:
        return None
    measured = [json.loads(subprocess.run([program, str(seed_iterations)], check=True, capture_output=True,
                                          text=True).stdout)
                for _ in range(runs)]
    return {key: statistics.median(run[key] for run in measured) for key in measured[0]}


def _floor_program(device: Any) -> str | None:
    """The C++ program, compiled once per process with nvcc for this GPU, or None without nvcc."""
    if "program" not in _floor_cache:
        _floor_cache["program"] = _nvcc(device, "floor.cu")
    return _floor_cache["program"]


def _nvcc(device: Any, source: str) -> str | None:
    """The C++ program ``source`` (beside this module) compiled with nvcc for this GPU, in a folder removed at
    exit; None without nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    from cuda.bindings import driver as cu
    device_handle = device._backend.contexts.devices[device.index]
    major = cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                    device_handle)[1]
    minor = cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                    device_handle)[1]
    folder = tempfile.mkdtemp(prefix="gpugraph-floor-")
    atexit.register(shutil.rmtree, folder, True)
    program = os.path.join(folder, source.removesuffix(".cu"))
    subprocess.run([nvcc, "-O2", f"-arch=sm_{major}{minor}", "-o", program, os.path.join(os.path.dirname(__file__),
                                                                                        source)],
                   check=True, capture_output=True)
    return program


@workload("launch", "GPU: one tiny kernel on a stream, end to end per kernel, against the peers", gpu=True)
def launch(device: Any, options: Options) -> list[Row]:
    kernel = Kernel(TINY, "tiny")
    stream = device.stream()
    x = device.zeros(32, np.float32)

    def ours() -> float:
        return _timed(lambda: ([stream.launch(kernel, 1, 32, x, 32) for _ in range(LAUNCHES)],
                               stream.synchronize())) / LAUNCHES * 1e6

    rows = [Row.of("launch", "gpugraph Stream.launch", "µs", _samples(ours, options, 7))]
    from cuda.bindings import driver as cu
    function = kernel._functions[device]
    with function.lock:
        params = function.pack((x, 32))
    handle, raw_stream = function.handle, stream._handle.handle

    def raw() -> float:
        def body() -> None:
            for _ in range(LAUNCHES):
                cu.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, raw_stream, params, 0)
            cu.cuStreamSynchronize(raw_stream)
        return _timed(body) / LAUNCHES * 1e6
    rows.append(Row.of("launch", "raw cuda-bindings cuLaunchKernel (prebuilt arguments)", "µs",
                       _samples(raw, options, 7)))
    rows += _cuda_core_launch(device, stream, x, options)
    try:
        import cupy as cp
        raw_kernel, cx = cp.RawKernel(TINY, "tiny"), cp.zeros(32, cp.float32)
        external = cp.cuda.Stream.from_external(stream)  # the CUDA stream protocol

        def cupy() -> float:
            with external:
                return _timed(lambda: ([raw_kernel((1,), (32,), (cx, np.int32(32))) for _ in range(LAUNCHES)],
                                       external.synchronize())) / LAUNCHES * 1e6
        rows.append(Row.of("launch", "CuPy RawKernel", "µs", _samples(cupy, options, 7)))
    except ImportError:
        pass
    try:
        import torch
        tensor = torch.zeros(32, device=f"cuda:{device.index}")
        torch_stream = torch.cuda.ExternalStream(stream.ptr)

        def torch_add() -> float:
            with torch.cuda.stream(torch_stream):
                return _timed(lambda: ([tensor.add_(1.0) for _ in range(LAUNCHES)],
                                       torch_stream.synchronize())) / LAUNCHES * 1e6
        rows.append(Row.of("launch", "PyTorch tensor.add_", "µs", _samples(torch_add, options, 7)))
    except ImportError:
        pass
    ours_row, peers = rows[0], rows[1:]
    if peers:
        fastest = min(peers, key=lambda r: r.median)
        rows.append(Row.of("launch", f"gpugraph / fastest peer ({fastest.figure})", "×",
                           [ours_row.median / fastest.median], "< 1"))
    figures = floor(device)
    if figures:
        rows.append(Row.of("launch", "C++ kernel<<<>>> (floor)", "µs", [figures["stream_launch"]]))
        rows += _vs_floor("launch", "gpugraph Stream.launch", ours_row, figures["stream_launch"], "≤ 1.3")
    return rows


def cuda_core_tiny(device: Any) -> tuple[Any, Any, Any] | None:
    """cuda.core's module (its API: ``Device``, ``LaunchConfig``, ``Program``, ``launch``), its Device made current
    for ``device``, and TINY compiled by it; None where cuda.core is not installed."""
    try:
        import cuda.core as core
        core.Program  # noqa: B018 - (cuda.core before 0.4 kept its API under cuda.core.experimental)
    except (ImportError, AttributeError):
        try:
            import cuda.core.experimental as core
        except ImportError:
            return None
    core_device = core.Device(device.index)
    core_device.set_current()
    return core, core_device, core.Program(TINY, code_type="c++").compile("cubin").get_kernel("tiny")


def _cuda_core_launch(device: Any, stream: Any, x: Any, options: Options) -> list[Row]:
    """cuda.core's launch of the same kernel on the same stream (prebuilt config and arguments), if installed."""
    found = cuda_core_tiny(device)
    if found is None:
        return []
    core, core_device, core_kernel = found
    core_launch = core.launch
    core_stream = core_device.create_stream(stream)  # the CUDA stream protocol
    config = core.LaunchConfig(grid=1, block=32)
    args = (np.uintp(x.ptr), np.int32(32))

    def body() -> None:
        for _ in range(LAUNCHES):
            core_launch(core_stream, config, core_kernel, *args)
        core_stream.sync()
    return [Row.of("launch", "cuda.core launch (prebuilt config and arguments)", "µs",
                   _samples(lambda: _timed(body) / LAUNCHES * 1e6, options, 7))]


def _chain(device: Any, kernel: Kernel, x: Any, nodes: int, width: int) -> Graph:
    """``nodes`` tiny kernels: one chain (width 1), or ``width`` chains between a fork and a join."""
    graph = Graph(device)
    fork = graph.add_empty() if width > 1 else None
    ends = []
    for _ in range(width):
        last = fork
        for _ in range(nodes // width):
            last = graph.add_kernel(kernel, 1, 32, x, 32, after=last)
        ends.append(last)
    if width > 1:
        graph.add_empty(after=ends)
    return graph


@workload("graphs", "GPU: graph launch host cost and GPU time per node, chains of N tiny kernels", gpu=True)
def graphs(device: Any, options: Options) -> list[Row]:
    from cuda.bindings import driver as cu
    kernel = Kernel(TINY, "tiny")
    stream = device.stream()
    x = device.zeros(32, np.float32)
    start, end = device.event(timing=True), device.event(timing=True)
    rows = []
    for width in (1, 4):
        for nodes in (1, 8, 64, 512, 1000, 2048):
            if nodes < width:
                continue
            shape = "chain" if width == 1 else f"{width}-wide fork/join"
            exe = _chain(device, kernel, x, nodes, width).instantiate()
            exe.launch(stream)
            stream.synchronize()

            def call() -> float:
                seconds = _timed(lambda: exe.launch(stream))
                stream.synchronize()
                return seconds * 1e6

            def raw_call() -> float:
                seconds = _timed(lambda: cu.cuGraphLaunch(exe._handle.handle, stream._handle.handle))
                stream.synchronize()
                return seconds * 1e6

            def gpu() -> float:
                stream.record(start)
                exe.launch(stream)
                stream.record(end)
                end.synchronize()
                return start.elapsed_ms(end) * 1e3 / nodes
            host = Row.of("graphs", f"{shape}, N={nodes}: gpugraph launch call", "µs", _samples(call, options, 50))
            rows.append(host)
            if width == 1 and nodes == 1000:
                chain_1000 = host
            rows.append(Row.of("graphs", f"{shape}, N={nodes}: raw cuGraphLaunch call", "µs",
                               _samples(raw_call, options, 50)))
            rows.append(Row.of("graphs", f"{shape}, N={nodes}: GPU time per node", "µs", _samples(gpu, options)))
            exe.close()
    figures = floor(device)
    if figures:
        rows.append(Row.of("graphs", "C++ cudaGraphLaunch call, 1000-node chain (floor)", "µs",
                           [figures["graph_launch_call"]]))
        rows.append(Row.of("graphs", "C++ GPU time per node, 1000-node chain (floor)", "µs",
                           [figures["gpu_per_node"]]))
        rows += _vs_floor("graphs", "gpugraph launch call, 1000-node chain", chain_1000,  # type: ignore[possibly-undefined]
                          figures["graph_launch_call"], "≤ 1.10")
    return rows


@workload("manage", "GPU: capture, explicit build, instantiate, update and set params, per node", gpu=True)
def manage(device: Any, options: Options) -> list[Row]:
    kernel = Kernel(TINY, "tiny")
    stream = device.stream()
    x = device.zeros(32, np.float32)
    rows = []
    for nodes in (10, 100, 1000, 10_000):
        def capture() -> Graph:
            with stream.capture() as cap:
                for _ in range(nodes):
                    stream.launch(kernel, 1, 32, x, 32)
            return cap.graph

        def per_node(fn: Callable[[], Any]) -> float:
            return _timed(fn) / nodes * 1e6
        repeats = 5 if nodes >= 1000 else options.repeats
        rows.append(Row.of("manage", f"N={nodes}: capture", "µs/node", _samples(lambda: per_node(capture),
                                                                                options, repeats)))
        rows.append(Row.of("manage", f"N={nodes}: explicit build", "µs/node",
                           _samples(lambda: per_node(lambda: _chain(device, kernel, x, nodes, 1)), options,
                                    repeats)))

        # As the floor times them: the instantiate call alone, of a graph just captured (not the exec's destroy);
        # the update of an exec with a graph just captured.
        def instantiate() -> float:
            fresh = capture()
            start = time.perf_counter()
            made = fresh.instantiate()
            seconds = time.perf_counter() - start
            made.close()
            return seconds / nodes * 1e6  # (nodes: this iteration's, called within it)
        rows.append(Row.of("manage", f"N={nodes}: instantiate", "µs/node", _samples(instantiate, options, repeats)))
        first = capture()
        exe = first.instantiate()
        # The graph the exec was last updated with (its source) is held here, so that the update lets go of it
        # without destroying it; it is destroyed after the timing, as the floor destroys its graphs untimed.
        held = [first]

        def update() -> float:
            other = capture()
            start = time.perf_counter()
            exe.update(other)
            seconds = time.perf_counter() - start
            held[0] = other
            return seconds / nodes * 1e6
        rows.append(Row.of("manage", f"N={nodes}: whole-graph update", "µs/node", _samples(update, options, repeats)))
        exe.close()
    rows += _manage_peers(device, kernel, stream, x, options)
    graph = capture()  # type: ignore[possibly-undefined]  # the loop above (over a fixed tuple) made it
    exe = graph.instantiate()
    node = graph.nodes[0]
    rows.append(Row.of("manage", "set one kernel node's parameters (exe.set_params)", "µs",
                       _samples(lambda: _timed(lambda: exe.set_params(node, x, 32)) * 1e6, options, 200)))
    exe.close()
    rows.append(_param_patch(device, kernel, x, options))
    figures = floor(device)
    if figures:
        for key, figure in (("capture_per_node", "capture, N=1000"), ("build_per_node", "explicit build, N=1000"),
                            ("instantiate_per_node", "instantiate, N=1000"),
                            ("update_per_node", "whole-graph update, N=1000"), ("set_params", "set params")):
            rows.append(Row.of("manage", f"C++ {figure} (floor)", "µs", [figures[key]]))
        by_figure = {r.figure: r for r in rows}
        for figure, key, target in (("N=1000: capture", "capture_per_node", "≤ 2"),
                                    ("N=1000: explicit build", "build_per_node", "≤ 2"),
                                    ("N=1000: instantiate", "instantiate_per_node", "≤ 1.2"),
                                    ("N=1000: whole-graph update", "update_per_node", "≤ 2"),
                                    ("set one kernel node's parameters (exe.set_params)", "set_params", "≤ 2"),
                                    ("set one kernel node's parameters (gg.Param: value set + patch)", "set_params",
                                     "≤ 2")):
            rows += _vs_floor("manage", f"gpugraph {figure}", by_figure[figure], figures[key], target)
    capture_1000 = next(r for r in rows if r.figure == "N=1000: capture")
    for peer in [r for r in rows if r.figure.startswith("N=1000: ") and "capture (" in r.figure]:
        rows.append(Row.of("manage", f"gpugraph N=1000: capture / {peer.figure[len('N=1000: '):]}", "×",
                           [capture_1000.median / peer.median], "< 1"))
    return rows


def _param_patch(device: Any, kernel: Kernel, x: Any, options: Options) -> Row:
    """The dynamic-parameter path's cost per node: a Param set, then the patch the next launch makes."""
    from .. import Param
    count = Param(32)
    graph = Graph(device)
    graph.add_kernel(kernel, 1, 32, x, count)
    exe = graph.instantiate()
    values = [31, 32]

    def patch() -> float:
        start = time.perf_counter()
        for value in values * 500:
            count.value = value
            exe._params.patch(exe._prepare_patch)  # what exe.launch does first when a Param changed
        return (time.perf_counter() - start) / 1000 * 1e6
    row = Row.of("manage", "set one kernel node's parameters (gg.Param: value set + patch)", "µs",
                 _samples(patch, options))
    exe.close()
    return row


def _manage_peers(device: Any, kernel: Kernel, stream: Any, x: Any, options: Options) -> list[Row]:
    """The same management figures for the peers, N = 1000: raw cuda-bindings, CuPy and PyTorch captures."""
    from cuda.bindings import driver as cu
    nodes, rows = 1000, []
    function = load_kernel(device, kernel)
    with function.lock:
        args = function.pack((x, 32))

    def kernel_params() -> Any:
        p = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func, p.kernelParams, p.extra = function.handle, args, 0
        p.gridDimX, p.gridDimY, p.gridDimZ = 1, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = 32, 1, 1
        p.sharedMemBytes = 0
        return p

    def raw_build() -> Any:
        graph = cu.cuGraphCreate(0)[1]
        last: list[Any] = []
        for _ in range(nodes):
            last = [cu.cuGraphAddKernelNode(graph, last, len(last), kernel_params())[1]]
        return graph
    built: list[Any] = []
    rows.append(Row.of("manage", f"N={nodes}: raw cuda-bindings explicit build (a struct per node)", "µs/node",
                       _samples(lambda: _timed(lambda: built.append(raw_build())) / nodes * 1e6, options, 5)))
    graph = built[-1]

    def raw_instantiate() -> float:  # as the floor: a graph just built, its instantiate call alone
        fresh = raw_build()
        built.append(fresh)
        start = time.perf_counter()
        made = cu.cuGraphInstantiate(fresh, 0)[1]
        seconds = time.perf_counter() - start
        cu.cuGraphExecDestroy(made)
        return seconds / nodes * 1e6
    rows.append(Row.of("manage", f"N={nodes}: raw cuda-bindings cuGraphInstantiate", "µs/node",
                       _samples(raw_instantiate, options, 5)))
    exe = cu.cuGraphInstantiate(graph, 0)[1]

    def raw_update() -> float:  # as the floor: with a graph just built
        other = raw_build()
        built.append(other)
        return _timed(lambda: cu.cuGraphExecUpdate(exe, other)) / nodes * 1e6
    rows.append(Row.of("manage", f"N={nodes}: raw cuda-bindings cuGraphExecUpdate", "µs/node",
                       _samples(raw_update, options, 5)))
    node = cu.cuGraphGetNodes(graph, nodes)[1][0]
    prepared = kernel_params()
    rows.append(Row.of("manage", "raw cuda-bindings cuGraphExecKernelNodeSetParams (prebuilt struct)", "µs",
                       _samples(lambda: _timed(lambda: cu.cuGraphExecKernelNodeSetParams(exe, node, prepared)) * 1e6,
                                options, 200)))
    cu.cuGraphExecDestroy(exe)
    for g in built:
        cu.cuGraphDestroy(g)
    try:
        import cupy as cp
        raw_kernel, cx = cp.RawKernel(TINY, "tiny"), cp.zeros(32, cp.float32)
        cupy_stream = cp.cuda.Stream(non_blocking=True)

        def cupy_capture() -> None:
            with cupy_stream:
                cupy_stream.begin_capture()
                for _ in range(nodes):
                    raw_kernel((1,), (32,), (cx, np.int32(32)))
                cupy_stream.end_capture()
        rows.append(Row.of("manage", f"N={nodes}: CuPy stream capture (RawKernel)", "µs/node",
                           _samples(lambda: _timed(cupy_capture) / nodes * 1e6, options, 5)))
    except ImportError:
        pass
    try:
        import torch
        tensor = torch.zeros(32, device=f"cuda:{device.index}")

        def torch_capture() -> None:
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                for _ in range(nodes):
                    tensor.add_(1.0)
        rows.append(Row.of("manage", f"N={nodes}: PyTorch torch.cuda.graph capture (add_)", "µs/node",
                           _samples(lambda: _timed(torch_capture) / nodes * 1e6, options, 5)))
    except ImportError:
        pass
    return rows


@workload("dynamic", "GPU: the dynamic-parameter workload of NVIDIA's blog post, four strategies and the C++ floor",
          gpu=True)
def dynamic(device: Any, options: Options) -> list[Row]:
    from ..examples import dynamic_parameters as example
    iterations = example.GPU_ITERATIONS
    samples: dict[str, list[float]] = {}
    floors: list[dict[str, float]] = []
    # Each round is 40,000 iterations of every strategy, then one run of the C++ program: rounds and floor runs
    # alternate, so that both see the drift alike (a C loop of the same driver calls slowed by 14-18% within
    # one process, the clocks unchanged: H200, 2026-11-23, docs/performance.md).
    for _ in range(min(options.repeats, 3)):
        with gc_held():
            results = example.measure(device, iterations)
        ok, detail = example.compare(results, example.reference(iterations - 1))
        if not ok:
            raise ValidationError(f"dynamic: {detail}")
        for name, (seconds, _) in results.items():
            samples.setdefault(name, []).append(seconds / iterations * 1e6)
        figures = floor(device, iterations, runs=1)
        if figures:
            floors.append(figures)
    rows = [Row.of("dynamic", f"gpugraph {name}", "µs/iteration", values) for name, values in samples.items()]
    if floors:
        figures = {key: statistics.median(run[key] for run in floors) for key in floors[0]}
        for key, name in (("seed_no_graph", "no graph"), ("seed_recapture_update", "recapture + update"),
                          ("seed_combined", "combined (set params)")):
            rows.append(Row.of("dynamic", f"C++ {name} (floor)", "µs/iteration", [run[key] for run in floors]))
        by_figure = {r.figure: r for r in rows}
        for name, key, target in (("Param", "seed_combined", "≤ 1.10"),
                                  ("recapture + update", "seed_recapture_update", "≤ 1.5"),
                                  ("captured", "seed_combined", "≤ 1.25")):
            rows += _vs_floor("dynamic", f"gpugraph {name}", by_figure[f"gpugraph {name}"], figures[key], target)
    return rows


SOLVER_N, SOLVER_DIAGONAL, SOLVER_EVERY = 4096, 2.01, (1, 10, 100)


@workload("solver", "GPU: a Jacobi solver to a tolerance: one launch of a WHILE node, host-driven graphs, C++",
          gpu=True)
def solver(device: Any, options: Options) -> list[Row]:
    """Time to converge and host time per sweep of gpugraph.examples.conditional_solver (n = 4096, d = 2.01):
    its WHILE graph, the host-driven graph read back every k launches, and the C++ program's WHILE graph."""
    from ..examples import conditional_solver as example
    problem, stream = example.Problem(device, SOLVER_N), device.stream()
    want_x, want_sweeps = example.reference(SOLVER_N, SOLVER_DIAGONAL)

    def reset() -> None:
        for array in (problem.x, problem.y, problem.state):
            stream.memset(array, 0)
        stream.synchronize()

    program = _solver_program(device)

    def floor_run() -> dict[str, float] | None:  # (one run of the C++ program, of 3 solves: their median)
        if program is None:
            return None
        figures = json.loads(subprocess.run([program, str(SOLVER_N), repr(SOLVER_DIAGONAL), repr(example.TOLERANCE),
                                             str(example.LIMIT), "3"], check=True, capture_output=True,
                                            text=True).stdout)
        if figures["sweeps"] != want_sweeps:
            raise ValidationError(f"solver: the C++ program made {figures['sweeps']} sweeps (NumPy: {want_sweeps})")
        return figures

    # Each of ours is followed by a run of the C++ program, and the ratio is taken pair by pair: the GPU's speed
    # drifts over a bench, by 13% between two runs of this workload on an H200 (2026-11-24).
    converge, host, floors = [], [], []
    with example.build(problem, SOLVER_DIAGONAL).instantiate() as exe:
        for repeat in range(options.warmup + options.repeats):
            reset()
            with gc_held():
                start = time.perf_counter()
                exe.launch(stream)
                launched = time.perf_counter()
                stream.synchronize()
                end = time.perf_counter()
            x, sweeps, _ = problem.result()
            if sweeps != want_sweeps or not np.array_equal(x, want_x):
                raise ValidationError(f"solver: the WHILE graph made {sweeps} sweeps (NumPy: {want_sweeps}) or "
                                      f"its x differs from NumPy's")
            if repeat >= options.warmup:
                converge.append((end - start) * 1e3)
                host.append((launched - start) * 1e6 / want_sweeps)
                figures = floor_run()
                if figures is not None:
                    floors.append(figures)
    ours = Row.of("solver", "gpugraph WHILE node: time to converge", "ms", converge)
    rows = [ours, Row.of("solver", "gpugraph WHILE node: host time per sweep", "µs/sweep", host)]
    for every in SOLVER_EVERY:
        times, busy = [], []
        for _ in range(options.repeats):
            reset()
            with gc_held():
                start = time.perf_counter()
                sweeps, seconds = example.solve_from_host(problem, stream, every, SOLVER_DIAGONAL)
                times.append((time.perf_counter() - start) * 1e3)
            busy.append(seconds * 1e6 / sweeps)
            if example.residual(problem.x.to_numpy(), SOLVER_DIAGONAL) > 1e-8:
                raise ValidationError(f"solver: the host-driven solve (every {every}) did not converge")
        driven = Row.of("solver", f"host-driven, read back every {every}: time to converge", "ms", times)
        rows += [driven, Row.of("solver", f"host-driven, read back every {every}: host time per sweep", "µs/sweep",
                                busy),
                 Row.of("solver", f"host-driven every {every} / WHILE node", "×", [driven.median / ours.median])]
    if floors:
        rows += [Row.of("solver", "C++ WHILE node: time to converge (floor)", "ms", [f["converge_ms"] for f in floors]),
                 Row.of("solver", "C++ WHILE node: host time per sweep (floor)", "µs/sweep",
                        [f["launch_us"] / want_sweeps for f in floors]),
                 Row.of("solver", "gpugraph WHILE node: time to converge / C++", "×",
                        [mine / f["converge_ms"] for mine, f in zip(converge, floors)], "≤ 1.05")]
    return rows


def _solver_program(device: Any) -> str | None:
    """floor_solver.cu compiled once per process with nvcc, or None without nvcc."""
    if "solver" not in _floor_cache:
        _floor_cache["solver"] = _nvcc(device, "floor_solver.cu")
    return _floor_cache["solver"]


@workload("memory", "GPU: Python-side bytes per node of a 10,000-node graph; 100,000 graphs made and dropped",
          gpu=True)
def memory(device: Any, options: Options) -> list[Row]:
    from cuda.bindings import driver as cu
    kernel = Kernel(TINY, "tiny")
    x = device.zeros(32, np.float32)
    _chain(device, kernel, x, 10, 1).instantiate().close()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    graph = _chain(device, kernel, x, 10_000, 1)
    exe = graph.instantiate()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    exe.close()
    del graph, exe
    rows = [Row.of("memory", "Python-side bytes per node, 10,000-node graph and its exec", "B/node",
                   [grown / 10_000])]

    def rss() -> int:
        with open("/proc/self/statm") as stat:
            return int(stat.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def device_used() -> int:
        free, total = cu.cuMemGetInfo()[1:]
        return int(total) - int(free)

    def churn(count: int) -> None:
        for _ in range(count):
            g = Graph(device)
            g.add_kernel(kernel, 1, 32, x, 32)
            g.instantiate().close()

    churn(10_000)
    host0, dev0 = rss(), device_used()
    churn(100_000)
    device.synchronize()
    rows.append(Row.of("memory", "host memory growth over 100,000 graphs + execs made and dropped", "MiB",
                       [(rss() - host0) / 2**20], "flat (≈ 0)"))
    rows.append(Row.of("memory", "device memory growth over the same", "MiB", [(device_used() - dev0) / 2**20],
                       "flat (≈ 0)"))
    return rows

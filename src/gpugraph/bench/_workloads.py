"""The workloads. Add one with ``@workload(name, description)`` on ``fn(device, options) -> list[Row]``.

Each workload checks that its paths computed the same, correct result, so it cannot report the time
of doing nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from .. import Graph, Kernel, LaunchConfig, Node
from ._core import Options, Row, ValidationError, time_paired, workload

INCREMENT_SOURCE = r"""
__global__ void increment(float* x, int n){
    const int i = threadIdx.x + blockDim.x * blockIdx.x;
    if (i < n) { x[i] += 1.0f; }
}
"""
ELEMENTS = 32


def _increment(launch: LaunchConfig, x: np.ndarray, n: Any) -> None:
    x[:min(int(n), launch.grid[0] * launch.block[0])] += 1.0


INCREMENT = Kernel(INCREMENT_SOURCE, "increment", cpu=_increment)


def _ratio_row(name: str, figure: str, numerator: list[float], denominator: list[float],
               target: str) -> Row:
    """A ratio's median and spread, taken over the paired repeats (run i of one path vs run i of the other)."""
    return Row.of(name, figure, "×", [a / b for a, b in zip(numerator, denominator)], target)


@workload("chain", "N tiny kernels in a chain: submitted to a stream one by one vs one graph replay")
def chain(device: Any, options: Options) -> list[Row]:
    """(a) ``stream.launch`` N times then synchronize, vs (b) ``exe.launch`` of the N-node graph then
    synchronize; each kernel adds 1 to a 32-element float32 array, so both must leave N everywhere."""
    n = options.nodes
    array = device.zeros(ELEMENTS, np.float32)
    stream = device.stream()
    graph = Graph(device)
    previous: Node | tuple[()] = ()
    for _ in range(n):
        previous = graph.add_kernel(INCREMENT, 1, ELEMENTS, array, ELEMENTS, after=previous)
    exe = graph.instantiate()

    def eager() -> None:
        for _ in range(n):
            stream.launch(INCREMENT, 1, ELEMENTS, array, ELEMENTS)
        stream.synchronize()

    def replay() -> None:
        exe.launch(stream)
        stream.synchronize()

    # The floor: the kernel's CPU body alone, called in a plain loop on a host array of the same shape.
    host = np.zeros(ELEMENTS, np.float32)
    launch = LaunchConfig((1, 1, 1), (ELEMENTS, 1, 1), 0)
    count = np.int32(ELEMENTS)

    def body() -> None:
        for _ in range(n):
            _increment(launch, host, count)

    results: dict[str, np.ndarray] = {}

    def reset() -> None:
        stream.memset(array, 0.0)
        stream.synchronize()
        host[:] = 0.0

    def check(path: str) -> None:
        got = host.copy() if path == "body" else array.to_numpy()
        if not np.array_equal(got, np.full(ELEMENTS, n, np.float32)):
            raise ValidationError(f"chain: the {path} path left {got[:4]}... instead of {float(n)} everywhere")
        results[path] = got

    samples = time_paired({"stream": eager, "graph": replay, "body": body}, options, reset, check)
    if not np.array_equal(results["stream"], results["graph"]):
        raise ValidationError("chain: the stream and graph paths computed different arrays")
    exe.close()
    per_op, per_node, per_call = ([s / n * 1e6 for s in samples[path]] for path in ("stream", "graph", "body"))
    return [
        Row.of("chain", f"(a) stream: {n} launches + synchronize, per op", "µs", per_op),
        Row.of("chain", f"(b) graph: replay of the {n}-node graph + synchronize, per node", "µs", per_node),
        _ratio_row("chain", "(a) / (b)", per_op, per_node, "≥ 2"),
        Row.of("chain", "floor: the kernel's cpu= body alone, called in a Python loop, per call", "µs", per_call),
    ]


@workload("branches", "W independent branches that each wait 2 ms: one stream vs one graph replay")
def branches(device: Any, options: Options) -> list[Row]:
    """Whether independent branches of a graph run concurrently: W host nodes that each sleep 2 ms
    (standing for device work that does not hold the host), joined by an empty node, vs the same W host
    functions on one stream, which must run them one after the other."""
    width, seconds = options.width, 0.002
    lock = threading.Lock()
    calls = [0]

    def busy() -> None:
        time.sleep(seconds)
        with lock:
            calls[0] += 1

    stream = device.stream()
    graph = Graph(device)
    graph.add_empty(after=[graph.add_host(busy) for _ in range(width)])
    exe = graph.instantiate()

    def serial() -> None:
        for _ in range(width):
            stream.host(busy)
        stream.synchronize()

    def replay() -> None:
        exe.launch(stream)
        stream.synchronize()

    def reset() -> None:
        calls[0] = 0

    def check(path: str) -> None:
        if calls[0] != width:
            raise ValidationError(f"branches: the {path} path made {calls[0]} calls instead of {width}")

    samples = time_paired({"stream": serial, "graph": replay}, options, reset, check)
    exe.close()
    stream_ms = [s * 1e3 for s in samples["stream"]]
    graph_ms = [s * 1e3 for s in samples["graph"]]
    return [
        Row.of("branches", f"(c) stream: {width} host functions of 2 ms in order + synchronize", "ms", stream_ms),
        Row.of("branches", f"(d) graph: replay of {width} independent 2 ms host nodes + synchronize", "ms",
               graph_ms),
        _ratio_row("branches", "(c) / (d): branches running at once", stream_ms, graph_ms, f"> 1 (≤ {width})"),
    ]


AXPY_SOURCE = r"""
__global__ void axpy(float a, const float* x, const float* y, float* out, int n){
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""
AXPY = Kernel(AXPY_SOURCE, "axpy")
AXPY_ELEMENTS, AXPY_BLOCK = 1 << 20, 256
# Launches per timed run: one launch after other work pays for waking the threads a launch spreads its blocks over
# (several ms on a 2-core VM, measured 2026-12-07), which back-to-back launches, like NumPy's calls, do not.
AXPY_LAUNCHES = 10


@workload("axpy", "a*x + y over 2^20 elements: one kernel launch vs the same expression in NumPy on the host")
def axpy(device: Any, options: Options) -> list[Row]:
    """A kernel of real size compiled from CUDA source (on the CPU backend, by the machine's C++ compiler) against
    NumPy's ``np.add(2 * x, y, out=)``, both on float32, ``AXPY_LAUNCHES`` times per timed run (the kernel's
    launches then one synchronize); both results must match the float64 expression."""
    rng = np.random.default_rng(0)
    xs, ys = rng.random(AXPY_ELEMENTS, np.float32), rng.random(AXPY_ELEMENTS, np.float32)
    want = 2.0 * xs.astype(np.float64) + ys
    stream = device.stream()
    x, y, out = device.asarray(xs), device.asarray(ys), device.zeros(AXPY_ELEMENTS, np.float32)
    result = np.empty(AXPY_ELEMENTS, np.float32)
    grid = AXPY_ELEMENTS // AXPY_BLOCK

    def kernel() -> None:
        for _ in range(AXPY_LAUNCHES):
            stream.launch(AXPY, grid, AXPY_BLOCK, 2.0, x, y, out, AXPY_ELEMENTS)
        stream.synchronize()

    def numpy() -> None:
        for _ in range(AXPY_LAUNCHES):
            np.add(np.float32(2.0) * xs, ys, out=result)

    def reset() -> None:
        stream.memset(out, 0.0)
        stream.synchronize()
        result[:] = 0.0

    def check(path: str) -> None:
        got = out.to_numpy() if path == "kernel" else result
        if not np.allclose(got, want, rtol=1e-6, atol=0.0):
            worst = float(np.max(np.abs(got - want)))
            raise ValidationError(f"axpy: the {path} path's result is off 2*x + y by up to {worst:g}")

    kernel()  # compiled (and loaded) here, not in the first timed run
    samples = time_paired({"kernel": kernel, "numpy": numpy}, options, reset, check)
    kernel_ms, numpy_ms = ([s / AXPY_LAUNCHES * 1e3 for s in samples[path]] for path in ("kernel", "numpy"))
    return [
        Row.of("axpy", f"kernel: a*x + y, 2^20 float32 ({grid} blocks of {AXPY_BLOCK}), per launch of "
                       f"{AXPY_LAUNCHES} then a synchronize", "ms", kernel_ms),
        Row.of("axpy", f"NumPy: np.add(2 * x, y, out=) on the host, per call of {AXPY_LAUNCHES}", "ms", numpy_ms),
        _ratio_row("axpy", "kernel / NumPy", kernel_ms, numpy_ms, "≤ 1"),
    ]

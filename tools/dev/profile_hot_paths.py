"""Profile gpugraph's CUDA hot paths: the cost of the bare cuda-bindings calls each path makes, then a
cProfile of each gpugraph path, so a gap to the C++ floor can be split into binding and Python layer.

Usage (on a CUDA machine, from the repository root):
    PYTHONPATH=src python3 tools/dev/profile_hot_paths.py [--top 14]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import gpugraph as gg
from gpugraph._placement import load_kernel
from gpugraph.bench._gpu import TINY, _chain


def per_call(fn: Callable[[], Any], count: int, repeats: int = 7) -> float:
    """Median µs per call of ``fn`` over ``repeats`` loops of ``count`` calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(count):
            fn()
        samples.append((time.perf_counter() - start) / count * 1e6)
    return statistics.median(samples)


def bindings(device: Any) -> None:
    """What the bare cuda-bindings calls of each path cost, one by one."""
    from cuda.bindings import driver as cu
    kernel = gg.Kernel(TINY, "tiny")
    stream, x = device.stream(), device.zeros(32, np.float32)
    function = load_kernel(device, kernel)
    with function.lock:
        args = function.pack((x, 32))
    f, s = function.handle, stream._handle.handle
    rows = [("cuLaunchKernel (CUfunction, CUstream objects, int kernelParams)",
             per_call(lambda: cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, 0), 10_000))]
    cu.cuStreamSynchronize(s)
    rows.append(("Function.pack((x, 32)) with its lock", per_call(lambda: _pack(function, (x, 32)), 10_000)))

    def make_params() -> Any:
        p = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func = f
        p.gridDimX, p.gridDimY, p.gridDimZ = 1, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ = 32, 1, 1
        p.sharedMemBytes = 0
        p.kernelParams = args
        p.extra = 0
        return p
    rows.append(("CUDA_KERNEL_NODE_PARAMS() with its fields set", per_call(make_params, 10_000)))
    prepared = make_params()
    graph = cu.cuGraphCreate(0)[1]
    last = [cu.cuGraphAddKernelNode(graph, [], 0, prepared)[1]]

    def add() -> None:
        last[0] = cu.cuGraphAddKernelNode(graph, [last[0]], 1, prepared)[1]
    rows.append(("cuGraphAddKernelNode (prepared params, one dependency)", per_call(add, 1000, 3)))
    count = len(cu.cuGraphGetNodes(graph, 0)) and cu.cuGraphGetNodes(graph, 0)[2]
    rows.append((f"cuGraphGetNodes, {count} nodes (per node)",
                 per_call(lambda: cu.cuGraphGetNodes(graph, count), 20) / count))
    edges = cu.cuGraphGetEdges(graph, 0)[-1]
    rows.append((f"cuGraphGetEdges, {edges} edges (per edge)",
                 per_call(lambda: cu.cuGraphGetEdges(graph, edges), 20) / edges))
    rows.append(("cuGraphInstantiate, per node",
                 per_call(lambda: cu.cuGraphExecDestroy(cu.cuGraphInstantiate(graph, 0)[1]), 5) / count))
    exe = cu.cuGraphInstantiate(graph, 0)[1]
    rows.append(("cuGraphExecUpdate with the same graph, per node",
                 per_call(lambda: cu.cuGraphExecUpdate(exe, graph), 20) / count))
    node = last[0]
    rows.append(("cuGraphExecKernelNodeSetParams (prepared params)",
                 per_call(lambda: cu.cuGraphExecKernelNodeSetParams(exe, node, prepared), 10_000)))
    rows.append(("cuGraphLaunch (CUgraphExec, CUstream objects) + sync, 1000 nodes",
                 per_call(lambda: (cu.cuGraphLaunch(exe, s), cu.cuStreamSynchronize(s)), 50)))
    cu.cuStreamBeginCapture(s, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)
    rows.append(("cuStreamGetCaptureInfo (in a capture)", per_call(lambda: cu.cuStreamGetCaptureInfo(s), 10_000)))
    rows.append(("cuLaunchKernel in a capture", per_call(lambda: cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, 0),
                                                         1000, 3)))
    captured = cu.cuStreamEndCapture(s)[1]
    cu.cuGraphDestroy(captured)
    cu.cuGraphExecDestroy(exe)
    cu.cuGraphDestroy(graph)
    print("## cuda-bindings calls alone (µs)")
    for name, value in rows:
        print(f"{value:9.3f}  {name}")


def _pack(function: Any, args: tuple) -> int:
    with function.lock:
        return function.pack(args)


def profiles(device: Any, top: int) -> None:
    """A cProfile of each gpugraph hot path, with its plain time per operation beside it."""
    kernel = gg.Kernel(TINY, "tiny")
    stream, x = device.stream(), device.zeros(32, np.float32)
    stream.launch(kernel, 1, 32, x, 32)
    n = 1000

    def capture() -> Any:
        with stream.capture() as cap:
            for _ in range(n):
                stream.launch(kernel, 1, 32, x, 32)
        return cap.graph
    graph = capture()
    exe, other = graph.instantiate(), capture()
    node = graph.nodes[0]
    one = gg.Graph(device)
    one.add_kernel(kernel, 1, 32, x, 32)
    one_exe = one.instantiate()
    paths: list[tuple[str, Callable[[], Any], int, int]] = [
        ("Stream.launch", lambda: stream.launch(kernel, 1, 32, x, 32), 10_000, 1),
        ("GraphExec.launch (1 node)", lambda: one_exe.launch(stream), 10_000, 1),
        ("capture, per node", capture, 3, n),
        ("explicit build, per node", lambda: _chain(device, kernel, x, n, 1), 3, n),
        ("instantiate, per node", lambda: graph.instantiate().close(), 5, n),
        ("whole-graph update, per node", lambda: exe.update(other), 5, n),
        ("set_params", lambda: exe.set_params(node, x, 32), 10_000, 1),
    ]
    for name, fn, count, per in paths:
        fn()
        stream.synchronize()
        plain = per_call(fn, count, 5) / per
        stream.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(count):
            fn()
        profile.disable()
        stream.synchronize()
        print(f"\n## {name}: {plain:.3f} µs per operation without the profiler")
        pstats.Stats(profile).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=14, help="functions listed per path")
    options = parser.parse_args()
    device = gg.Device("cuda:0")
    bindings(device)
    profiles(device, options.top)


if __name__ == "__main__":
    main()

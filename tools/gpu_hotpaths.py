"""Quick hot-path figures on a GPU, gpugraph against raw cuda-bindings and CuPy in the same process.

Prints medians (µs) of: one tiny kernel launched on a stream (end to end per kernel, 10,000 launches then
a synchronize), and the host cost of one launch call of a 1000-node chain graph. The full side-by-side
suite is `python -m gpugraph bench`; this is the check run with the CUDA backend's verification.
"""

from __future__ import annotations

import ctypes
import statistics
import time

import numpy as np

import gpugraph as gg
from cuda.bindings import driver as cu

SRC = 'extern "C" __global__ void tiny(float* x, int n){ int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'
N_LAUNCH, REPEATS = 10_000, 7


def median_us(fn, per: int) -> float:
    fn()
    return statistics.median((lambda t0: (fn(), (time.perf_counter() - t0))[1])(time.perf_counter())
                             for _ in range(REPEATS)) / per * 1e6


def main() -> None:
    dev = gg.Device("cuda")
    kernel = gg.Kernel(SRC, "tiny")
    s = dev.stream()
    x = dev.zeros(32, np.float32)

    def gg_launches():
        for _ in range(N_LAUNCH):
            s.launch(kernel, 1, 32, x, 32)
        s.synchronize()

    gg_launches()  # compiles the kernel
    function = kernel._functions[dev]
    with function.lock:
        params = function.pack((x, np.int32(32)))
    handle, sh = function.handle, s._handle.handle

    def raw_launches():
        for _ in range(N_LAUNCH):
            cu.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, sh, params, 0)
        cu.cuStreamSynchronize(sh)

    rows = [("stream launch, per kernel", median_us(gg_launches, N_LAUNCH), median_us(raw_launches, N_LAUNCH))]
    try:
        import cupy as cp
        ck = cp.RawKernel(SRC, "tiny")
        cx = cp.zeros(32, cp.float32)
        with cp.cuda.ExternalStream(s.ptr):
            def cupy_launches():
                for _ in range(N_LAUNCH):
                    ck((1,), (32,), (cx, np.int32(32)))
                cp.cuda.runtime.streamSynchronize(s.ptr)
            cupy_us = median_us(cupy_launches, N_LAUNCH)
    except ImportError:
        cupy_us = float("nan")

    g = gg.Graph(dev)
    node = None
    for _ in range(1000):
        node = g.add_kernel(kernel, 1, 32, x, 32, after=node)
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    calls = []
    for _ in range(200):
        t0 = time.perf_counter()
        exe.launch(s)
        calls.append(time.perf_counter() - t0)
        s.synchronize()
    raw = []
    for _ in range(200):
        t0 = time.perf_counter()
        cu.cuGraphLaunch(exe._handle.handle, sh)
        raw.append(time.perf_counter() - t0)
        s.synchronize()
    gpu_per_node = []
    start, end = dev.event(timing=True), dev.event(timing=True)
    for _ in range(20):
        s.record(start)
        exe.launch(s)
        s.record(end)
        end.synchronize()
        gpu_per_node.append(start.elapsed_ms(end) * 1e3 / 1000)
    rows.append(("graph launch host cost (1000-node chain)", statistics.median(calls) * 1e6,
                 statistics.median(raw) * 1e6))
    print(f"{'figure (median, µs)':<44} {'gpugraph':>9} {'raw cuda-bindings':>18} {'CuPy':>8}")
    print(f"{rows[0][0]:<44} {rows[0][1]:9.2f} {rows[0][2]:18.2f} {cupy_us:8.2f}")
    print(f"{rows[1][0]:<44} {rows[1][1]:9.2f} {rows[1][2]:18.2f} {'':>8}")
    print(f"{'GPU time per node in that graph':<44} {statistics.median(gpu_per_node):9.2f}")


if __name__ == "__main__":
    main()

"""Issue 14's figures for kernels compiled for the CPU backend, on this machine: the cold compile and an in-process
reload from the disk cache, a 2^20-element a*x+y kernel against the same NumPy expression, and a tiny kernel's cost
per launch. (Load from the disk cache in a new process: run any kernel in two processes with one GPUGRAPH_CACHE_DIR.)

Usage: PYTHONPATH=src python3 tools/cpu_kernels.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

import gpugraph as gg
from gpugraph.backends.cpu import _compile

SOURCE = r"""
__global__ void axpy(float a, const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
__global__ void tiny(float* x) { if (threadIdx.x == 0) x[0] += 1.0f; }
"""


def median_ms(fn: Callable[[], object], runs: int = 30) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    device = gg.Device("cpu")
    stream = device.stream()
    cache = tempfile.mkdtemp()
    os.environ["GPUGRAPH_CACHE_DIR"] = cache
    start = time.perf_counter()
    device._load_kernel(gg.Kernel(SOURCE, "axpy"))
    cold = time.perf_counter() - start
    _compile._modules.clear()
    _compile._loaded.clear()
    kernel = gg.Kernel(SOURCE, "axpy")
    start = time.perf_counter()
    device._load_kernel(kernel)
    print(f"compile: cold {cold * 1e3:.0f} ms, reloaded in-process from the disk cache "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms")
    n = 1 << 20
    rng = np.random.default_rng(0)
    xs, ys = rng.random(n, np.float32), rng.random(n, np.float32)
    x, y, out = device.asarray(xs), device.asarray(ys), device.zeros(n, np.float32)
    result = np.empty(n, np.float32)

    def compiled() -> None:
        stream.launch(kernel, n // 256, 256, 2.0, x, y, out, n)
        stream.synchronize()

    def numpy_expression() -> None:
        np.add(np.float32(2.0) * xs, ys, out=result)
    compiled()
    if not np.array_equal(out.to_numpy(), np.float32(2.0) * xs + ys):
        raise SystemExit("cpu_kernels: the compiled kernel's result differs from NumPy's")
    print(f"{'gpugraph CPU compiled axpy, 2^20':40s} {median_ms(compiled):8.3f} ms")
    print(f"{'NumPy 2*x+y, 2^20':40s} {median_ms(numpy_expression):8.3f} ms")
    tiny, one = gg.Kernel(SOURCE, "tiny"), device.zeros(1, np.float32)

    def thousand() -> None:
        for _ in range(1000):
            stream.launch(tiny, 1, 32, one)
        stream.synchronize()
    thousand()
    print(f"tiny kernel, per launch (1000 launches then a sync): {median_ms(thousand, 20):.2f} µs")
    print("CPUs:", os.cpu_count())
    shutil.rmtree(cache)


if __name__ == "__main__":
    main()

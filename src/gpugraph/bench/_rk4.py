"""A small real workload: a classic Runge-Kutta (RK4) integrator, 10 steps on 1024 elements, run eagerly
(80 stream launches) and as one graph, against a NumPy float64 reference; with CuPy's eager loop of the
same kernels beside it on a GPU where CuPy is installed.

The system is logistic growth, dy/dt = r * y * (1 - y), one independent equation per element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import Kernel
from ._core import Options, Row, ValidationError, time_paired, workload

ELEMENTS = 1024
STEPS = 10
DT = 0.05
BLOCK = 256

SOURCE = r"""
extern "C" __global__ void rhs(float* k, const float* y, const float* r, int n){
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { k[i] = r[i] * y[i] * (1.0f - y[i]); }
}
extern "C" __global__ void axpy(float* out, const float* y, const float* k, float h, int n){
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = y[i] + h * k[i]; }
}
extern "C" __global__ void combine(float* y, const float* k1, const float* k2, const float* k3,
                                   const float* k4, float h6, int n){
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] += h6 * (k1[i] + 2.0f * k2[i] + 2.0f * k3[i] + k4[i]); }
}
"""


RHS = Kernel(SOURCE, "rhs")
AXPY = Kernel(SOURCE, "axpy")
COMBINE = Kernel(SOURCE, "combine")


def initial() -> tuple[np.ndarray, np.ndarray]:
    """The starting values y0 in (0, 1) and growth rates r, one per element."""
    i = np.arange(ELEMENTS)
    return (0.05 + 0.9 * i / ELEMENTS).astype(np.float32), (0.5 + (i % 7) * 0.25).astype(np.float32)


def reference(y0: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The same integration in float64 NumPy."""
    y, r = y0.astype(np.float64), r.astype(np.float64)
    f = lambda v: r * v * (1 - v)  # noqa: E731
    for _ in range(STEPS):
        k1 = f(y)
        k2 = f(y + DT / 2 * k1)
        k3 = f(y + DT / 2 * k2)
        k4 = f(y + DT * k3)
        y = y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def integrate(launch: Any, y: Any, r: Any, k: list[Any], tmp: Any) -> None:
    """Issue the 10 steps through ``launch(kernel, *args)`` (a stream's launch or a graph builder)."""
    grid, n = (ELEMENTS + BLOCK - 1) // BLOCK, ELEMENTS
    for _ in range(STEPS):
        launch(RHS, grid, BLOCK, k[0], y, r, n)
        launch(AXPY, grid, BLOCK, tmp, y, k[0], DT / 2, n)
        launch(RHS, grid, BLOCK, k[1], tmp, r, n)
        launch(AXPY, grid, BLOCK, tmp, y, k[1], DT / 2, n)
        launch(RHS, grid, BLOCK, k[2], tmp, r, n)
        launch(AXPY, grid, BLOCK, tmp, y, k[2], DT, n)
        launch(RHS, grid, BLOCK, k[3], tmp, r, n)
        launch(COMBINE, grid, BLOCK, y, k[0], k[1], k[2], k[3], DT / 6, n)


@workload("rk4", "RK4 integrator, 10 steps on 1024 elements: 80 eager stream launches vs one graph launch")
def rk4(device: Any, options: Options) -> list[Row]:
    y0, rates = initial()
    expected = reference(y0, rates)
    stream = device.stream()
    y, r = device.asarray(y0), device.asarray(rates)
    k = [device.zeros(ELEMENTS, np.float32) for _ in range(4)]
    tmp = device.zeros(ELEMENTS, np.float32)
    with stream.capture() as cap:
        integrate(stream.launch, y, r, k, tmp)
    exe = cap.graph.instantiate()

    def eager() -> None:
        integrate(stream.launch, y, r, k, tmp)
        stream.synchronize()

    def graph() -> None:
        exe.launch(stream)
        stream.synchronize()
    paths = {"eager": eager, "graph": graph}
    readers = {"eager": y.to_numpy, "graph": y.to_numpy}
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None and device.backend == "cuda":
        paths["cupy"], readers["cupy"], cy = _cupy_eager(cp, stream, y0, rates)

    def reset() -> None:
        stream.memcpy(y, y0)
        stream.synchronize()
        if "cupy" in paths:
            cy.set(y0)

    def check(name: str) -> None:
        got = readers[name]()
        if not np.allclose(got, expected, rtol=1e-5, atol=1e-6):
            worst = float(np.max(np.abs(got - expected)))
            raise ValidationError(f"rk4 {name}: the result is off the float64 reference by up to {worst:g}")
    samples = time_paired(paths, options, prepare=reset, check=check)
    exe.close()
    label = {"eager": "gpugraph eager: 80 Stream.launch + synchronize",
             "graph": "gpugraph graph: one GraphExec.launch + synchronize",
             "cupy": "CuPy eager: 80 RawKernel calls + synchronize"}
    rows = [Row.of("rk4", label[name], "µs", [s * 1e6 for s in values]) for name, values in samples.items()]
    rows.append(Row.of("rk4", "eager / graph (gpugraph)", "×",
                       [a / b for a, b in zip(samples["eager"], samples["graph"])], "> 1"))
    if "cupy" in samples:
        rows.append(Row.of("rk4", "CuPy eager / gpugraph graph", "×",
                           [a / b for a, b in zip(samples["cupy"], samples["graph"])]))
    return rows


def _cupy_eager(cp: Any, stream: Any, y0: np.ndarray, rates: np.ndarray) -> tuple[Any, Any, Any]:
    """CuPy's eager loop over the same kernels, on gpugraph's stream."""
    module = cp.RawModule(code=SOURCE)
    kernels = {kernel: module.get_function(kernel.name) for kernel in (RHS, AXPY, COMBINE)}
    external = cp.cuda.Stream.from_external(stream)  # the CUDA stream protocol
    cy, cr = cp.asarray(y0), cp.asarray(rates)
    ck = [cp.zeros(ELEMENTS, cp.float32) for _ in range(4)]
    ctmp = cp.zeros(ELEMENTS, cp.float32)

    def launch(kernel: Any, grid: int, block: int, *args: Any) -> None:
        kernels[kernel]((grid,), (block,), tuple(np.float32(a) if type(a) is float else
                                                 np.int32(a) if type(a) is int else a for a in args))

    def run() -> None:
        with external:
            integrate(launch, cy, cr, ck, ctmp)
        external.synchronize()
    return run, cy.get, cy

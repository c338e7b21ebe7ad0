"""Test kernels shared by the suite: CUDA/HIP C++ source plus a NumPy implementation of each.

Every CPU implementation does exactly what the CUDA code does for the launch it is given: a 1-D kernel
covers ``min(n, grid[0] * block[0])`` elements (threads past ``n`` fail the bounds check, elements past
the last thread are never touched), so a test gives identical results on the CPU backend and on a GPU.
Tests keep 1-D kernels to ``grid[1] == grid[2] == block[1] == block[2] == 1``, as the CUDA code would
otherwise apply ``x[i] *= f`` once per extra y/z thread. Values used with ``axpy`` are small integers
and halves, so NVCC's fused multiply-add and NumPy's separate multiply and add round the same way.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

import gpugraph as gg
from gpugraph._argpack import layout_of

SOURCE = r"""
__global__ void scale(float* x, float f, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] *= f;}
}
__global__ void shift(float* x, float f, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] += f;}
}
__global__ void add(float* out, const float* a, const float* b, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){out[i] = a[i] + b[i];}
}
__global__ void fill(int* x, int v, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = v;}
}
__global__ void axpy(float a, const float* x, float* y, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){y[i] = a * x[i] + y[i];}
}
__global__ void inc(double* x, size_t n){
    const size_t i = threadIdx.x + blockDim.x * blockIdx.x;
    if(i < n){x[i] += 1.0;}
}
__global__ void handshake(volatile int* mine, volatile int* other, int* seen, long long max_cycles){
    *mine = 1;
    __threadfence_system();
    const long long start = clock64();
    while(*other == 0 && clock64() - start < max_cycles){}
    *seen = *other;
}
__global__ void zero_bytes(void* x, int nbytes){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < nbytes){((unsigned char*)x)[i] = 0;}
}
__global__ void iota2d(int* out, int width, int height){
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if(x < width && y < height){out[y * width + x] = y * 1000 + x;}
}
"""


def covered(launch: gg.LaunchConfig, n: int) -> int:
    """Elements a 1-D launch touches: one per thread, capped by the kernel's bounds check."""
    return max(0, min(int(n), launch.grid[0] * launch.block[0]))


def _scale(launch, x, f, n):
    k = covered(launch, n)
    x[:k] *= f


def _add(launch, out, a, b, n):
    k = covered(launch, n)
    out[:k] = a[:k] + b[:k]


def _fill(launch, x, v, n):
    x[:covered(launch, n)] = v


def _axpy(launch, a, x, y, n):
    k = covered(launch, n)
    y[:k] = a * x[:k] + y[:k]


def _inc(launch, x, n):
    x[:covered(launch, n)] += 1.0


def _handshake(launch, mine, other, seen, max_cycles):
    mine[0] = 1
    pause = threading.Event()
    deadline = time.monotonic() + max_cycles / 2e9  # cycles at ~2 GHz, as on the GPU
    while other[0] == 0 and time.monotonic() < deadline:
        pause.wait(0.0005)
    seen[0] = other[0]


def _zero_bytes(launch, x, nbytes):
    x.reshape(-1).view(np.uint8)[:covered(launch, nbytes)] = 0


def _iota2d(launch, out, width, height):
    w = min(int(width), launch.grid[0] * launch.block[0])
    h = min(int(height), launch.grid[1] * launch.block[1])
    ys, xs = np.mgrid[0:h, 0:w]
    out.reshape(-1)[(ys * int(width) + xs).reshape(-1)] = (ys * 1000 + xs).reshape(-1)


def _shift(launch, x, f, n):
    x[:covered(launch, n)] += f


scale = gg.Kernel(SOURCE, "scale", cpu=_scale)
shift = gg.Kernel(SOURCE, "shift", cpu=_shift)  # the signature of scale, to change a node's function
add = gg.Kernel(SOURCE, "add", cpu=_add)
fill = gg.Kernel(SOURCE, "fill", cpu=_fill)
axpy = gg.Kernel(SOURCE, "axpy", cpu=_axpy)
# (Loaded before any test, as all these are: a test that blocks a stream on a memory wait launches it to release it,
# and loading a module on CUDA waits for the device's queued work.)
set_flag = gg.Kernel("""
extern "C" __global__ void set_flag(unsigned int* flag, unsigned int value) { flag[0] = value; }
""", "set_flag", cpu=lambda launch, flag, value: flag.__setitem__(0, value))
inc = gg.Kernel(SOURCE, "inc", cpu=_inc)
iota2d = gg.Kernel(SOURCE, "iota2d", cpu=_iota2d)
# handshake(mine, other, seen, max_cycles): raise my flag, spin (bounded) until the other kernel raises
# its flag; seen[0] == 1 proves two kernels ran at the same time. Bounded, so a serial run cannot hang.
handshake = gg.Kernel(SOURCE, "handshake", cpu=_handshake)
zero_bytes = gg.Kernel(SOURCE, "zero_bytes", cpu=_zero_bytes)
HANDSHAKE_CYCLES = 4_000_000_000  # about 2 s at 2 GHz: the most a serial run waits

# The kernels of ROCm's "HIP graphs" page, unchanged: the example's own source.
from gpugraph.examples import explicit_graph  # noqa: E402

SEED_SOURCE = explicit_graph.SOURCE


def launch_1d(n: int, block: int = 32) -> tuple[int, int]:
    """(grid, block) covering ``n`` elements, as CUDA code would compute them."""
    return max(1, -(-n // block)), block


def f32(device: gg.Device, values) -> gg.Array:
    """A float32 device Array holding ``values``."""
    return device.asarray(np.asarray(values, dtype=np.float32))


def launch_and_wait(exe: gg.GraphExec, stream: gg.Stream, times: int = 1) -> None:
    """Launch ``exe`` ``times`` times on ``stream`` and wait for it."""
    for _ in range(times):
        exe.launch(stream)
    stream.synchronize()


def run(graph: gg.Graph, launches: int = 1) -> None:
    """Instantiate ``graph``, launch it ``launches`` times on a new stream of its device and wait for it."""
    stream = graph.device.stream()
    with graph.instantiate() as exe:
        launch_and_wait(exe, stream, launches)


def pinned(device: gg.Device, values, dtype=None) -> np.ndarray:
    """Page-locked host memory (``device.pinned``) holding ``values``: what graph and captured copies need."""
    values = np.asarray(values, dtype)
    out = device.pinned(values.shape, values.dtype)
    out[...] = values
    return out


@contextmanager
def garbage_held(device: gg.Device) -> Iterator[None]:
    """Collect garbage and let its releases run now, then hold the cycle collector off for the block: a test
    that blocks a stream with a host function must not meet a release meanwhile. On CUDA, freeing device or
    page-locked memory waits for the device, so a release (one a capture deferred to its end, say) would wait
    for the blocked stream until the test's gate timed out."""
    gc.collect()
    device.synchronize()
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class WithLayout:
    """A kernel's function as its backend loaded it, with the Layout a CUDA function has (the CPU backend's has none)
    and ``function`` as the Layout's address: what the compiled core reads of a kernel, for tests whose recording
    hot calls stand in for a backend's (gpugraph.backends._hot)."""

    def __init__(self, loaded: object, kernel: gg.Kernel, function: int) -> None:
        self._loaded, self.layout = loaded, layout_of(kernel.signature, function)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loaded, name)

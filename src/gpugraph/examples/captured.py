"""AMDGPU.jl's graph examples with ``@gg.captured`` (its documentation's "Graphs" page, https://amdgpu.juliagpu.org/stable/).

* increment: ``f!(o) = o .+= 1`` on a 4x4 zero array of 64-bit ints. The first call captures the
  function and runs the graph (sum 16); the next call replays it (sum 32). A call on another array of the
  same shape captures again and updates the executable graph in place, with no new instantiation.
* allocations: ``o .+= sin.(x) * cos.(y) .+ 1`` on 256x256 float32, where ``x`` and ``y`` are
  allocated inside the function and filled with pseudo-random values in [0, 1). AMDGPU.jl needs a
  ``GPUArrays.AllocCache`` around the capture for this; here, memory allocated on the current stream
  inside a captured function becomes graph memory, at the same address at every replay and freed with
  the cache. The random values come from a hash of the element index and a seed; the seed is a dynamic
  argument, so each of the N = 10 calls draws new values by patching one kernel argument, never
  recapturing. The result is checked against NumPy (rtol 1e-4: float32, summation order differs).

Run with ``python -m gpugraph.examples.captured``; it prints each example's results and the captured
function's statistics.
"""

from __future__ import annotations

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

SOURCE = r"""
__global__ void increment(long long* o, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){o[i] += 1;}
}

__device__ unsigned int hash_u32(unsigned int h){
    h ^= h >> 16; h *= 0x7feb352dU; h ^= h >> 15; h *= 0x846ca68bU; h ^= h >> 16;
    return h;
}

// Uniform in [0, 1): the top 24 bits of a hash of (index, seed, salt), exact in float.
__global__ void fill_random(float* x, unsigned int seed, unsigned int salt, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = (hash_u32((unsigned int)i ^ hash_u32(2u * seed + salt)) >> 8) * (1.0f / 16777216.0f);}
}

__global__ void sin_inplace(float* x, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = sinf(x[i]);}
}

__global__ void cos_inplace(float* x, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = cosf(x[i]);}
}

// c = a * b, all n x n row-major; one thread per element of c.
__global__ void matmul(float* c, const float* a, const float* b, int n){
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if(row < n && col < n){
        float sum = 0.0f;
        for(int k = 0; k < n; ++k){sum += a[row * n + k] * b[k * n + col];}
        c[row * n + col] = sum;
    }
}

// o += c + 1
__global__ void add_plus_one(float* o, const float* c, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){o[i] += c[i] + 1.0f;}
}
"""

THREADS = 256
TILE = 16  # matmul blocks are TILE x TILE threads


def hash_u32(h: np.ndarray) -> np.ndarray:
    """The kernels' integer hash, on uint32 arrays (wrapping arithmetic, as in C)."""
    h = np.asarray(h, dtype=np.uint32).copy()
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x7FEB352D)
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x846CA68B)
    h ^= h >> np.uint32(16)
    return h


def random_values(seed: int, salt: int, n: int) -> np.ndarray:
    """What ``fill_random`` writes: n float32 values in [0, 1)."""
    key = np.uint32((2 * int(seed) + int(salt)) & 0xFFFFFFFF)
    bits = hash_u32(np.arange(n, dtype=np.uint32) ^ hash_u32(key))
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


increment = gg.Kernel(SOURCE, "increment")
fill_random = gg.Kernel(SOURCE, "fill_random")
sin_inplace = gg.Kernel(SOURCE, "sin_inplace")
cos_inplace = gg.Kernel(SOURCE, "cos_inplace")
matmul = gg.Kernel(SOURCE, "matmul")
add_plus_one = gg.Kernel(SOURCE, "add_plus_one")


def blocks(n: int) -> int:
    return -(-n // THREADS)


# (i) f!(o) = o .+= 1

@gg.captured
def f(o: gg.Array) -> None:
    """``o .+= 1``, enqueued on the current stream (the capture's, while captured)."""
    gg.current_stream(o.device).launch(increment, blocks(o.size), THREADS, o, o.size)


def increment_example(device: gg.Device) -> tuple[bool, str]:
    f.clear()
    f.stats = gg.CapturedStats()  # fresh counts each time the demo runs this
    z = device.zeros((4, 4), np.int64)
    f(z)                                  # captures, instantiates and launches
    first = int(z.to_numpy().sum())       # to_numpy waits for the device
    f(z)                                  # same key: replays the graph
    second = int(z.to_numpy().sum())
    w = device.zeros((4, 4), np.int64)
    f(w)                                  # new key, same topology: recapture + update in place
    other = int(w.to_numpy().sum())
    s = f.stats
    ok = ((first, second, other) == (16, 32, 16)
          and (s.captures, s.instantiations, s.updates, s.replays) == (2, 1, 1, 1))
    f.clear()
    return ok, f"sums {first}, {second} (expected 16, 32); another array: {other}; {s}"


# (ii) AMDGPU.jl's allocation example

@gg.captured(dynamic=("seed",))
def add_sin_cos(o: gg.Array, seed: int) -> None:
    """``o .+= sin.(x) * cos.(y) .+ 1`` with x and y allocated here and filled with random values."""
    s = gg.current_stream(o.device)
    n = o.shape[0]
    x = s.alloc(o.shape, np.float32)      # graph memory: same address at every replay
    y = s.alloc(o.shape, np.float32)
    p = s.alloc(o.shape, np.float32)
    # While captured, `seed` is a gg.Param: pass it to kernels as it is (Python arithmetic on it would
    # run once, at the capture, so `seed + 1` is not an option); the salt tells x's values from y's.
    s.launch(fill_random, blocks(o.size), THREADS, x, seed, 0, o.size)
    s.launch(fill_random, blocks(o.size), THREADS, y, seed, 1, o.size)
    s.launch(sin_inplace, blocks(o.size), THREADS, x, o.size)
    s.launch(cos_inplace, blocks(o.size), THREADS, y, o.size)
    s.launch(matmul, (-(-n // TILE), -(-n // TILE)), (TILE, TILE), p, x, y, n)
    s.launch(add_plus_one, blocks(o.size), THREADS, o, p, o.size)


SIZE = 256
N = 10


def expected_allocation_result() -> np.ndarray:
    """NumPy float32: the N calls' sum."""
    o = np.zeros((SIZE, SIZE), np.float32)
    for i in range(N):
        x = np.sin(random_values(i, 0, SIZE * SIZE).reshape(SIZE, SIZE))
        y = np.cos(random_values(i, 1, SIZE * SIZE).reshape(SIZE, SIZE))
        o += x @ y + np.float32(1.0)
    return o


def allocation_example(device: gg.Device) -> tuple[bool, str]:
    add_sin_cos.clear()
    add_sin_cos.stats = gg.CapturedStats()  # fresh counts each time the demo runs this
    z = device.zeros((SIZE, SIZE), np.float32)
    for seed in range(N):
        add_sin_cos(z, seed)  # the first call captures; the others replay with seed patched
    got, want = z.to_numpy(), expected_allocation_result()
    close = np.allclose(got, want, rtol=1e-4, atol=0)
    worst = float(np.max(np.abs(got - want) / np.abs(want)))
    held = device.graph_memory().used     # x, y and p of the last call: freed at the next launch
    add_sin_cos.clear()                   # or when the graph leaves the cache
    device.synchronize()
    device.trim_graph_memory()            # the pool keeps freed memory until trimmed, as CUDA's does
    left = device.graph_memory().used
    s = add_sin_cos.stats
    ok = (close and (s.captures, s.instantiations, s.replays, s.patches) == (1, 1, N - 1, N - 1)
          and held >= 3 * z.nbytes and left == 0)
    return ok, (f"{N} calls on {SIZE}x{SIZE}: largest relative error {worst:.1e} (rtol 1e-4); graph memory "
                f"used {held} bytes, {left} after clear() and trim; {s}")


EXAMPLES = {"increment": increment_example, "allocations": allocation_example}


def run(device: gg.Device) -> Result:
    """Both examples; each must match its expected values and do the expected captures and replays."""
    def body() -> tuple[bool, str]:
        outcomes = {name: example(device) for name, example in EXAMPLES.items()}
        return all(ok for ok, _ in outcomes.values()), "; ".join(f"{name}: {detail}"
                                                                for name, (_, detail) in outcomes.items())
    return timed("captured", body)


if __name__ == "__main__":
    failed = 0
    for name, example in EXAMPLES.items():
        ok, detail = example(gg.Device())
        failed += not ok
        print(f"{name:<12} {'validated' if ok else 'FAILED'}: {detail}")
    raise SystemExit(1 if failed else 0)

"""The explicit graph program of ROCm's "HIP graphs" page ("Explicit graph creation").

The page: https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/hipgraph.html

Two allocation nodes, a host node filling a host vector with 2.0, a copy to the device, kernelA
(doubles A), kernelB (sets B to 3), kernelC (A += B), a copy back and two free nodes. Every element of
the host vector must end as 2.0 * 2 + 3 = 7.0. (The page passes a dependency count of 1 for kernelC,
which drops its edge from kernelB; the comment beside it says kernelC waits for both, as here.)
"""

from __future__ import annotations

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

SOURCE = r"""
__global__ void kernelA(double* arrayA, size_t size){
    const size_t x = threadIdx.x + blockDim.x * blockIdx.x;
    if(x < size){arrayA[x] *= 2.0;}
}
__global__ void kernelB(int* arrayB, size_t size){
    const size_t x = threadIdx.x + blockDim.x * blockIdx.x;
    if(x < size){arrayB[x] = 3;}
}
__global__ void kernelC(double* arrayA, const int* arrayB, size_t size){
    const size_t x = threadIdx.x + blockDim.x * blockIdx.x;
    if(x < size){arrayA[x] += arrayB[x];}
}
"""


kernelA = gg.Kernel(SOURCE, "kernelA")
kernelB = gg.Kernel(SOURCE, "kernelB")
kernelC = gg.Kernel(SOURCE, "kernelC")

NUM_BLOCKS = 1024
THREADS_PER_BLOCK = 1024
ARRAY_SIZE = 1 << 20
INIT_VALUE = 2.0
EXPECTED = INIT_VALUE * 2.0 + 3


def set_vector(vector: np.ndarray, value: float) -> None:
    """The page's host function: fill the host vector."""
    vector[:] = value


def build(device: gg.Device, h_array: np.ndarray) -> gg.Graph:
    """Build the page's graph explicitly, node by node."""
    g = gg.Graph(device)
    alloc_a = g.add_alloc(ARRAY_SIZE, np.float64)
    alloc_b = g.add_alloc(ARRAY_SIZE, np.int32)
    host = g.add_host(set_vector, h_array, INIT_VALUE)
    to_device = g.add_memcpy(alloc_a.array, h_array, after=(alloc_a, host))
    node_a = g.add_kernel(kernelA, NUM_BLOCKS, THREADS_PER_BLOCK, alloc_a.array, ARRAY_SIZE, after=to_device)
    node_b = g.add_kernel(kernelB, NUM_BLOCKS, THREADS_PER_BLOCK, alloc_b.array, ARRAY_SIZE, after=alloc_b)
    node_c = g.add_kernel(kernelC, NUM_BLOCKS, THREADS_PER_BLOCK, alloc_a.array, alloc_b.array, ARRAY_SIZE,
                          after=(node_a, node_b))
    to_host = g.add_memcpy(h_array, alloc_a.array, after=node_c)
    g.add_free(alloc_a, after=to_host)
    g.add_free(alloc_b, after=node_c)
    return g


def run(device: gg.Device) -> Result:
    """Build, instantiate and launch the graph; check every element against the page's value."""
    def body() -> tuple[bool, str]:
        h_array = np.zeros(ARRAY_SIZE, np.float64)  # the page's std::vector<double>
        stream = device.stream()
        with build(device, h_array).instantiate() as exe:
            exe.launch(stream)
            stream.synchronize()
        wrong = np.count_nonzero(h_array != EXPECTED)
        return wrong == 0, f"expected {EXPECTED} everywhere, {wrong} of {ARRAY_SIZE} differ"
    return timed("explicit_graph", body)


if __name__ == "__main__":
    result = run(gg.Device())
    print(("Validation passed. " if result.validated else "Validation failed! ") + result.detail)
    raise SystemExit(0 if result.validated else 1)

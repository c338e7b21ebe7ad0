"""The stream-capture program of ROCm's "HIP graphs" page ("Capture graphs from a stream").

The page: https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/hipgraph.html

Inside a capture: two stream-ordered allocations, a host function filling a host vector with 2.0, a copy
to the device, kernelA (doubles A), kernelB (sets B to 3), kernelC (A += B), a copy back and two frees.
The captured graph is instantiated and launched once; every element must end as 2.0 * 2 + 3 = 7.0.
"""

from __future__ import annotations

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed
from gpugraph.examples.explicit_graph import (
    ARRAY_SIZE,
    EXPECTED,
    INIT_VALUE,
    NUM_BLOCKS,
    THREADS_PER_BLOCK,
    kernelA,
    kernelB,
    kernelC,
    set_vector,
)


def capture(stream: gg.Stream, h_array: np.ndarray) -> gg.Graph:
    """Record the page's stream code into a graph."""
    with stream.capture(mode="global") as cap:
        d_array_a = stream.alloc(ARRAY_SIZE, np.float64)
        d_array_b = stream.alloc(ARRAY_SIZE, np.int32)
        stream.host(set_vector, h_array, INIT_VALUE)
        stream.memcpy(d_array_a, h_array)
        stream.launch(kernelA, NUM_BLOCKS, THREADS_PER_BLOCK, d_array_a, ARRAY_SIZE)
        stream.launch(kernelB, NUM_BLOCKS, THREADS_PER_BLOCK, d_array_b, ARRAY_SIZE)
        stream.launch(kernelC, NUM_BLOCKS, THREADS_PER_BLOCK, d_array_a, d_array_b, ARRAY_SIZE)
        stream.memcpy(h_array, d_array_a)
        stream.free(d_array_a)
        stream.free(d_array_b)
    return cap.graph


def run(device: gg.Device) -> Result:
    """Capture, instantiate and launch; check every element against the page's value."""
    def body() -> tuple[bool, str]:
        h_array = np.zeros(ARRAY_SIZE, np.float64)  # the page's std::vector<double>
        stream = device.stream()
        graph = capture(stream, h_array)
        untouched = np.count_nonzero(h_array)  # capture records; nothing may have run yet
        with graph.instantiate() as exe:
            exe.launch(stream)
            stream.synchronize()
        wrong = np.count_nonzero(h_array != EXPECTED)
        ok = wrong == 0 and untouched == 0 and len(graph.nodes) == 10
        return ok, (f"{len(graph.nodes)} nodes captured, nothing ran during capture: {untouched == 0}; "
                    f"expected {EXPECTED} everywhere, {wrong} of {ARRAY_SIZE} differ")
    return timed("capture_graph", body)


if __name__ == "__main__":
    result = run(gg.Device())
    print(("Validation passed. " if result.validated else "Validation failed! ") + result.detail)
    raise SystemExit(0 if result.validated else 1)

"""The three programs of ROCm's "Asynchronous concurrent execution" page, plus the same work as a graph.

The page: https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/asynchronous.html

Each iteration copies two host vectors to the device, runs kernelA (A += 1) and kernelB (B += A + 3),
and copies both back; after 50 iterations A must be 50 and B must be 2 + 3·50 + 50·51/2 = 1427.

* sequential: one stream, each call waited for (the page's synchronous hipMemcpy version);
* streams: A's work on one stream, B's on another, the host waiting for stream A before kernelB;
* events: stream B waits for an event recorded after kernelA instead of the host waiting;
* graph: one iteration of the events version captured (fork to stream B and join back through
  events) and launched 50 times.

Where iterations could overlap (kernelA of iteration i+1 running
while kernelB of iteration i still reads A), each version here orders them explicitly: the streams
version waits for both streams at the end of an iteration, the events version makes each stream wait for
the other's end-of-iteration event (the page records eventA and eventB there for this purpose).
The page uses 2^25 elements; the CPU backend runs 2^18 to keep the demo quick.
"""

from __future__ import annotations

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

SOURCE = r"""
__global__ void kernelA(double* arrayA, size_t size){
    const size_t x = threadIdx.x + blockDim.x * blockIdx.x;
    if(x < size){arrayA[x] += 1.0;}
}
__global__ void kernelB(const double* arrayA, double* arrayB, size_t size){
    const size_t x = threadIdx.x + blockDim.x * blockIdx.x;
    if(x < size){arrayB[x] += arrayA[x] + 3.0;}
}
"""


kernelA = gg.Kernel(SOURCE, "kernelA")
kernelB = gg.Kernel(SOURCE, "kernelB")

ITERATIONS = 50
THREADS_PER_BLOCK = 1024
INIT_A, INIT_B = 0.0, 2.0
EXPECTED_A = float(ITERATIONS)
EXPECTED_B = INIT_B + 3.0 * ITERATIONS + EXPECTED_A * (EXPECTED_A + 1.0) / 2.0


class _Setup:
    """Host vectors (pinned, for asynchronous copies), device arrays and the launch shape."""

    def __init__(self, device: gg.Device) -> None:
        self.size = 1 << (18 if device.backend == "cpu" else 25)
        self.blocks = -(-self.size // THREADS_PER_BLOCK)
        self.vector_a = device.pinned(self.size, np.float64)
        self.vector_b = device.pinned(self.size, np.float64)
        self.vector_a[:] = INIT_A
        self.vector_b[:] = INIT_B
        self.d_a = device.empty(self.size, np.float64)
        self.d_b = device.empty(self.size, np.float64)

    def check(self) -> tuple[bool, str]:
        wrong_a = np.count_nonzero(self.vector_a != EXPECTED_A)
        wrong_b = np.count_nonzero(self.vector_b != EXPECTED_B)
        return (bool(wrong_a == 0 and wrong_b == 0),
                f"A={EXPECTED_A:g}, B={EXPECTED_B:g} expected; {wrong_a + wrong_b} of {2 * self.size} differ")


def sequential(device: gg.Device) -> tuple[bool, str]:
    """One stream; every operation is waited for before the next, like synchronous hipMemcpy."""
    s, stream = _Setup(device), device.stream()
    steps = [lambda: stream.memcpy(s.d_a, s.vector_a), lambda: stream.memcpy(s.d_b, s.vector_b),
             lambda: stream.launch(kernelA, s.blocks, THREADS_PER_BLOCK, s.d_a, s.size),
             lambda: stream.launch(kernelB, s.blocks, THREADS_PER_BLOCK, s.d_a, s.d_b, s.size),
             lambda: stream.memcpy(s.vector_a, s.d_a), lambda: stream.memcpy(s.vector_b, s.d_b)]
    for _ in range(ITERATIONS):
        for step in steps:
            step()
            stream.synchronize()
    return s.check()


def streams(device: gg.Device) -> tuple[bool, str]:
    """A's work on stream A, B's on stream B; the host waits for stream A before kernelB."""
    s, stream_a, stream_b = _Setup(device), device.stream(), device.stream()
    for _ in range(ITERATIONS):
        stream_a.memcpy(s.d_a, s.vector_a)
        stream_b.memcpy(s.d_b, s.vector_b)
        stream_a.launch(kernelA, s.blocks, THREADS_PER_BLOCK, s.d_a, s.size)
        stream_a.synchronize()  # kernelB reads A
        stream_b.launch(kernelB, s.blocks, THREADS_PER_BLOCK, s.d_a, s.d_b, s.size)
        stream_a.memcpy(s.vector_a, s.d_a)
        stream_b.memcpy(s.vector_b, s.d_b)
        stream_a.synchronize()
        stream_b.synchronize()
    return s.check()


def _events_iteration(s: _Setup, stream_a: gg.Stream, stream_b: gg.Stream) -> None:
    """One iteration of the events version, as stream code (run directly or captured)."""
    stream_a.memcpy(s.d_a, s.vector_a)
    stream_b.memcpy(s.d_b, s.vector_b)
    stream_a.launch(kernelA, s.blocks, THREADS_PER_BLOCK, s.d_a, s.size)
    stream_b.wait(stream_a.record())  # kernelB waits for kernelA, the host does not
    stream_b.launch(kernelB, s.blocks, THREADS_PER_BLOCK, s.d_a, s.d_b, s.size)
    stream_a.memcpy(s.vector_a, s.d_a)
    stream_b.memcpy(s.vector_b, s.d_b)
    end_a, end_b = stream_a.record(), stream_b.record()
    stream_a.wait(end_b)  # the next kernelA must not overwrite A while kernelB reads it
    stream_b.wait(end_a)


def events(device: gg.Device) -> tuple[bool, str]:
    """Stream B waits for an event recorded after kernelA; the host waits only at the end."""
    s, stream_a, stream_b = _Setup(device), device.stream(), device.stream()
    for _ in range(ITERATIONS):
        _events_iteration(s, stream_a, stream_b)
    stream_a.synchronize()
    stream_b.synchronize()
    return s.check()


def graph(device: gg.Device) -> tuple[bool, str]:
    """One iteration of the events version captured across two streams, launched 50 times."""
    s, stream_a, stream_b = _Setup(device), device.stream(), device.stream()
    with stream_a.capture() as cap:
        stream_b.wait(stream_a.record())  # fork: stream B joins the capture
        _events_iteration(s, stream_a, stream_b)  # ends with stream A waiting for stream B: the join
    with cap.graph.instantiate() as exe:
        for _ in range(ITERATIONS):
            exe.launch(stream_a)
        stream_a.synchronize()
    ok, detail = s.check()
    return ok, f"{len(cap.graph.nodes)} nodes; {detail}"


VARIANTS = {"sequential": sequential, "streams": streams, "events": events, "graph": graph}


def run(device: gg.Device) -> Result:
    """Run the four versions; all must reach the page's values."""
    def body() -> tuple[bool, str]:
        outcomes = {name: variant(device) for name, variant in VARIANTS.items()}
        failed = [f"{name}: {detail}" for name, (ok, detail) in outcomes.items() if not ok]
        if failed:
            return False, "; ".join(failed)
        return True, f"{', '.join(outcomes)} all give A={EXPECTED_A:g}, B={EXPECTED_B:g}"
    return timed("async_streams", body)


if __name__ == "__main__":
    for name, variant in VARIANTS.items():
        ok, detail = variant(gg.Device())
        print(f"{name:<10} {'completed successfully' if ok else 'FAILED'}: {detail}")

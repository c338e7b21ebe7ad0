"""The workload of NVIDIA's blog post "Constructing CUDA Graphs with Dynamic Parameters", four ways.

The post: https://developer.nvidia.com/blog/constructing-cuda-graphs-with-dynamic-parameters/

Per iteration a serial chain of 8 kernels ``out[i] = f * in[i]`` on 32 floats (1 block of 256 threads):
kernels 0, 2, 4 and 6 use the fixed factor 1.004, kernels 1, 3, 5 and 7 the dynamic factor
``1 + 0.001 * iteration``. Every iteration starts from the same input (the chain ping-pongs between two
buffers and never writes the input), so the values stay finite however many iterations run.

* no graph: 8 stream launches per iteration;
* recapture + update: the iteration is captured on a stream every time and the one executable graph
  is updated with it (``exe.update``; instantiated once) before each launch; the blog's
  "recapture-then-update";
* Param: captured once with four ``gg.Param`` factors; each iteration sets ``param.value`` and
  launches, and the launch patches just the four dynamic nodes: the blog's "combined" approach, with
  no node handles to keep;
* captured: a ``@gg.captured(dynamic=("factor",))`` function called once per iteration.

All four must end bit for bit equal, and equal to a NumPy float32 computation of the last iteration.
The blog runs 40,000 iterations; so does this module on GPU backends, and 2,000 on the CPU backend (each
CPU launch costs tens of microseconds): ``python -m gpugraph.examples.dynamic_parameters
[--iterations N]`` prints the time per iteration of each strategy and its speedup over no graph.
``run`` (used by ``python -m gpugraph demo``) runs 200 iterations and also checks every iteration's
output, not just the last.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

SOURCE = r"""
__global__ void scale(float* out, const float* in, float f, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){out[i] = f * in[i];}
}
"""


scale = gg.Kernel(SOURCE, "scale")

N = 32
BLOCKS, THREADS = 1, 256
KERNELS = 8
FIXED = 1.004
GPU_ITERATIONS = 40_000
CPU_ITERATIONS = 2_000
DEMO_ITERATIONS = 200


def dynamic_factor(iteration: int) -> float:
    """The blog's dynamic parameter: it differs at every iteration, so no cache of graphs can hold it."""
    return 1.0 + 0.001 * iteration


def default_iterations(device: gg.Device) -> int:
    """The blog's 40,000 iterations on a GPU; 2,000 on the CPU backend."""
    return CPU_ITERATIONS if device.backend == "cpu" else GPU_ITERATIONS


def reference(iteration: int) -> np.ndarray:
    """NumPy float32: the chain's output for one iteration."""
    values = initial_input()
    for k in range(KERNELS):
        factor = np.float32(FIXED if k % 2 == 0 else dynamic_factor(iteration))
        values = factor * values
    return values


def initial_input() -> np.ndarray:
    """The 32 input values every iteration starts from."""
    return (1.0 + np.arange(N, dtype=np.float32) / N).astype(np.float32)


class Buffers:
    """One strategy's device memory: the input and the two buffers the chain alternates between."""

    def __init__(self, device: gg.Device) -> None:
        self.input = device.asarray(initial_input())
        self.ping = device.zeros(N, np.float32)
        self.pong = device.zeros(N, np.float32)
        self.output = self.pong  # kernel 7 writes it


def enqueue_iteration(stream: gg.Stream, inp: gg.Array, ping: gg.Array, pong: gg.Array,
                      dynamic: float | gg.Param | list[gg.Param]) -> None:
    """Launch the 8 kernels of one iteration on ``stream``; ``dynamic`` is a float, a Param or 4 Params.

    Kernel 0 reads the input and writes ping, kernel 1 reads ping and writes pong, kernel 2 reads pong
    and writes ping, and so on: each kernel depends on the one before.
    """
    factors = dynamic if isinstance(dynamic, (list, tuple)) else [dynamic] * (KERNELS // 2)
    source = inp
    for k in range(KERNELS):
        target = ping if k % 2 == 0 else pong
        stream.launch(scale, BLOCKS, THREADS, target, source, FIXED if k % 2 == 0 else factors[k // 2], N)
        source = target


# The four strategies. Each runs `iterations` iterations on `stream` and waits for them; `after` (if
# given) is called after each iteration's work is enqueued, to let `run` copy every output back.

After = Callable[[int, Buffers], None] | None


def no_graph(stream: gg.Stream, buffers: Buffers, iterations: int, after: After = None) -> None:
    """8 stream launches per iteration."""
    for it in range(iterations):
        enqueue_iteration(stream, buffers.input, buffers.ping, buffers.pong, dynamic_factor(it))
        if after:
            after(it, buffers)
    stream.synchronize()


def recapture_update(stream: gg.Stream, buffers: Buffers, iterations: int, after: After = None) -> None:
    """Capture every iteration anew; instantiate once, then update the executable graph in place."""
    exe = None
    for it in range(iterations):
        with stream.capture() as cap:
            enqueue_iteration(stream, buffers.input, buffers.ping, buffers.pong, dynamic_factor(it))
        if exe is None:
            exe = cap.graph.instantiate()
        else:
            exe.update(cap.graph)  # same topology: new factors, no new instantiation
        exe.launch(stream)
        if after:
            after(it, buffers)
    stream.synchronize()
    if exe is not None:  # None when there were no iterations
        exe.close()


def param(stream: gg.Stream, buffers: Buffers, iterations: int, after: After = None) -> None:
    """Capture once with four Param factors; set them and launch."""
    factors = [gg.Param(dynamic_factor(0)) for _ in range(KERNELS // 2)]  # float32, from the kernel
    with stream.capture() as cap:
        enqueue_iteration(stream, buffers.input, buffers.ping, buffers.pong, factors)
    with cap.graph.instantiate() as exe:
        for it in range(iterations):
            value = dynamic_factor(it)
            for factor in factors:
                factor.value = value  # the next launch patches the node that takes this Param
            exe.launch(stream)
            if after:
                after(it, buffers)
        stream.synchronize()


def captured(stream: gg.Stream, buffers: Buffers, iterations: int, after: After = None) -> None:
    """A @gg.captured function: captured at the first call, replayed with the factor patched after."""
    @gg.captured(dynamic=("factor",))
    def iteration(inp: gg.Array, ping: gg.Array, pong: gg.Array, factor: float) -> None:
        # While captured, the current stream of the arrays' device is the capture's stream.
        enqueue_iteration(gg.current_stream(inp.device), inp, ping, pong, factor)

    with gg.use_stream(stream):  # the stream the calls (captures and replays) enqueue on
        for it in range(iterations):
            iteration(buffers.input, buffers.ping, buffers.pong, dynamic_factor(it))
            if after:
                after(it, buffers)
    stream.synchronize()
    stats = iteration.stats
    assert (stats.captures, stats.instantiations, stats.replays) == (1, 1, iterations - 1), stats
    iteration.clear()


STRATEGIES = {"no graph": no_graph, "recapture + update": recapture_update, "Param": param,
              "captured": captured}


def measure(device: gg.Device, iterations: int, history: bool = False) -> dict[str, tuple[float, np.ndarray]]:
    """Run each strategy: its seconds and its output (every iteration's if ``history``, else the last)."""
    results = {}
    for name, strategy in STRATEGIES.items():
        stream, buffers = device.stream(), Buffers(device)
        stream.launch(scale, BLOCKS, THREADS, buffers.ping, buffers.input, 1.0, N)  # load the kernel
        stream.synchronize()
        rows = device.pinned((iterations, N), np.float32) if history else None
        # `after` runs only inside this strategy's run below, so the stream and rows it uses are this one's.
        after = (lambda it, b: stream.memcpy(rows[it], b.output)) if rows is not None else None  # noqa: B023
        start = time.perf_counter()
        strategy(stream, buffers, iterations, after)
        seconds = time.perf_counter() - start
        results[name] = (seconds, rows.copy() if rows is not None else buffers.output.to_numpy())
    return results


def compare(results: dict[str, tuple[float, np.ndarray]], expected: np.ndarray) -> tuple[bool, str]:
    """Whether every strategy's output is bit for bit the first's, and the first's equals ``expected``."""
    first_name, (_, first) = next(iter(results.items()))
    problems = [f"{name} differs from {first_name} in {np.count_nonzero(out != first)} values"
                for name, (_, out) in results.items() if not np.array_equal(out, first)]
    if not np.array_equal(first, expected):
        problems.append(f"{first_name} differs from NumPy in {np.count_nonzero(first != expected)} values")
    return not problems, "; ".join(problems)


def report(results: dict[str, tuple[float, np.ndarray]], iterations: int) -> list[str]:
    """µs per iteration of each strategy and its speedup over no graph."""
    base = results["no graph"][0]
    return [f"{name:<20} {seconds / iterations * 1e6:9.2f} µs/iteration  {base / seconds:5.2f}x"
            for name, (seconds, _) in results.items()]


def run(device: gg.Device) -> Result:
    """200 iterations each way, every iteration's output copied back and compared."""
    def body() -> tuple[bool, str]:
        results = measure(device, DEMO_ITERATIONS, history=True)
        expected = np.stack([reference(it) for it in range(DEMO_ITERATIONS)])
        ok, problems = compare(results, expected)
        if not ok:
            return False, problems
        speed = ", ".join(f"{name} {s / DEMO_ITERATIONS * 1e6:.0f}" for name, (s, _) in results.items())
        return True, (f"{len(results)} strategies agree bit for bit with NumPy over {DEMO_ITERATIONS} "
                      f"iterations; µs/iteration: {speed}")
    return timed("dynamic_parameters", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpugraph.examples.dynamic_parameters",
                                     description="The dynamic-parameters blog's workload, four ways.")
    parser.add_argument("--iterations", type=int, default=None,
                        help=f"default: {GPU_ITERATIONS} on GPU backends, {CPU_ITERATIONS} on the CPU backend")
    args = parser.parse_args(argv)
    device = gg.Device()
    iterations = default_iterations(device) if args.iterations is None else args.iterations
    if iterations < 1:
        parser.error(f"--iterations: expected a positive int, got {iterations}")
    print(f"{device} ({device.name}): {KERNELS} kernels per iteration, {iterations} iterations")
    results = measure(device, iterations)
    ok, problems = compare(results, reference(iterations - 1))
    print("\n".join(report(results, iterations)))
    print("Validation passed: all four agree bit for bit with NumPy." if ok else f"Validation failed! {problems}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

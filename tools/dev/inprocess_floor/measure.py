"""gpugraph's CUDA host-side figures (graph launch, instantiate, explicit build, capture, set_params) against the
floor inside this Python process, in one run: the same driver calls looped and timed in C (driver_loops); the same
calls made one Python call at a time into C (the least any Python API adds); gpugraph; and the C++ program; then
where a graph launch's host time goes, how much of it the CPU's caches decide, and the machine's drift within one
process.

Usage (from the repository root, on a CUDA machine; build first, see setup.py):
    (cd tools/dev/inprocess_floor && CUDA_HOME=... python3 setup.py build_ext --inplace)
    PYTHONPATH=src taskset -c 3 python3 tools/dev/inprocess_floor/measure.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
from gpugraph.bench._thinnest import Calls  # (the in-process floor, built with gpugraph)

import gpugraph as gg
from gpugraph import _exec_state
from gpugraph.backends.cuda import _leaves
from gpugraph.bench._core import gc_held
from gpugraph.bench._gpu import TINY, _chain, _timed, floor
from gpugraph.examples import dynamic_parameters as example

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver_loops as loops  # (built in this folder)

median = statistics.median
perf_counter = time.perf_counter


def gpu_clocks() -> str:
    """The GPU's SM and memory clocks, performance state and active throttle reasons (nvidia-smi), or why not."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,pstate,clocks_throttle_reasons.active",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"nvidia-smi: {error}"


def main() -> None:
    device = gg.Device("cuda")
    kernel, stream = gg.Kernel(TINY, "tiny"), device.stream()
    x = device.zeros(32, np.float32)
    stream.launch(kernel, 1, 32, x, 32)
    stream.synchronize()
    function, raw_stream = int(kernel._functions[device].handle), int(stream._handle.handle)

    def capture() -> gg.Graph:
        with stream.capture() as cap:
            for _ in range(1000):
                stream.launch(kernel, 1, 32, x, 32)
        return cap.graph

    graph = capture()
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    raw_exe, raw_graph, node = int(exe._handle.handle), int(graph._handle.handle), graph.nodes[0]

    def timed_each(fn: Callable[[], object], n: int, sync: bool = True) -> float:
        out = []
        for _ in range(n):
            start = perf_counter()
            fn()
            out.append((perf_counter() - start) * 1e6)
            if sync:
                loops.sync(raw_stream)
        return median(out)

    def instantiate() -> float:
        start = perf_counter()
        made = graph.instantiate()
        seconds = perf_counter() - start
        made.close()
        return seconds / 1000 * 1e6

    def per_node(fn: Callable[[], object]) -> float:
        return _timed(fn) / 1000 * 1e6

    calls = Calls(function, x.ptr)

    def called_build() -> float:  # one Python call per node, each returning the new node
        calls.new_graph()
        add, last = calls.add, None
        start = perf_counter()
        for _ in range(1000):
            last = add(last)
        return (perf_counter() - start) / 1000 * 1e6

    def called_capture() -> float:  # begin, one Python call per launch, end
        launch = calls.launch
        start = perf_counter()
        calls.begin_capture(raw_stream)
        for _ in range(1000):
            launch(raw_stream)
        calls.end_capture(raw_stream)
        seconds = perf_counter() - start
        calls.destroy_captured()  # (untimed, as the C loop and the C++ program destroy theirs)
        return seconds / 1000 * 1e6

    def called_set_params() -> float:
        set_params, raw_node = calls.set_params, int(node._handle)
        start = perf_counter()
        for _ in range(200):
            set_params(raw_exe, raw_node)
        return (perf_counter() - start) / 200 * 1e6

    print("## Per figure: the C loop in this process; one Python call per operation into C making only the driver")
    print("## call (a node returned as a new object); gpugraph; the C++ program (µs; N=1000 for per-node figures)")
    floor_figures = floor(device)
    figures = [
        ("graph launch call, 1000-node chain", lambda: median(loops.graph_launch(raw_exe, raw_stream, 100)), None,
         lambda: timed_each(lambda: exe.launch(stream), 100), "graph_launch_call"),
        ("instantiate per node", lambda: median([loops.instantiate(raw_graph) / 1000 for _ in range(5)]), None,
         lambda: median([instantiate() for _ in range(5)]), "instantiate_per_node"),
        ("explicit build per node", lambda: median([loops.build(function, x.ptr, 1000) for _ in range(5)]),
         lambda: median([called_build() for _ in range(5)]),
         lambda: median([per_node(lambda: _chain(device, kernel, x, 1000, 1)) for _ in range(5)]), "build_per_node"),
        ("capture per node", lambda: median([loops.capture(function, x.ptr, raw_stream, 1000) for _ in range(5)]),
         lambda: median([called_capture() for _ in range(5)]),
         lambda: median([per_node(capture) for _ in range(5)]), "capture_per_node"),
        ("set_params", lambda: median(loops.set_params(raw_exe, int(node._handle), function, x.ptr, 200)),
         lambda: median([called_set_params() for _ in range(5)]),
         lambda: timed_each(lambda: exe.set_params(node, x, 32), 200, sync=False), "set_params"),
    ]
    print(f"{'figure':38s} {'C loop':>8s} {'Py call':>8s} {'gpugraph':>9s} {'C++':>8s}")
    for name, in_c, called, ours, key in figures:
        in_c(), ours()  # warm-up
        called_figure = f"{called():8.3f}" if called is not None else f"{'—':>8s}"
        print(f"{name:38s} {in_c():8.3f} {called_figure} {ours():9.3f} "
              f"{floor_figures[key] if floor_figures else float('nan'):8.3f}")
    calls.destroy_graph()

    print("\n## A graph launch's host time, layer by layer (1000-node chain, µs, medians of 200, interleaved)")
    # (A launch through the front end first: the first launch looks up the exec's event-record nodes, and the
    # compiled core takes launches once it has.)
    exe.launch(stream)
    stream.synchronize()
    if str(_exec_state.__file__).endswith(".py"):
        raise SystemExit("measure: the compiled core is not built: GraphExec.launch is the Python path's")
    raw_launch = _leaves.graph_launch

    def checked_raw_launch() -> None:
        code = raw_launch(raw_exe, raw_stream)
        if code:
            raise SystemExit(f"measure: cuGraphLaunch failed with CUresult {code}")

    layers: dict[str, Callable[[], object] | None] = {
        "one call timed in C": None,
        "thinnest call, GIL held": lambda: calls.graph_launch(raw_exe, raw_stream),
        "gpugraph's raw call (GIL released)": checked_raw_launch,
        "+ the core's attribute reads": lambda: loops.launch_after_reads(exe, stream, raw_exe, raw_stream, False),
        "+ the exec's lock": lambda: loops.launch_after_reads(exe, stream, raw_exe, raw_stream, True),
        "GraphExec.launch": lambda: exe.launch(stream)}
    samples: dict[str, list[float]] = {name: [] for name in layers}
    for round_ in range(220):  # the first 20 rounds warm up
        for name, fn in layers.items():
            if fn is None:
                value = loops.graph_launch_once(raw_exe, raw_stream)
            else:
                start = perf_counter()
                fn()
                value = (perf_counter() - start) * 1e6
            loops.sync(raw_stream)
            if round_ >= 20:
                samples[name].append(value)
    print(f"{'C loop (200 calls timed in C)':38s} {median(loops.graph_launch(raw_exe, raw_stream, 200)):8.3f}")
    for name, values in samples.items():
        print(f"{name:38s} {median(values):8.3f}")
    lock = exe._lock
    start = perf_counter()
    for _ in range(100_000):
        lock.acquire(False)
        lock.release()
    print(f"{'(an RLock acquire + release alone)':38s} {(perf_counter() - start) * 10:8.3f}")

    print("\n## The same launch, timed in C, after writing other memory (the CPU's caches; µs)")
    for size in (0, 16 << 10, 256 << 10, 2 << 20, 16 << 20):
        launch = median(loops.graph_launch(raw_exe, raw_stream, 100, size))
        print(f"{size >> 10:>8d} KiB written before each launch {launch:8.3f}")

    print("\n## Drift within one process (µs/iteration): the dynamic-parameter workload's Param path; a C loop of its")
    print("## driver calls on a chain of 8 tiny kernels (GPU-bound); the no-graph path (host-bound); the GPU's clocks")
    chain8 = _chain(device, kernel, x, 8, 1)
    exe8 = chain8.instantiate()
    dynamic_nodes = [int(n._handle) for n in chain8.nodes][1::2]

    def param_path(iterations: int, strategy: Callable[..., None] = example.param) -> float:
        buffers, own = example.Buffers(device), device.stream()
        own.launch(example.scale, 1, 256, buffers.ping, buffers.input, 1.0, 32)
        own.synchronize()
        with gc_held():
            start = perf_counter()
            strategy(own, buffers, iterations)
            return (perf_counter() - start) / iterations * 1e6

    def drift_row(label: str) -> None:
        ours = median([param_path(20_000) for _ in range(3)])
        in_c = median([loops.seed_like(int(exe8._handle.handle), raw_stream, dynamic_nodes, function, x.ptr, 20_000)
                       for _ in range(3)])
        host_bound = param_path(5_000, example.no_graph)
        print(f"{label:24s} Param {ours:6.2f}   C loop {in_c:6.2f}   no graph {host_bound:6.2f}   [{gpu_clocks()}]",
              flush=True)

    param_path(5000)
    drift_row("first")
    drift_row("again")
    print(f"{'(captured, 40,000 iterations)':38s} {param_path(40_000, example.captured):6.2f}")
    drift_row("after it")
    time.sleep(5)
    drift_row("5 s later")
    exe8.close()
    exe.close()


if __name__ == "__main__":
    main()

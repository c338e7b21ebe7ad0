"""Where gpugraph's own time goes on each CUDA hot path (set_params, a Param patch, capture, explicit build, graph
launch), in one process: the whole call; where a compiled lane of ``_fast`` makes it (explicit build), that
lane called directly (no front-end Python frame); the thinnest Python call into C making the same driver call, the
GIL held (gpugraph.bench._thinnest.Calls); the driver call timed in C. set_params, the graph launch and a captured
launch are the compiled core's own (``_exec_state``, ``_stream_state``): the whole call is the core's.
Interleaved rounds, medians, µs (per node for capture and build). The difference between the whole call and the
lane is the front end's Python frame; between the lane and the thinnest call, the lane's own bookkeeping.

Usage (from the repository root, on a CUDA machine, with the compiled path and driver_loops built; see
measure.py):
    PYTHONPATH=src taskset -c 3 python3 tools/dev/inprocess_floor/lanes.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
from gpugraph.bench._thinnest import Calls  # (the in-process floor, built with gpugraph)

import gpugraph as gg
from gpugraph import _exec_state
from gpugraph._graph_node import handle_of
from gpugraph._kernel import loaded_function
from gpugraph.backends.cuda import _compiled, _leaves
from gpugraph.bench._gpu import TINY

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver_loops as loops  # (built in this folder)

perf_counter = time.perf_counter


def interleaved(variants: dict[str, Callable[[], object]], rounds: int, per: int = 1,
                after: Callable[[], object] | None = None) -> None:
    """Print each variant's median µs (divided by ``per``) over ``rounds`` rounds that run every variant once
    (``after`` follows each, untimed), after 20 rounds of warm-up."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds + 20):
        for name, fn in variants.items():
            start = perf_counter()
            fn()
            value = (perf_counter() - start) * 1e6 / per
            if after is not None:
                after()
            if round_ >= 20:
                samples[name].append(value)
    for name, values in samples.items():
        print(f"  {name:46s} {statistics.median(values):8.3f}")


def main() -> None:
    device = gg.Device("cuda")
    kernel, stream = gg.Kernel(TINY, "tiny"), device.stream()
    x = device.zeros(32, np.float32)
    stream.launch(kernel, 1, 32, x, 32)
    stream.synchronize()
    function = loaded_function(kernel, device)
    raw_function, raw_stream = int(function.handle), int(stream._handle.handle)
    calls = Calls(raw_function, x.ptr)

    with stream.capture() as capture:
        for _ in range(1000):
            stream.launch(kernel, 1, 32, x, 32)
    graph = capture.graph
    exe = graph.instantiate()
    exe.launch(stream)  # (through the Python path: the lane takes launches once it has run once)
    stream.synchronize()
    node, raw_exe = graph.nodes[0], int(exe._handle.handle)
    raw_node, args = int(handle_of(node)), (x, 32)
    if str(_exec_state.__file__).endswith(".py") or _compiled.fast is None:
        raise SystemExit("lanes: the compiled core or the compiled path is not built")
    stream.synchronize()

    print("## set_params (node 0 of a 1000-node chain)")
    interleaved({"exe.set_params(node, x, 32)": lambda: exe.set_params(node, x, 32),
                 "thinnest Python call into C": lambda: calls.set_params(raw_exe, raw_node)}, 300)
    print(f"  {'the driver call timed in C':46s} "
          f"{statistics.median(loops.set_params(raw_exe, raw_node, raw_function, x.ptr, 200)):8.3f}")

    print("## Param set + patch (a one-node graph)")
    count = gg.Param(32)
    one = gg.Graph(device)
    one.add_kernel(kernel, 1, 32, x, count)
    exe1 = one.instantiate()
    uses, prepare = exe1._params, exe1._prepare_patch
    count.value = 31
    uses.patch(prepare)
    patch = uses._patchers[0]

    def set_and_patch() -> None:
        count.value = 31
        uses.patch(prepare)

    def mark_and_patch() -> None:
        uses.pending.add(count)
        uses.patch(prepare)

    def set_value() -> None:
        count.value = 31
    interleaved({"value set + ParamUses.patch": set_and_patch, "value set alone": set_value,
                 "ParamUses.patch of one pending Param": mark_and_patch, "the node's KernelPatch alone": patch,
                 "thinnest Python call into C": lambda: calls.set_params(raw_exe, raw_node)}, 300)

    print("## capture, per node (1000 launches; the compiled core's own)")

    def captured_whole() -> None:
        with stream.capture():
            for _ in range(1000):
                stream.launch(kernel, 1, 32, x, 32)

    def captured_thinnest() -> None:
        calls.begin_capture(raw_stream)
        for _ in range(1000):
            calls.launch(raw_stream)
        calls.end_capture(raw_stream)
        calls.destroy_captured()
    interleaved({"stream.launch in a capture": captured_whole, "thinnest Python calls into C": captured_thinnest},
                20, per=1000)

    print("## explicit build, per node (a 1000-node chain)")

    def built_whole() -> None:
        built, last = gg.Graph(device), ()
        for _ in range(1000):
            last = built.add_kernel(kernel, 1, 32, x, 32, after=last)

    def built_lane() -> None:
        built, last = gg.Graph(device), None
        builder = built._fast
        for _ in range(1000):
            last = builder.add_kernel(built, kernel, 1, 32, args, last)

    def built_thinnest() -> None:
        calls.new_graph()
        last = None
        for _ in range(1000):
            last = calls.add(last)
        calls.destroy_graph()
    interleaved({"graph.add_kernel": built_whole, "the lane (Builder.add_kernel)": built_lane,
                 "thinnest Python calls into C": built_thinnest}, 20, per=1000)

    print("## graph launch call, 1000-node chain (a sync after each)")
    interleaved({"GraphExec.launch": lambda: exe.launch(stream),
                 "gpugraph's raw call (GIL released)": lambda: _leaves.graph_launch(raw_exe, raw_stream),
                 "thinnest Python call into C (GIL held)": lambda: calls.graph_launch(raw_exe, raw_stream)},
                300, after=lambda: loops.sync(raw_stream))
    timed_in_c = []
    for _ in range(300):
        timed_in_c.append(loops.graph_launch_once(raw_exe, raw_stream))
        loops.sync(raw_stream)
    print(f"  {'the driver call timed in C':46s} {statistics.median(timed_in_c[20:]):8.3f}")
    exe1.close()
    exe.close()


if __name__ == "__main__":
    main()

"""gg.timeline on a fork/join graph of four branches: do the branches overlap in its rows, do its node durations agree
with CUDA event timings of the same kernel (within 10%), is its JSON a valid Chrome trace, and are the nodes of child
graphs and conditional bodies named? On CUDA (needs cupti-python) and on the CPU backend.

Uses gpugraph (``PYTHONPATH=src`` in a checkout). Run from the repository root:
``python tools/probes/gpu_probe_timeline.py [--launches N] [--out DIR]``. Each check prints one line ending in PASS or
FAIL, the last line ``RESULT: PASS`` or ``RESULT: FAIL``; the rows' table and the ids CUPTI gave each node are
printed for the record. The trace files (``timeline-cuda.json``, ``timeline-cpu.json``) go to ``--out`` (default:
the temporary directory): open them in https://ui.perfetto.dev to see the branches side by side. Its Chrome trace
checker, ``chrome_trace_problems``, is the one tests/test_timeline.py checks every backend's traces with.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import tempfile
import time

import numpy as np

import gpugraph as gg

SOURCE = r"""
extern "C" __global__ void spin(long long cycles, int* out){
    const long long start = clock64();
    while(clock64() - start < cycles){}
    if(threadIdx.x == 0){out[blockIdx.x] = 1;}
}
extern "C" __global__ void tag(int* out, int value){
    if(threadIdx.x == 0){out[blockIdx.x] = value;}
}
"""
SPIN_MS = 1.0


def _spin_cpu(launch, cycles, out):
    time.sleep(SPIN_MS / 1e3)  # (the CPU backend's spin: a millisecond, its threads free to overlap)


def _tag_cpu(launch, out, value):
    out[: launch.grid[0]] = value


SPIN = gg.Kernel(SOURCE, "spin", cpu=_spin_cpu)
TAG = gg.Kernel(SOURCE, "tag", cpu=_tag_cpu)
FAILED: list[str] = []


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{what:<64} {'PASS' if ok else 'FAIL'}{'  ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(what)


def cycles_for(dev: gg.Device) -> int:
    """Clock cycles in SPIN_MS at the device's clock (kHz: cycles per millisecond)."""
    return int(dev.properties["clockRate"] * SPIN_MS) or 1


def fork_join(dev: gg.Device, out: gg.Array) -> tuple[gg.Graph, list[gg.Node]]:
    graph = gg.Graph(dev)
    root = graph.add_memset(out, 0)
    branches = [graph.add_kernel(SPIN, 1, 32, cycles_for(dev), out, after=root) for _ in range(4)]
    graph.add_kernel(TAG, 1, 32, out, 7, after=branches)
    return graph, branches


def overlap(rows: list[gg.TimelineRow]) -> float:
    """How long (us) all of ``rows`` run at once (negative: they do not)."""
    return min(r.end_us for r in rows) - max(r.start_us for r in rows)


def event_ms(dev: gg.Device, stream: gg.Stream, out: gg.Array, repeats: int = 21) -> float:
    """The median time of the spin kernel launched alone on ``stream``, timed by events around it."""
    begin, end = dev.event(timing=True), dev.event(timing=True)
    times = []
    for _ in range(repeats):
        stream.record(begin)
        stream.launch(SPIN, 1, 32, cycles_for(dev), out)
        stream.record(end)
        stream.synchronize()
        times.append(begin.elapsed_ms(end))
    return statistics.median(times)


# Chrome's Trace Event Format (the JSON Object Format that Perfetto and chrome://tracing load): the metadata events and
# the argument each needs, of its type.
METADATA = {"process_name": ("name", str), "thread_name": ("name", str), "process_labels": ("labels", str),
            "process_sort_index": ("sort_index", int), "thread_sort_index": ("sort_index", int)}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def chrome_trace_problems(trace: object) -> list[str]:
    """What makes ``trace`` other than a Chrome Trace Event Format document as gg.timeline writes it (the JSON Object
    Format): an object whose ``traceEvents`` is a list (``displayTimeUnit``, if given, "ms" or "ns"); each event an
    object with a string ``name``, ``ph`` "X" (a complete event) or "M" (metadata: the phases a timeline writes),
    integer ``pid`` and ``tid`` and, if given, an object ``args``; a complete event's ``ts`` and ``dur`` finite numbers
    of microseconds, ``dur`` >= 0, its ``cat`` a string if given; a metadata event one of METADATA's, with its argument
    of its type (``args.name`` a string for process_name and thread_name); a thread_name for each thread with complete
    events, and no two complete events of one thread overlapping (Perfetto nests a thread's slices)."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems = []
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {trace['displayTimeUnit']!r}: expected 'ms' or 'ns'")
    named, spans = set(), {}
    for i, event in enumerate(trace["traceEvents"]):
        if not (isinstance(event, dict) and isinstance(event.get("name"), str) and event.get("ph") in ("X", "M")
                and type(event.get("pid")) is int and type(event.get("tid")) is int
                and isinstance(event.get("args", {}), dict)):
            problems.append(f"event {i}: name (str), ph (X or M), pid and tid (int) or args (object) missing or of "
                            f"the wrong type: {event}")
            continue
        key = (event["pid"], event["tid"])
        if event["ph"] == "X":
            ts, dur = event.get("ts"), event.get("dur")
            if not (_number(ts) and _number(dur) and dur >= 0 and isinstance(event.get("cat", ""), str)):
                problems.append(f"event {i}: complete event needs numbers ts, dur >= 0 (us), a string cat: {event}")
                continue
            spans.setdefault(key, []).append((ts, ts + dur))
            continue
        wanted = METADATA.get(event["name"])
        value = event.get("args", {}).get(wanted[0]) if wanted is not None else None
        if wanted is None or not (isinstance(value, wanted[1]) and not isinstance(value, bool)):
            problems.append(f"event {i}: not a metadata event of the format (one of {sorted(METADATA)}, with its "
                            f"argument): {event}")
        elif event["name"] == "thread_name":
            named.add(key)
    for key, intervals in spans.items():
        if key not in named:
            problems.append(f"thread {key} has complete events but no thread_name")
        intervals.sort()
        if any(b[0] < a[1] for a, b in itertools.pairwise(intervals)):
            problems.append(f"thread {key} has overlapping complete events")
    return problems


def probe_fork_join(dev: gg.Device, launches: int, out_dir: str) -> None:
    stream = dev.stream()
    out = dev.zeros(64, np.int32)
    graph, branches = fork_join(dev, out)
    with graph.instantiate() as exe:
        exe.launch(stream)  # (a first launch outside the timeline: its one-time costs are not timed)
        stream.synchronize()
        with gg.timeline(dev) as tl:
            for _ in range(launches):
                exe.launch(stream)
        stream.synchronize()
        rows = tl.rows()
        print(tl.table())
        named = [r for r in rows if r.node is not None]
        check(f"{dev.backend}: every node of every launch has a row", len(named) == 6 * launches
              and {r.launch for r in rows} == set(range(1, launches + 1)), f"{len(named)} of {6 * launches}")
        for launch in range(1, launches + 1):
            spins = [r for r in rows if r.launch == launch and r.node in branches]
            together = overlap(spins) if len(spins) == 4 else -1.0
            check(f"{dev.backend}: launch {launch}: the 4 branches overlap", together > 0,
                  f"all four at once for {together:.1f} us, lanes {sorted({r.lane for r in spins})}")
        alone = event_ms(dev, stream, out) * 1e3
        for branch in branches:
            mine = statistics.median(r.duration_us for r in rows if r.node is branch)
            ratio = mine / alone
            check(f"{dev.backend}: {branch!r}: timeline vs events (10%)", abs(ratio - 1) <= 0.10,
                  f"median {mine:.1f} us vs events {alone:.1f} us: ratio {ratio:.3f}")
    path = os.path.join(out_dir, f"timeline-{dev.backend}.json")
    tl.write_trace(path)
    with open(path, encoding="utf-8") as file:
        trace = json.load(file)
    problems = chrome_trace_problems(trace)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    check(f"{dev.backend}: the trace is a valid Chrome trace", not problems and len(spans) == len(rows),
          f"{path}: {len(spans)} complete events on {len({e['tid'] for e in spans})} threads"
          + (f"; {problems[:3]}" if problems else ""))


def probe_nested(dev: gg.Device) -> None:
    """Kernels tagged by their grid size in child graphs (one inside another), a conditional node's two bodies and
    the top graph, with a node removed from each: each row must name the node of its grid size."""
    out = dev.zeros(1024, np.int32)

    def tagged(graph: gg.Graph, grid: int, after: object = ()) -> gg.Node:
        return graph.add_kernel(TAG, grid, 32, out, grid, after=after)

    deepest = gg.Graph(dev)
    tagged(deepest, 111)
    first = gg.Graph(dev)
    a = tagged(first, 11)
    first.remove_node(tagged(first, 99))
    first.add_child(deepest, after=a)
    tagged(first, 12)
    second = gg.Graph(dev)
    tagged(second, 21)
    graph = gg.Graph(dev)
    c1 = graph.add_child(first)
    branch = graph.add_if(graph.condition(1), has_else=True, after=c1)
    tagged(branch.bodies[0], 41)
    tagged(branch.bodies[1], 51)
    other = graph.add_if(graph.condition(0), has_else=True, after=branch)
    tagged(other.bodies[0], 61)
    tagged(other.bodies[1], 71)
    c2 = graph.add_child(second, after=other)
    tagged(graph, 1, after=c2)
    graph.remove_node(tagged(graph, 98))
    stream = dev.stream()
    with graph.instantiate() as exe, gg.timeline(dev) as tl:
        exe.launch(stream)
    stream.synchronize()
    for row in tl.rows():
        node = row.node
        grid = node.params.grid[0] if node is not None and node.kind is gg.NodeKind.KERNEL else None
        print(f"  {row.kind} {row.name} lane {row.lane} launch {row.launch} -> {node!r} grid {grid}")
    kernels = [r for r in tl.rows() if r.kind == "kernel"]
    wrong = [r for r in kernels if r.node is None or r.node.kind is not gg.NodeKind.KERNEL]
    ran = sorted(r.node.params.grid[0] for r in kernels if r not in wrong)
    expected = [1, 11, 12, 21, 41, 71, 111]
    check(f"{dev.backend}: nodes in child graphs and bodies are named", not wrong and ran == expected,
          f"grids named {ran} (expected {expected}), {len(wrong)} rows without their node")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--out", default=tempfile.gettempdir())
    args = parser.parse_args()
    backends = [name for name in ("cuda", "cpu") if name in gg.available_backends()]
    for name in backends:
        dev = gg.Device(name)
        print(f"== {dev} ({dev.name})", flush=True)
        if name == "cuda" and importlib.util.find_spec("cupti") is None:
            check("cuda: cupti-python is installed", False, "pip install cupti-python")
            continue
        probe_fork_join(dev, args.launches, args.out)
        probe_nested(dev)
    if "cuda" not in backends:
        print("(no CUDA device here: the CPU backend only)")
    print(f"RESULT: {'FAIL: ' + '; '.join(FAILED) if FAILED else 'PASS'}")


if __name__ == "__main__":
    main()

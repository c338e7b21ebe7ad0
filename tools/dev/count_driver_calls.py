"""Count the CUDA driver calls gpugraph makes to instantiate a graph and to update an executable graph
(whole-graph update from a graph of the same topology), for graphs of N nodes, so one sees whether the
count grows with N.

Every callable ``cu*`` attribute of ``cuda.bindings.driver`` is replaced by a counting wrapper before the
CUDA backend is loaded (the backend's driver symbol table, backends/cuda/_symbols.py, reads each function
from that module at each use; the launch, kernel-node and memset paths keep theirs from import time).
Calls are counted only inside ``counting()``; garbage collection is off there, so only the measured
call's own work counts. Graphs are built and warmed up (kernel compiled, context current, a first graph
instantiated and updated) outside the counted region; each counted instantiate is the first of a freshly
built graph, and the counted updates are the first update of a fresh executable graph and the one after
it (the steady state of rebuild-then-update).

Graphs: "explicit", built with Graph.add_kernel/add_memset: a chain of kernel nodes where every tenth
node is a memset root joined into the next kernel (about 1.1 N edges); "capture", N kernel launches
captured on a stream; "children + Param", a kernel taking a Param, then N - 1 child-graph nodes, each
embedding a kernel and a child graph of its own (three levels).

Usage (on a CUDA machine, from the repository root):
    PYTHONPATH=src python3 tools/dev/count_driver_calls.py [--sizes 10 100 1000] [--top 6] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import gpugraph as gg

SOURCE = r"""
__global__ void scale(float* x, float f, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] *= f;}
}
"""
_counts: Counter[str] | None = None  # the calls of the current counting() block; None outside one


def install() -> int:
    """Wrap every callable ``cu*`` function of cuda.bindings.driver; return how many were wrapped."""
    from cuda.bindings import driver as cu
    if any(name.startswith("gpugraph.backends.cuda._") for name in sys.modules):
        raise RuntimeError("the CUDA backend is loaded already: it would keep unwrapped functions")

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _counts is not None:
                _counts[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    names = [n for n in dir(cu) if n.startswith("cu")]
    functions = {n: getattr(cu, n) for n in names}
    functions = {n: f for n, f in functions.items() if callable(f) and not isinstance(f, type)}  # not cuuint64_t
    for name, fn in functions.items():
        setattr(cu, name, counted(name, fn))
    return len(functions)


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    """Count the driver calls made inside the block, by function name, into the Counter it yields."""
    global _counts
    gc.collect()  # no finalizer of earlier garbage (cuGraphDestroy, ...) runs inside the block
    gc.disable()
    _counts = Counter()
    try:
        yield _counts
    finally:
        _counts = None
        gc.enable()


def explicit(dev: gg.Device, kernel: gg.Kernel, x: gg.Array, y: gg.Array, n: int, f: float) -> gg.Graph:
    """``n`` nodes: a chain of kernels on ``x``; every tenth node is a memset of ``y`` joined into the next."""
    g = gg.Graph(dev)
    last: Any = None
    side: Any = None
    for i in range(n):
        if i % 10 == 9:
            side = g.add_memset(y, f)
        else:
            last = g.add_kernel(kernel, 1, 32, x, f, 32, after=[d for d in (last, side) if d is not None])
            side = None
    return g


def with_children(dev: gg.Device, kernel: gg.Kernel, x: gg.Array, factor: gg.Param, n: int, f: float) -> gg.Graph:
    """``n`` nodes: a kernel taking the Param ``factor``, then a chain of child-graph nodes, each embedding a
    graph of one kernel and one child graph of one kernel (three levels)."""
    innermost = gg.Graph(dev)
    innermost.add_kernel(kernel, 1, 32, x, f, 32)
    inner = gg.Graph(dev)
    last = inner.add_kernel(kernel, 1, 32, x, f, 32)
    inner.add_child(innermost, after=last)
    g = gg.Graph(dev)
    last = g.add_kernel(kernel, 1, 32, x, factor, 32)
    for _ in range(n - 1):
        last = g.add_child(inner, after=last)
    return g


def captured(stream: gg.Stream, kernel: gg.Kernel, x: gg.Array, n: int, f: float) -> gg.Graph:
    """``n`` kernel launches captured on ``stream``."""
    with stream.capture() as cap:
        for _ in range(n):
            stream.launch(kernel, 1, 32, x, f, 32)
    assert cap.graph is not None
    return cap.graph


def measure(build: Callable[[int, float], gg.Graph], n: int) -> dict[str, Counter[str]]:
    """The driver calls of instantiate, of a fresh executable graph's first update, and of the next one."""
    a, b, c = build(n, 2.0), build(n, 3.0), build(n, 4.0)  # same topology, other values
    with counting() as inst:
        exe = a.instantiate()
    with counting() as first:
        exe.update(b)
    with counting() as again:
        exe.update(c)
    exe.close()
    return {"instantiate": inst, "update": first, "update again": again}


def breakdown(calls: Counter[str], top: int) -> str:
    shown = ", ".join(f"{name} {k}" for name, k in calls.most_common(top))
    rest = len(calls) - top
    return shown + (f", +{rest} more functions" if rest > 0 else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], metavar="N",
                        help="node counts (default: 10 100 1000)")
    parser.add_argument("--top", type=int, default=6, help="functions shown per row (default: 6)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures to PATH")
    parser.add_argument("--device", default="cuda", help="a CUDA device spec (default: cuda)")
    args = parser.parse_args()
    if min(args.sizes) < 1:
        parser.error("--sizes: node counts must be at least 1")
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json: folder {args.json.parent} does not exist")
    try:
        wrapped = install()
    except ImportError as exc:
        sys.exit(f"count_driver_calls: cuda-bindings is not importable ({exc}); this tool needs the CUDA backend")
    dev = gg.Device(args.device)
    if dev.backend != "cuda":
        sys.exit(f"count_driver_calls: {dev} is not a CUDA device")
    from cuda.bindings import driver as cu
    kernel = gg.Kernel(SOURCE, "scale")
    stream = dev.stream()
    x, y = dev.zeros(32, np.float32), dev.zeros(32, np.float32)
    factor = gg.Param(np.float32(1.0))
    builds: dict[str, Callable[[int, float], gg.Graph]] = {
        "explicit": lambda n, f: explicit(dev, kernel, x, y, n, f),
        "capture": lambda n, f: captured(stream, kernel, x, n, f),
        "children + Param": lambda n, f: with_children(dev, kernel, x, factor, n, f),
    }
    for build in builds.values():  # warm-up: compile and load the kernel, make the context current
        measure(build, 10)
        warm = build(10, 1.0).instantiate()
        warm.launch(stream)
        warm.close()
    stream.synchronize()

    records = []
    for kind, build in builds.items():
        for n in args.sizes:
            for operation, calls in measure(build, n).items():
                records.append({"graph": kind, "operation": operation, "nodes": n,
                                "calls": sum(calls.values()), "by_function": dict(calls.most_common())})
    print(f"# CUDA driver calls per gpugraph operation ({dev}, {dev.name}; {wrapped} driver functions wrapped; "
          f"driver {cu.cuDriverGetVersion()[1]})\n")
    print("| graph | operation | N | driver calls | by function |\n|---|---|---:|---:|---|")
    for r in records:
        print(f"| {r['graph']} | {r['operation']} | {r['nodes']} | {r['calls']} "
              f"| {breakdown(Counter(r['by_function']), args.top)} |")
    print()
    for kind in builds:
        for operation in ("instantiate", "update", "update again"):
            counts = [r["calls"] for r in records if r["graph"] == kind and r["operation"] == operation]
            trend = f"constant ({counts[0]})" if len(set(counts)) == 1 else "GROWS with N"
            print(f"{kind} {operation}: {trend}: " + ", ".join(f"N={n}: {k}" for n, k in zip(args.sizes, counts)))
    if args.json is not None:
        args.json.write_text(json.dumps({"device": str(dev), "device_name": dev.name, "results": records},
                                        indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

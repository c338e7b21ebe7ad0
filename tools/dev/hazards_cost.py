"""What ``Graph.hazards()`` (the check for missing edges) costs on graphs of N = 100, 1,000, 10,000 and 30,000 nodes:

* chain: N kernel nodes in a line, each reading and writing the same Array (every access overlaps every other, all
  ordered);
* wide fork/join: a memset of a whole Array, then N - 3 branches each setting its own row of it, an empty node joining
  them, and a copy of the whole Array (one access overlaps all the others);
* random DAG: kernel nodes each after 1 to 3 random nodes among the 50 made before it, each writing an Array of its
  own and reading those of its dependencies (correct by construction: no hazard);
* random DAG with hazards: the same, each node also reading the Array of one random node among the 50 before it that
  it does not wait for (a hazard where no path orders them);
* two unordered chains (only where ``--shapes`` names it): two lines of N / 2 kernel nodes each, on one Array, with
  no edge between them: (N / 2)^2 hazards.

Each row: the graph's edges and accesses (the byte ranges its nodes touch, as the check counts them), the median of
the check's time over ``--repeats`` runs (the graph built once), that time per edge and access, and the hazards found.
Each graph is built and timed in an interpreter of its own (a fresh heap for each figure). ``--gc-off``: each run
with Python's garbage collector off (collected before): the check's own work, without the collector's passes over
the heap, which grow with everything the interpreter holds.

``--note-cost``: instead, what noting where each node was added costs: ``add_kernel``'s time per node (a graph of
1,000 independent kernel nodes built 50 times, the median) with ``$GPUGRAPH_CHECK_HAZARDS`` unset and
with it 1. gpugraph reads the variable when imported, so each setting is timed in a child interpreter of its own;
the two alternate, five children each, and each figure is the median of its five.

Usage: python tools/dev/hazards_cost.py [--backend cpu] [--repeats 5] [--sizes 100 1000 10000 30000]
       [--shapes NAME ...] [--gc-off] [--note-cost]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time

import gpugraph as gg
from gpugraph._hazards import _accesses

SOURCE = r"""
__global__ void twice(float* x, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] *= 2.0f;}
}
__global__ void sum3(float* out, const float* a, const float* b, const float* c, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){out[i] = a[i] + b[i] + c[i];}
}
"""
TWICE = gg.Kernel(SOURCE, "twice")
SUM3 = gg.Kernel(SOURCE, "sum3")
WIDTH = 16  # elements of each Array (or row)


def chain(device: gg.Device, n: int) -> gg.Graph:
    graph, x = gg.Graph(device), device.zeros(WIDTH)
    node = graph.add_kernel(TWICE, 1, WIDTH, x, WIDTH)
    for _ in range(n - 1):
        node = graph.add_kernel(TWICE, 1, WIDTH, x, WIDTH, after=node)
    return graph


def fork_join(device: gg.Device, n: int) -> gg.Graph:
    graph, rows = gg.Graph(device), n - 3
    x, y = device.zeros((rows, WIDTH)), device.zeros((rows, WIDTH))
    root = graph.add_memset(x, 0.0)
    branches = [graph.add_memset(x, 1.0, shape=(1, WIDTH), origin=(row, 0), after=root) for row in range(rows)]
    join = graph.add_empty(after=branches)
    graph.add_memcpy(y, x, after=join)
    return graph


def random_dag(device: gg.Device, n: int, hazards: bool, seed: int = 0) -> gg.Graph:
    rng = random.Random(seed)
    graph = gg.Graph(device)
    arrays = [device.zeros(WIDTH) for _ in range(n)]
    nodes: list[gg.Node] = []
    for i in range(n):
        window = range(max(0, i - 50), i)
        deps = rng.sample(window, min(len(window), rng.randint(1, 3)))
        reads = [arrays[d] for d in deps] + [arrays[i]] * (3 - len(deps))
        if hazards and len(window) > len(deps):
            reads[-1] = arrays[rng.choice([j for j in window if j not in deps])]
        nodes.append(graph.add_kernel(SUM3, 1, WIDTH, arrays[i], *reads, WIDTH, after=[nodes[d] for d in deps]))
    return graph


def two_chains(device: gg.Device, n: int) -> gg.Graph:
    graph, x = gg.Graph(device), device.zeros(WIDTH)
    for _ in range(2):
        node = graph.add_kernel(TWICE, 1, WIDTH, x, WIDTH)
        for _ in range(n // 2 - 1):
            node = graph.add_kernel(TWICE, 1, WIDTH, x, WIDTH, after=node)
    return graph


SHAPES = {"chain": chain, "wide fork/join": fork_join,
          "random DAG": lambda d, n: random_dag(d, n, False),
          "random DAG with hazards": lambda d, n: random_dag(d, n, True),
          "two unordered chains": two_chains}
DEFAULT_SHAPES = ["chain", "wide fork/join", "random DAG", "random DAG with hazards"]


def accesses(graph: gg.Graph) -> int:
    """The byte ranges the graph's nodes touch, as the check counts them."""
    signatures: dict = {}
    return sum(len(_accesses(node.params, signatures)) for node in graph.nodes)


def measure(device: gg.Device, name: str, n: int, repeats: int, gc_off: bool) -> dict[str, float]:
    """Build the graph ``name`` of ``n`` nodes; its size, the median of the check's time over ``repeats`` runs (ms;
    ``gc_off``: each with the garbage collector off) and the hazards found."""
    graph = SHAPES[name](device, n)
    times, found = [], 0
    for _ in range(repeats):
        if gc_off:
            gc.collect()
            gc.disable()
        start = time.perf_counter()
        found = len(graph.hazards())
        times.append(time.perf_counter() - start)
        gc.enable()
    return {"nodes": len(graph), "edges": len(graph.edges), "accesses": accesses(graph),
            "ms": 1e3 * statistics.median(times), "found": found}


def cost_table(options: argparse.Namespace) -> None:
    """Print the check's cost for each shape and size, each measured in a child interpreter."""
    print("| graph | N | edges | accesses | edges + accesses | hazards() median (ms) | µs per edge + access | "
          "hazards found |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in options.shapes:
        for n in options.sizes:
            out = subprocess.run([sys.executable, __file__, "--backend", options.backend, "--repeats",
                                  str(options.repeats), *["--gc-off"] * options.gc_off, "--child-shape", name, str(n)],
                                 check=True, capture_output=True, text=True)
            row = json.loads(out.stdout)
            size = row["edges"] + row["accesses"]
            print(f"| {name} | {row['nodes']:,} | {row['edges']:,} | {row['accesses']:,} | {size:,} | "
                  f"{row['ms']:.1f} | {1e3 * row['ms'] / size:.1f} | {row['found']:,} |", flush=True)


NOTE_NODES = 1000  # kernel nodes of each graph --note-cost builds
NOTE_CHILDREN = 5  # child interpreters per setting of the variable
NOTE_BUILDS = 50  # graphs each child builds


def add_kernel_us(device: gg.Device) -> float:
    """The median over NOTE_BUILDS builds of ``add_kernel``'s time per node, in µs (NOTE_NODES independent nodes)."""
    x = device.zeros(WIDTH)
    times = []
    for _ in range(NOTE_BUILDS):
        graph = gg.Graph(device)
        start = time.perf_counter()
        for _ in range(NOTE_NODES):
            graph.add_kernel(TWICE, 1, WIDTH, x, WIDTH)
        times.append((time.perf_counter() - start) / NOTE_NODES)
        del graph
    return 1e6 * statistics.median(times)


def note_cost(backend: str) -> None:
    """Print add_kernel's time per node with $GPUGRAPH_CHECK_HAZARDS unset and 1, each timed in child interpreters."""
    figures: dict[str, list[float]] = {"unset": [], "1": []}
    for _ in range(NOTE_CHILDREN):
        for setting in figures:
            env = {k: v for k, v in os.environ.items() if k != "GPUGRAPH_CHECK_HAZARDS"}
            if setting != "unset":
                env["GPUGRAPH_CHECK_HAZARDS"] = setting
            out = subprocess.run([sys.executable, __file__, "--backend", backend, "--child-add-kernel"], env=env,
                                 check=True, capture_output=True, text=True)
            figures[setting].append(float(out.stdout))
    print("| $GPUGRAPH_CHECK_HAZARDS | add_kernel per node, median (µs) | children's medians (µs) |\n|---|---:|---|")
    for setting, values in figures.items():
        print(f"| {setting} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000, 30000])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=DEFAULT_SHAPES)
    parser.add_argument("--gc-off", action="store_true", help="time each run with the garbage collector off")
    parser.add_argument("--note-cost", action="store_true",
                        help="time add_kernel per node with $GPUGRAPH_CHECK_HAZARDS unset and 1 instead")
    parser.add_argument("--child-add-kernel", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-shape", nargs=2, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.note_cost:
        note_cost(options.backend)
    elif options.child_add_kernel:
        print(f"{add_kernel_us(gg.Device(options.backend)):.3f}")
    elif options.child_shape:
        name, n = options.child_shape
        print(json.dumps(measure(gg.Device(options.backend), name, int(n), options.repeats, options.gc_off)))
    else:
        cost_table(options)


if __name__ == "__main__":
    main()

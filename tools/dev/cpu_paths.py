"""The CPU backend's front-end paths, per node, in this checkout compiled and plain and in another checkout, in one
run: explicit build, capture and graph launch of a chain of tiny kernels.

``python tools/dev/cpu_paths.py --against DIR [--nodes N] [--rounds N] [--repeats N]`` (1,000 nodes, nine rounds and
five repeats unless given): ``DIR`` is another checkout's ``src`` (a ``git worktree`` of the commit to compare with).
Each round runs one process per variant, in an order rotating each round: this checkout's ``src`` with
``GPUGRAPH_COMPILED=1`` (its core modules as built; the first line says which run compiled), the same with
``GPUGRAPH_COMPILED=0``, and ``DIR``. Each process builds, captures and launches (a second launch of the captured
graph) the chain ``--repeats`` times after one untimed pass and reports the median of each path in microseconds per
node; the table gives each variant's median over the rounds and its ratio to ``DIR``'s, round by round (so drift of
the machine hits each alike). Each path's work is checked: every launch adds 1 per kernel. On a shared machine the
ratios move by a tenth from one call to the next: quote several calls.

Only gpugraph's public API is used, so any checkout with ``Graph.add_kernel``, ``Stream.capture`` and
``GraphExec.launch`` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

TINY = 'extern "C" __global__ void tiny(float* x, int n){ int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'
PATHS = ("build", "capture", "launch")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def child(nodes: int, repeats: int) -> None:
    """Time the paths here (in the process the parent started) and print their medians as JSON."""
    import importlib
    import importlib.util
    import time

    import numpy as np

    import gpugraph as gg

    device, kernel = gg.Device("cpu"), gg.Kernel(TINY, "tiny")
    stream, x = device.stream(), device.zeros(32, np.float32)
    samples: dict[str, list[float]] = {path: [] for path in PATHS}
    launched = 0
    for repeat in range(repeats + 1):  # (the first untimed)
        start = time.perf_counter()
        graph, last = gg.Graph(device), None
        for _ in range(nodes):
            last = graph.add_kernel(kernel, 1, 32, x, 32, after=() if last is None else last)
        built = time.perf_counter() - start
        start = time.perf_counter()
        with stream.capture() as cap:
            for _ in range(nodes):
                stream.launch(kernel, 1, 32, x, 32)
        captured = time.perf_counter() - start
        with cap.graph.instantiate() as exe:
            exe.launch(stream)  # (the first launch, untimed: a launch repeated is the one timed)
            stream.synchronize()
            start = time.perf_counter()
            exe.launch(stream)
            stream.synchronize()
            ran = time.perf_counter() - start
        launched += 2 * nodes
        if repeat:
            for path, seconds in zip(PATHS, (built, captured, ran)):
                samples[path].append(seconds * 1e6 / nodes)
    if not (x.to_numpy() == launched).all():
        raise SystemExit(f"cpu_paths: the launches added {x.to_numpy()[0]:g}, not {launched}")
    # (a checkout from before the core modules has none)
    modes = importlib.import_module("gpugraph._core").modes() if importlib.util.find_spec("gpugraph._core") else {}
    print(json.dumps({"medians": {path: statistics.median(v) for path, v in samples.items()}, "modes": modes}))


def run(variant: tuple[str, str, str], nodes: int, repeats: int) -> dict:
    _, src, compiled = variant
    environ = dict(os.environ, PYTHONPATH=src, GPUGRAPH_COMPILED=compiled)
    done = subprocess.run([sys.executable, __file__, "--child", str(nodes), str(repeats)], capture_output=True,
                          text=True, env=environ, timeout=600)
    if done.returncode:
        raise SystemExit(f"cpu_paths: {variant[0]} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="another checkout's src folder")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if not args.against:
        parser.error("--against DIR is required")
    variants = [("compiled", str(ROOT / "src"), "1"), ("plain", str(ROOT / "src"), "0"),
                ("against", str(pathlib.Path(args.against).resolve()), "1")]
    results: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
    for round_ in range(args.rounds):
        shift = round_ % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            results[variant[0]].append(run(variant, args.nodes, args.repeats))
    print(f"core modules, compiled run: {results['compiled'][0]['modes']}")
    print(f"{args.nodes}-node chain, us per node: median of {args.rounds} rounds (ratio to --against, round by round)")
    print(f"| path | {' | '.join(name for name, _, _ in variants)} | compiled / against | plain / against |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in PATHS:
        figures = {name: [r["medians"][path] for r in rows] for name, rows in results.items()}
        ratios = [statistics.median(a / b for a, b in zip(figures[name], figures["against"]))
                  for name in ("compiled", "plain")]
        print(f"| {path} | " + " | ".join(f"{statistics.median(v):.2f}" for v in figures.values())
              + f" | {ratios[0]:.3f} | {ratios[1]:.3f} |")
    return None


if __name__ == "__main__":
    main()

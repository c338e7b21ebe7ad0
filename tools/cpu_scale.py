"""The CPU backend at scale (issue 11): one launch of a wide graph and of a chain of 100,000 nodes (time and
peak RSS), and 1,000,000 stream launches and graph launches (RSS growth, which must stay flat).

Each measurement runs in a fresh interpreter, so its peak RSS is its own. A benchmark, not a test: it
prints a Markdown table for docs/performance.md.

Usage (from the repository root):
    PYTHONPATH=src python3 tools/cpu_scale.py [--nodes 100000] [--launches 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import date
from typing import Any

MIB = 1 << 20


def processor() -> str:
    """The CPU's model name (Linux), else what the platform module says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def rss() -> float:
    """Resident set size now, MiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def peak_rss() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_launch(shape: str, nodes: int) -> dict[str, Any]:
    """Build, instantiate and launch once a graph of ``nodes`` host nodes, all independent (wide) or each
    after the last (chain); each node appends its number, so the run is checked complete and once only."""
    import gpugraph as gg
    device = gg.Device("cpu")
    stream = device.stream()
    ran: list[int] = []
    start = time.perf_counter()
    graph = gg.Graph(device)
    previous: Any = ()
    for i in range(nodes):
        node = graph.add_host(ran.append, i, after=previous)
        if shape == "chain":
            previous = node
    built = time.perf_counter()
    exe = graph.instantiate()
    instantiated = time.perf_counter()
    before = rss()
    exe.launch(stream)
    stream.synchronize()
    launched = time.perf_counter()
    if sorted(ran) != list(range(nodes)) or (shape == "chain" and ran != list(range(nodes))):
        raise SystemExit(f"{shape}: the launch did not run every node once, in order")
    return {"build_s": built - start, "instantiate_s": instantiated - built, "launch_s": launched - instantiated,
            "rss_before_launch_mib": before, "peak_rss_mib": peak_rss()}


def many_launches(kind: str, launches: int) -> dict[str, Any]:
    """``launches`` stream launches of a 32-element increment kernel, or graph launches of a one-node graph
    of it, synchronizing every 10,000; RSS is sampled every 10 % after the first 10 %."""
    import numpy as np

    import gpugraph as gg
    from gpugraph.bench._workloads import ELEMENTS, INCREMENT
    device = gg.Device("cpu")
    stream = device.stream()
    x = device.zeros(ELEMENTS, np.float32)
    graph = gg.Graph(device)
    graph.add_kernel(INCREMENT, 1, ELEMENTS, x, ELEMENTS)
    exe = graph.instantiate()

    def launch() -> None:
        if kind == "stream":
            stream.launch(INCREMENT, 1, ELEMENTS, x, ELEMENTS)
        else:
            exe.launch(stream)

    every, samples = 10_000, []
    start = time.perf_counter()
    for i in range(1, launches + 1):
        launch()
        if i % every == 0:
            stream.synchronize()
            if i % (launches // 10) == 0:
                samples.append(rss())
    elapsed = time.perf_counter() - start
    # float32 holds every count up to 2**24 exactly; past it the check would need float64.
    if launches <= 1 << 24 and not np.array_equal(x.to_numpy(), np.full(ELEMENTS, launches, np.float32)):
        raise SystemExit(f"{kind}: the kernel did not run {launches} times")
    return {"per_launch_us": elapsed / launches * 1e6, "rss_samples_mib": samples,
            "growth_mib": samples[-1] - samples[0], "peak_rss_mib": peak_rss()}


def run_part(part: str, count: int) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and return what it printed."""
    done = subprocess.run([sys.executable, __file__, "--part", part, "--count", str(count)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{part} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--part", choices=("wide", "chain", "stream", "graph"), help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part in ("wide", "chain"):
        print(json.dumps(one_launch(args.part, args.count)))
        return
    if args.part:
        print(json.dumps(many_launches(args.part, args.count)))
        return

    import numpy as np

    import gpugraph as gg
    print(f"{date.today()}, {processor()} with {os.cpu_count()} cores, "
          f"{platform.platform()}; Python {platform.python_version()}, NumPy {np.__version__}, "
          f"gpugraph {gg.__version__}\n")
    print("| workload | build | instantiate | one launch + synchronize | RSS before the launch | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    for shape in ("wide", "chain"):
        r = run_part(shape, args.nodes)
        print(f"| {args.nodes:,} host nodes, {shape} | {r['build_s']:.2f} s | {r['instantiate_s']:.2f} s | "
              f"**{r['launch_s']:.3f} s** | {r['rss_before_launch_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB |")
    print("\n| workload | per launch | RSS at 10 % … 100 % of the launches | growth | peak RSS |")
    print("|---|---:|---|---:|---:|")
    for kind in ("stream", "graph"):
        r = run_part(kind, args.launches)
        samples = ", ".join(f"{s:.1f}" for s in r["rss_samples_mib"])
        print(f"| {args.launches:,} {kind} launches | {r['per_launch_us']:.1f} µs | {samples} MiB | "
              f"**{r['growth_mib']:+.1f} MiB** | {r['peak_rss_mib']:.0f} MiB |")


if __name__ == "__main__":
    main()

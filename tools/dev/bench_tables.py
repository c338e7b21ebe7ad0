"""Render docs/performance.md's tables from the JSON that ``python -m gpugraph bench --json PATH`` writes.

Each workload's table sits in the document between a line ``<!-- bench: BACKEND/WORKLOAD -->`` and a line
``<!-- /bench -->`` (BACKEND is the run's backend, ``cuda`` or ``cpu``) and names the run it comes from (by the
folder its JSON is kept in, ``docs/results/DATE-MACHINE/``); the runs themselves (date, device, driver or
compiler, host, versions, path, the bench command and a link to the JSON) between ``<!-- bench: BACKEND/runs -->``
and ``<!-- /bench -->``; the targets of a backend's workloads, met or not, between
``<!-- bench: BACKEND/targets -->`` and ``<!-- /bench -->`` (a figure with a target is shown there, not in its
workload's table). Workloads come in the bench's order.

Usage (from the repository root, with gpugraph importable: installed, or ``PYTHONPATH=src``):
    python tools/dev/bench_tables.py RUN.json [RUN.json ...]                       # print the tables
    python tools/dev/bench_tables.py RUN.json [RUN.json ...] --write docs/performance.md

Where several runs of one backend hold the same workload, the newest (by date; then the later argument) gives
its table. ``--write`` replaces the tables of the workloads given and leaves the others as they are; it writes
nothing if a table has no place in the document. ``--set KEY=VALUE`` fills what a run's JSON does not record
(older runs lack ``driver`` and ``versions``), e.g. ``--set "driver=580.159.04, CUDA 13.0"
--set versions.torch=2.11.0``; a recorded value is never replaced.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from gpugraph.bench import WORKLOADS

BEGIN = re.compile(r"^<!-- bench: (\S+) -->$", re.M)
END = "<!-- /bench -->"
PACKAGES = {"cuda-bindings": "cuda-bindings", "cuda-core": "cuda.core", "cupy-cuda13x": "CuPy",
            "cupy-cuda12x": "CuPy", "cupy": "CuPy", "torch": "PyTorch"}
# A figure "[SHAPE, ]N=<n>: METRIC" measured at several N is shown as one row per (SHAPE, N), a column per METRIC.
BY_SIZE = re.compile(r"^(?:(?P<shape>[^:]+?), )?N=(?P<n>\d+): (?P<metric>.+)$")


def number(value: float) -> str:
    """Three significant digits (as the bench prints them), whole numbers from 100 on."""
    return f"{value:#.3g}".rstrip(".") if abs(value) < 100 else f"{value:.0f}"


def backend(run: dict[str, Any]) -> str:
    return str(run["machine"]["device"]).split(":")[0]


def label(link: str) -> str:
    """A run's name: the folder its JSON is kept in (``2026-11-24-h200-b``), else the file's name."""
    folder, name = os.path.split(link)
    return os.path.basename(folder) or name


def run_line(run: dict[str, Any], link: str) -> str:
    """The run a table comes from, as one item of a list."""
    m = run["machine"]
    device = m["device_name"] + (f" (driver {m['driver']})" if m.get("driver") else "")
    host = f"{m['cpu']}, {m['cores']} cores"
    if m.get("cores_allowed") and m["cores_allowed"] != m["cores"]:
        host += f" ({m['cores_allowed']} allowed)"
    shown = [f"Python {m['python']}", f"NumPy {m['numpy']}"]
    for name, version in (m.get("versions") or {}).items():
        if name != "cuda-bindings" or backend(run) == "cuda":
            shown.append(f"{PACKAGES.get(name, name)} {version}")
    if m.get("compiler"):
        shown.append(m["compiler"])
    if m.get("cuda_path"):
        shown.append("the compiled path" if str(m["cuda_path"]).startswith("built (") else "the pure-Python path")
    options = run.get("options", {})
    method = f"medians of {options.get('repeats', '?')} runs after {options.get('warmup', '?')} warm-up runs"
    return (f"- [{label(link)}]({link}), {m['date']}: {device}; {host}; {', '.join(shown)}; {method}:\n"
            f"  `{m['command']}`")


def met(row: dict[str, Any]) -> str:
    return {True: "met", False: "**not met**"}.get(row.get("met"), "")


def table(rows: list[dict[str, Any]]) -> list[str]:
    """A workload's rows without a target: figures measured at several N as one table (rows by N), the rest one row
    each."""
    rows = [r for r in rows if r.get("met") is None]
    sized: dict[str, set[str]] = {}
    for r in rows:
        found = BY_SIZE.match(r["figure"])
        if found:
            sized.setdefault(found["metric"], set()).add(found["n"])
    metrics = [metric for metric, sizes in sized.items() if len(sizes) > 1]
    lines: list[str] = []
    if metrics:
        cells: dict[tuple[str, int], dict[str, str]] = {}
        units: dict[str, str] = {}
        for r in rows:
            found = BY_SIZE.match(r["figure"])
            if found and found["metric"] in metrics:
                key = (found["shape"] or "", int(found["n"]))
                cells.setdefault(key, {})[found["metric"]] = number(r["median"])
                units[found["metric"]] = r["unit"]
        shaped = any(shape for shape, _ in cells)
        head = (["shape"] if shaped else []) + ["N"] + [f"{metric} ({units[metric]})" for metric in metrics]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * (1 if shaped else 0) + "---:|" * (len(head) - shaped)]
        for (shape, n), values in cells.items():
            lines.append("| " + " | ".join(([shape] if shaped else []) + [str(n)]
                                           + [values.get(metric, "—") for metric in metrics]) + " |")
        lines.append("")
    rest = [r for r in rows if not (BY_SIZE.match(r["figure"]) and BY_SIZE.match(r["figure"])["metric"] in metrics)]
    if rest:
        lines += ["| figure | median | IQR (q1–q3) | unit |", "|---|---:|---:|---|"]
        for r in rest:
            spread = f"{number(r['q1'])}–{number(r['q3'])}" if r["repeats"] > 1 else ""
            lines.append(f"| {r['figure']} | **{number(r['median'])}** | {spread} | {r['unit']} |")
    return lines[:-1] if lines and not lines[-1] else lines


def targets(chosen: dict[str, tuple[dict[str, Any], str]]) -> list[str]:
    """Every row with a target, of the runs chosen for a backend's workloads."""
    lines = ["| workload | figure | measured | target | met? | run |", "|---|---|---:|---|---|---|"]
    for workload, (run, link) in chosen.items():
        for r in run["rows"]:
            if r["workload"] == workload and r.get("met") is not None:
                unit = "×" if r["unit"] == "×" else f" {r['unit']}"
                lines.append(f"| {workload} | {r['figure']} | {number(r['median'])}{unit} | {r['target']} | {met(r)} "
                             f"| [{label(link)}]({link}) |")
    return lines


def render(paths: list[str], base: str, settings: list[str]) -> dict[str, str]:
    """The tables of the runs at ``paths``, by marker name (``cuda/launch``, ``cuda/targets``, ...); links are
    relative to the folder ``base``."""
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        if not isinstance(run, dict) or not {"machine", "rows"} <= run.keys():
            raise SystemExit(f"bench_tables: {path} is not the JSON of `python -m gpugraph bench --json` (it has no "
                             f"'machine' and 'rows'); pass the file the bench wrote")
        for setting in settings:
            key, _, value = setting.partition("=")
            where, _, name = key.rpartition(".")
            place = run["machine"].setdefault(where, {}) if where else run["machine"]
            if place.get(name) is None:
                place[name] = value
        runs.append((run, os.path.relpath(path, base).replace(os.sep, "/")))
    newest: dict[str, dict[str, tuple[dict[str, Any], str]]] = {}
    for run, link in sorted(runs, key=lambda pair: pair[0]["machine"]["date"]):  # (stable: ties keep their order)
        for r in run["rows"]:
            newest.setdefault(backend(run), {})[r["workload"]] = (run, link)
    order = {name: index for index, name in enumerate(WORKLOADS)}
    chosen = {name: dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))
              for name, found in newest.items()}
    blocks = {}
    for name, workloads in chosen.items():
        used: dict[str, dict[str, Any]] = {}
        for workload, (run, link) in workloads.items():
            rows = [r for r in run["rows"] if r["workload"] == workload]
            used[link] = run
            blocks[f"{name}/{workload}"] = "\n".join([f"From the run [{label(link)}]({link}):", "", *table(rows)])
        blocks[f"{name}/runs"] = "\n".join(run_line(run, link) for link, run in used.items())
        blocks[f"{name}/targets"] = "\n".join(targets(workloads))
    return blocks


def write(document: str, blocks: dict[str, str]) -> None:
    """Replace each block's table in ``document``; nothing is written if one has no place there."""
    with open(document, encoding="utf-8") as f:
        text = f.read()
    places = set(BEGIN.findall(text))
    missing = sorted(set(blocks) - places)
    if missing:
        raise SystemExit(f"bench_tables: {document} has no place for {', '.join(missing)}: add the lines "
                         f"`<!-- bench: NAME -->` and `{END}` where each belongs; nothing was written")

    def replaced(found: re.Match[str]) -> str:
        name = found[1]
        return f"<!-- bench: {name} -->\n{blocks[name]}\n{END}" if name in blocks else found[0]
    pattern = re.compile(r"^<!-- bench: (\S+) -->\n.*?^" + re.escape(END) + "$", re.M | re.S)
    updated = pattern.sub(replaced, text)
    with open(document, "w", encoding="utf-8") as f:
        f.write(updated)
    print(f"bench_tables: {document}: replaced {', '.join(sorted(blocks))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/dev/bench_tables.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="JSON written by `python -m gpugraph bench --json`")
    parser.add_argument("--write", metavar="DOC", help="replace the tables in DOC (docs/performance.md)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="fill a machine field a run does not record (versions.NAME for a package)")
    args = parser.parse_args(argv)
    for setting in args.set:
        if "=" not in setting or not setting.partition("=")[0]:
            parser.error(f"--set: expected KEY=VALUE, got {setting!r}")
    base = os.path.dirname(os.path.abspath(args.write)) if args.write else os.path.abspath("docs")
    blocks = render(args.runs, base, args.set)
    if args.write:
        write(args.write, blocks)
    else:
        for name, block in blocks.items():
            print(f"<!-- bench: {name} -->\n{block}\n{END}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
its table. ``--write`` replaces the tables of the workloads given and keeps the others; the runs and targets blocks
of a backend given are made from every run its tables then cite (the runs given, and those the kept tables name,
read from their JSON beside the document), so that rendering one new run keeps the entries of the runs still cited.
A target's row gives its figure in each of those runs that measured it, and says in which it was met. It writes
nothing if a table has no place in the document or a cited run's JSON is missing.

Everything shown comes from the JSON: a fact a run did not record (older runs lack ``driver`` and ``versions``) is
added to its ``machine`` record there, e.g. ``"driver": "580.159.04, CUDA 13.0"`` and ``"versions":
{"cuda-bindings": "13.3.1"}``. The command is shown with its ``--json`` path as the file is kept (``bench.json``).
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
BLOCK = re.compile(r"^<!-- bench: (\S+) -->\n(.*?)^" + re.escape(END) + "$", re.M | re.S)
CITES = re.compile(r"^From the run \[[^\]]*\]\((\S+?)\):$", re.M)  # a workload table's first line
SUMMARIES = ("runs", "targets")  # a backend's blocks that are not a workload's table
JSON_PATH = re.compile(r"(--json(?:=|\s+))\S+")
PACKAGES = {"cuda-bindings": "cuda-bindings", "cuda-core": "cuda.core", "cupy-cuda13x": "CuPy",
            "cupy-cuda12x": "CuPy", "cupy": "CuPy", "torch": "PyTorch"}
# A figure "[SHAPE, ]N=<n>: METRIC" measured at several N is shown as one row per (SHAPE, N), a column per METRIC.
BY_SIZE = re.compile(r"^(?:(?P<shape>[^:]+?), )?N=(?P<n>\d+): (?P<metric>.+)$")

Run = tuple[dict[str, Any], str]  # a run's JSON and its link, relative to the document's folder


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
    command = JSON_PATH.sub(lambda found: found[1] + os.path.basename(link), m["command"])  # (as the file is kept)
    return f"- [{label(link)}]({link}), {m['date']}: {device}; {host}; {', '.join(shown)}; {method}:\n  `{command}`"


def met(row: dict[str, Any]) -> str:
    return "" if row.get("met") is None else "met" if row["met"] else "**not met**"


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
    rest = [r for r in rows if not ((found := BY_SIZE.match(r["figure"])) and found["metric"] in metrics)]
    if rest:
        lines += ["| figure | median | IQR (q1–q3) | unit |", "|---|---:|---:|---|"]
        for r in rest:
            spread = f"{number(r['q1'])}–{number(r['q3'])}" if r["repeats"] > 1 else ""
            lines.append(f"| {r['figure']} | **{number(r['median'])}** | {spread} | {r['unit']} |")
    return lines[:-1] if lines and not lines[-1] else lines


def targets(workloads: list[str], runs: list[Run]) -> list[str]:
    """Every target of ``workloads``, with its figure in each of ``runs`` that measured it and the runs it was met
    in."""
    found: dict[tuple[str, str, str], list[tuple[dict[str, Any], str]]] = {}
    for workload in workloads:
        for run, link in runs:
            for r in run["rows"]:
                if r["workload"] == workload and r.get("met") is not None:
                    found.setdefault((workload, r["figure"], r["target"]), []).append((r, link))
    lines = ["| workload | figure | target | measured | met? |", "|---|---|---|---|---|"]
    for (workload, figure, target), measured in found.items():
        shown = "; ".join(f"{number(r['median'])}{'×' if r['unit'] == '×' else ' ' + r['unit']} in "
                          f"[{label(link)}]({link})" for r, link in measured)
        verdicts = {met(r) for r, _ in measured}
        verdict = verdicts.pop() if len(verdicts) == 1 else "; ".join(
            f"{word} in {', '.join(label(link) for r, link in measured if met(r) == word)}"
            for word in ("met", "**not met**"))
        lines.append(f"| {workload} | {figure} | {target} | {shown} | {verdict} |")
    return lines


def load(path: str) -> dict[str, Any]:
    """The run whose JSON is at ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"bench_tables: {path} does not exist; pass a run's JSON as `python -m gpugraph bench "
                         f"--json` wrote it (kept as docs/results/DATE-MACHINE/bench.json); nothing was written"
                         ) from None
    if not isinstance(run, dict) or not {"machine", "rows"} <= run.keys():
        raise SystemExit(f"bench_tables: {path} is not the JSON of `python -m gpugraph bench --json` (it has no "
                         f"'machine' and 'rows'); pass the file the bench wrote")
    return run


def cited(document: str) -> dict[str, str]:
    """The run each workload table of ``document`` (its text) comes from: its link, by marker name."""
    return {found[1]: cites[1] for found in BLOCK.finditer(document) if (cites := CITES.search(found[2]))}


def render(paths: list[str], base: str, kept: dict[str, str] | None = None) -> dict[str, str]:
    """The tables of the runs at ``paths``, by marker name (``cuda/launch``, ``cuda/targets``, ...); links are
    relative to the folder ``base``. ``kept``: the tables that stay in the document (marker name -> the link of
    the run each cites), whose runs join the runs and targets blocks of their backend."""
    runs = [(load(path), os.path.relpath(path, base).replace(os.sep, "/")) for path in paths]
    newest: dict[str, dict[str, Run]] = {}
    for run, link in sorted(runs, key=lambda pair: pair[0]["machine"]["date"]):  # (stable: ties keep their order)
        for r in run["rows"]:
            newest.setdefault(backend(run), {})[r["workload"]] = (run, link)
    loaded = {link: run for run, link in runs}
    order = {name: index for index, name in enumerate(WORKLOADS)}
    blocks = {}
    for name, given in newest.items():
        for workload, (run, link) in given.items():
            rows = [r for r in run["rows"] if r["workload"] == workload]
            blocks[f"{name}/{workload}"] = "\n".join([f"From the run [{label(link)}]({link}):", "", *table(rows)])
        tables = dict(given)
        for marker, link in (kept or {}).items():
            owner, _, workload = marker.partition("/")
            if owner == name and workload not in SUMMARIES and workload not in tables:
                if link not in loaded:
                    loaded[link] = load(os.path.join(base, link))
                tables[workload] = (loaded[link], link)
        workloads = sorted(tables, key=lambda workload: order.get(workload, len(order)))
        used = list(dict.fromkeys(tables[workload][1] for workload in workloads))  # (in the tables' order)
        blocks[f"{name}/runs"] = "\n".join(run_line(loaded[link], link) for link in used)
        blocks[f"{name}/targets"] = "\n".join(targets(workloads, [(loaded[link], link) for link in used]))
    return blocks


def write(document: str, paths: list[str]) -> None:
    """Render the runs at ``paths`` into ``document`` in place; nothing is written if a table has no place there
    or a run cited is missing."""
    with open(document, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(document))
    blocks = render(paths, base, cited(text))
    missing = sorted(set(blocks) - set(BEGIN.findall(text)))
    if missing:
        raise SystemExit(f"bench_tables: {document} has no place for {', '.join(missing)}: add the lines "
                         f"`<!-- bench: NAME -->` and `{END}` where each belongs; nothing was written")

    def replaced(found: re.Match[str]) -> str:
        name = found[1]
        return f"<!-- bench: {name} -->\n{blocks[name]}\n{END}" if name in blocks else found[0]
    with open(document, "w", encoding="utf-8") as f:
        f.write(BLOCK.sub(replaced, text))
    print(f"bench_tables: {document}: replaced {', '.join(sorted(blocks))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/dev/bench_tables.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="JSON written by `python -m gpugraph bench --json`")
    parser.add_argument("--write", metavar="DOC", help="replace the tables in DOC (docs/performance.md)")
    args = parser.parse_args(argv)
    if args.write:
        write(args.write, args.runs)
    else:
        for name, block in render(args.runs, os.path.abspath("docs")).items():
            print(f"<!-- bench: {name} -->\n{block}\n{END}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

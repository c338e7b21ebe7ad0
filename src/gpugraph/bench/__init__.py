"""Benchmarks: ``python -m gpugraph bench [--backend cpu] [--workload NAME] [--json PATH]``.

Each workload (see ``_workloads.py``) measures one figure of docs/performance.md on one device, checks
that what it timed computed the right result, and returns rows: the median of repeated runs after
warm-up, with its spread. Ratios are taken per paired repeat. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from ._core import WORKLOADS, Options, Row, ValidationError, workload
from . import _gpu, _rk4, _workloads  # noqa: F401 - register the workloads
from ._report import machine, markdown_table

__all__ = ["Options", "Row", "ValidationError", "WORKLOADS", "main", "run", "workload"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpugraph bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default=None,
                        help="device such as 'cpu' or 'cuda:0' (default: Device(), i.e. $GPUGRAPH_BACKEND "
                             "or the best present)")
    parser.add_argument("--workload", action="append", choices=list(WORKLOADS), default=None,
                        help="run only this workload (repeatable; default: all)")
    parser.add_argument("--repeats", type=_positive, default=Options.repeats, help="timed runs per figure")
    parser.add_argument("--warmup", type=int, default=Options.warmup, help="untimed runs first")
    parser.add_argument("--nodes", type=_positive, default=Options.nodes, help="length of the chain")
    parser.add_argument("--width", type=_positive, default=Options.width, help="independent branches")
    parser.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    return parser


def run(device, names: list[str], options: Options) -> list[Row]:
    """Run the named workloads on ``device`` and return all their rows."""
    rows: list[Row] = []
    for name in names:
        rows.extend(WORKLOADS[name].run(device, options))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m gpugraph bench``; returns the process exit status."""
    from .. import BackendUnavailableError, Device
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--"]:  # `python -m gpugraph bench -- --json out.json` passes the separator through
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if args.list:
        for entry in WORKLOADS.values():
            print(f"{entry.name:<10} {entry.description}")
        return 0
    if args.warmup < 0:
        print("bench: --warmup must be a non-negative int", file=sys.stderr)
        return 2
    options = Options(repeats=args.repeats, warmup=args.warmup, nodes=args.nodes, width=args.width)
    try:
        device = Device(args.backend)
    except (BackendUnavailableError, ValueError, TypeError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    names = args.workload or list(WORKLOADS)
    info = machine(device, argv)
    print(f"gpugraph {info['gpugraph']} bench on {device} ({device.name}); {info['cpu']}, {info['cores']} cores; "
          f"Python {info['python']}, NumPy {info['numpy']}; {info['date']}")
    print(f"median of {options.repeats} runs after {options.warmup} warm-up runs; ratios per paired run\n")
    try:
        rows = run(device, names, options)
    except ValidationError as exc:
        print(f"bench: validation failed, no figures reported: {exc}", file=sys.stderr)
        return 1
    print(markdown_table(rows) + "\n")
    for row in rows:
        if row.unit == "×":
            print(f"{row.workload}: {row.figure} = {row.median:.2f}× "
                  f"(IQR {row.q1:.2f}–{row.q3:.2f}; target {row.target})")
    if args.json:
        record = {"machine": info, "options": asdict(options),
                  "rows": [r.to_json() for r in rows]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"\nwrote {args.json}")
    return 0

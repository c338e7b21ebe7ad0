"""Benchmarks: ``python -m gpugraph bench [--backend cpu] [--workload NAME] [--json PATH]``.

Each workload (see ``_workloads.py``) measures one figure of docs/performance.md on one device, checks
that what it timed computed the right result, and returns rows: the median of repeated runs after
warm-up, with its spread. Ratios are taken per paired repeat. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from .._cli import Parser, UsageError, open_device, report
from .._errors import BackendUnavailableError
from ..backends import available_backends
from . import _gpu, _hot, _rk4, _workloads  # noqa: F401 - register the workloads
from ._core import WORKLOADS, Options, Row, ValidationError, needs_gpu, workload
from ._report import machine, markdown_table, target_met, targets_table

__all__ = ["WORKLOADS", "Options", "Row", "ValidationError", "main", "run", "workload"]


PROG = "python -m gpugraph bench"


def _int_from(low: int, what: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a {what} int, got {text!r}")
        return value
    return convert


def _json_path(path: str) -> str:
    """``--json PATH``: refused before anything runs unless it can be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path!r} is a folder; expected a file name")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"the folder {folder!r} does not exist")
    existed = os.path.exists(path)
    try:  # (opened, not asked: os.access says yes to root wherever the file system says no, as in /proc)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path!r} is not writable ({exc.strerror})") from None
    if not existed:
        os.remove(path)  # (written when the run is done)
    return path


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Time gpugraph's workloads beside the peers installed here and "
                                           "the C++ floor, checking what each timed computed.")
    parser.add_argument("--backend", default=None,
                        help="device such as 'cpu' or 'cuda:0' (default: Device(), i.e. $GPUGRAPH_BACKEND "
                             "or the best present)")
    parser.add_argument("--workload", action="append", choices=list(WORKLOADS), default=None,
                        help="run only this workload (repeatable; default: all)")
    positive, non_negative = _int_from(1, "positive"), _int_from(0, "non-negative")
    parser.add_argument("--repeats", type=positive, default=Options.repeats, help="timed runs per figure")
    parser.add_argument("--warmup", type=non_negative, default=Options.warmup, help="untimed runs first")
    parser.add_argument("--nodes", type=positive, default=Options.nodes, help="length of the chain")
    parser.add_argument("--width", type=positive, default=Options.width, help="independent branches")
    parser.add_argument("--json", metavar="PATH", type=_json_path, default=None,
                        help="also write the results as JSON (checked before anything runs)")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    return parser


def run(device: Any, names: list[str], options: Options, progress: Callable[[str], None] | None = None) -> list[Row]:
    """Run the named workloads on ``device`` and return all their rows; ``progress`` (if given) is told
    in words when each workload starts and ends. GPU workloads are skipped on other devices (``progress`` is
    told so)."""
    rows: list[Row] = []
    for number, name in enumerate(names, 1):
        if not WORKLOADS[name].runs_on(device):
            if progress is not None:
                progress(f"[{number}/{len(names)}] skipped {needs_gpu([name], device)}")
            continue
        step = f"[{number}/{len(names)}] {name}"
        if progress is not None:
            progress(f"{step}: {WORKLOADS[name].description} ...")
        start = time.perf_counter()
        found = WORKLOADS[name].run(device, options)
        rows.extend(found)
        if progress is not None:
            progress(f"{step}: {len(found)} figure(s) in {time.perf_counter() - start:.1f} s")
    return rows


def _to_stderr(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m gpugraph bench``; returns the process exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--"]:  # `python -m gpugraph bench -- --json out.json` passes the separator through
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if args.list:
        for entry in WORKLOADS.values():
            print(f"{entry.name:<10} {entry.description}")
        return 0
    options = Options(repeats=args.repeats, warmup=args.warmup, nodes=args.nodes, width=args.width)
    try:
        available_backends()  # none usable at all (a wrong $GPUGRAPH_CPU_DEVICES): said before anything runs
        device = open_device(args.backend)
    except (BackendUnavailableError, UsageError) as exc:
        return report(PROG, str(exc))
    names = args.workload or list(WORKLOADS)
    skipped = [name for name in names if not WORKLOADS[name].runs_on(device)]
    if len(skipped) == len(names):
        return report(PROG, needs_gpu(skipped, device))
    if skipped:
        _to_stderr(f"skipped {needs_gpu(skipped, device)}")
        names = [name for name in names if name not in skipped]
    info = machine(device, argv)
    print(f"gpugraph {info['gpugraph']} bench on {device} ({device.name}); {info['cpu']}, {info['cores']} cores; "
          f"Python {info['python']}, NumPy {info['numpy']}; {info['date']}")
    if info["cuda_path"] is not None:
        print(f"CUDA compiled path: {info['cuda_path']}")
    print(f"median of {options.repeats} runs after {options.warmup} warm-up runs; ratios per paired run\n")
    try:
        rows = run(device, names, options, progress=_to_stderr)
    except ValidationError as exc:
        print(f"bench: validation failed, no figures reported: {exc}", file=sys.stderr)
        return 1
    print(markdown_table(rows) + "\n")
    targets = targets_table(rows)
    if targets:
        print("Targets:\n\n" + targets)
    if args.json:
        record = {"machine": info, "options": asdict(options),
                  "rows": [{**r.to_json(), "met": target_met(r)} for r in rows]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"\nwrote {args.json}")
    return 0

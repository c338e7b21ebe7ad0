"""Reporting: the machine a run was taken on, a markdown table, and the JSON record."""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import re
import shlex
from importlib import metadata
from typing import Any

import numpy as np

from ._core import Row


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


# The distributions (as pip names them) whose versions a run records.
PEERS = ("cuda-bindings", "cuda-core", "cupy-cuda13x", "cupy-cuda12x", "cupy", "torch")


def versions() -> dict[str, str]:
    """The installed versions of the peers' packages (and cuda-bindings, the CUDA backend's), by distribution name."""
    found = {}
    for name in PEERS:
        with contextlib.suppress(metadata.PackageNotFoundError):  # (not installed: no version to record)
            found[name] = metadata.version(name)
    return found


def machine(device: Any, argv: list[str]) -> dict[str, Any]:
    """Where and with what a run was taken; ``argv`` are the bench arguments, for the command line."""
    from .. import __version__
    path = driver = compiler = None
    if device.backend == "cuda":  # which of the CUDA backend's two paths ran (the compiled one or Python's)
        from ..backends.cuda import _compiled
        from ._gpu import driver_version
        path, driver = _compiled.status, driver_version()
    elif device.backend == "cpu":  # the compiler that built the kernels
        from ..backends.cpu import _compile
        found = _compile.compiler()
        compiler = None if found is None else found[1]
    return {
        "date": datetime.date.today().isoformat(),
        "device": str(device),
        "device_name": device.name,
        "driver": driver,
        "compiler": compiler,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "versions": versions(),
        "gpugraph": __version__,
        "cuda_path": path,
        "command": " ".join(["python -m gpugraph bench", *map(shlex.quote, argv)]),
    }


def _number(value: float) -> str:
    return f"{value:#.3g}" if abs(value) < 100 else f"{value:.0f}"


def markdown_table(rows: list[Row]) -> str:
    """The rows as a markdown table: median, interquartile range and extremes of each figure."""
    lines = ["| workload | figure | median | IQR (q1–q3) | min–max | unit | target |",
             "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r.workload} | {r.figure} | **{_number(r.median)}** | {_number(r.q1)}–{_number(r.q3)} "
                     f"| {_number(r.low)}–{_number(r.high)} | {r.unit} | {r.target} |")
    return "\n".join(lines)


_BOUND = re.compile(r"\s*(≤|<|≥|>)\s*([0-9]+(?:\.[0-9]*)?)")
_HOLDS = {"≤": float.__le__, "<": float.__lt__, "≥": float.__ge__, ">": float.__gt__}


def target_met(row: Row) -> bool | None:
    """Whether the row's median meets its target (a bound such as "≤ 1.3" or "< 1", read from its start);
    None where the row has no such target."""
    bound = _BOUND.match(row.target)
    if bound is None:
        return None
    return _HOLDS[bound.group(1)](float(row.median), float(bound.group(2)))


def targets_table(rows: list[Row]) -> str:
    """The rows that have a target, each as met or not met, in one markdown table ("" when none has)."""
    lines = ["| workload | figure | measured | target | met? |", "|---|---|---:|---|---|"]
    for r in rows:
        met = target_met(r)
        if met is not None:
            unit = "×" if r.unit == "×" else f" {r.unit}"
            lines.append(f"| {r.workload} | {r.figure} | {_number(r.median)}{unit} | {r.target} "
                         f"| {'met' if met else '**not met**'} |")
    return "\n".join(lines) if len(lines) > 2 else ""

"""Reporting: the machine a run was taken on, a markdown table, and the JSON record."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
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


def machine(device: Any, argv: list[str]) -> dict[str, Any]:
    """Where and with what a run was taken; ``argv`` are the bench arguments, for the command line."""
    from .. import __version__
    return {
        "date": datetime.date.today().isoformat(),
        "device": str(device),
        "device_name": device.name,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gpugraph": __version__,
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

"""The seed documents' programs, runnable and self-validating: ``python -m gpugraph.examples.NAME``.

Each module has ``run(device) -> Result``; ``python -m gpugraph demo`` runs them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

EXAMPLES = ("explicit_graph", "capture_graph", "async_streams", "dynamic_parameters", "captured", "conditional_solver")


@dataclass(frozen=True)
class Result:
    """What one example did: whether its result matched the seed's expected value, and how long it took."""

    name: str
    validated: bool
    detail: str
    seconds: float = 0.0


def timed(name: str, body: Callable[[], tuple[bool, str]]) -> Result:
    """Run ``body`` (returning (validated, detail)) and time it."""
    start = time.perf_counter()
    validated, detail = body()
    return Result(name, validated, detail, time.perf_counter() - start)

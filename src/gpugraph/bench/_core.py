"""What every workload shares: options, result rows, the registry, timing and statistics."""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any


class ValidationError(RuntimeError):
    """A workload's two paths disagreed, or did not do the work: its timings would mean nothing."""


@dataclass(frozen=True)
class Options:
    """Knobs shared by the workloads (each reads the ones it needs).

    Attributes:
        repeats: Timed runs per figure; the median is reported.
        warmup: Untimed runs before the timed ones.
        nodes: Length of the chain workloads.
        width: Number of independent branches of the branch workloads.
    """

    repeats: int = 20
    warmup: int = 3
    nodes: int = 1000
    width: int = 8


@dataclass(frozen=True)
class Row:
    """One reported figure: the median of ``repeats`` samples and their spread, in ``unit``.

    Attributes:
        workload: Registry name of the workload.
        figure: What was measured, in words.
        unit: E.g. ``"µs/op"``, ``"ms/launch"``, or ``"×"`` for a ratio.
        median: Median of the samples.
        q1: First quartile.
        q3: Third quartile.
        low: Smallest sample.
        high: Largest sample.
        repeats: Number of samples.
        target: The goal this figure is held to, in words ("" when none).
    """

    workload: str
    figure: str
    unit: str
    median: float
    q1: float
    q3: float
    low: float
    high: float
    repeats: int
    target: str = ""

    @classmethod
    def of(cls, workload: str, figure: str, unit: str, samples: list[float], target: str = "") -> Row:
        """Summarise ``samples`` (already in ``unit``) into a row."""
        if len(samples) >= 2:
            q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
        else:
            q1 = q3 = samples[0]
        return cls(workload, figure, unit, statistics.median(samples), q1, q3, min(samples), max(samples),
                   len(samples), target)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


Workload = Callable[[Any, Options], list[Row]]


# The backends whose devices the GPU workloads time (they call the CUDA driver beside gpugraph).
GPU_BACKENDS = ("cuda",)


@dataclass(frozen=True)
class Entry:
    """A registered workload; ``gpu``: it runs on a GPU backend only."""

    name: str
    description: str
    run: Workload
    gpu: bool = False

    def runs_on(self, device: Any) -> bool:
        """Whether the workload can time ``device``."""
        return not self.gpu or device.backend in GPU_BACKENDS


WORKLOADS: dict[str, Entry] = {}


def workload(name: str, description: str, gpu: bool = False) -> Callable[[Workload], Workload]:
    """Register ``fn(device, options) -> list[Row]`` under ``name``; runs in registration order. ``gpu``: it
    needs a device of a GPU backend (``GPU_BACKENDS``), and is skipped on others."""
    def register(fn: Workload) -> Workload:
        if name in WORKLOADS:
            raise ValueError(f"workload {name!r} is registered twice")
        WORKLOADS[name] = Entry(name, description, fn, gpu)
        return fn
    return register


def needs_gpu(names: list[str], device: Any) -> str:
    """Why the workloads ``names`` do not run on ``device``, in words."""
    each = "each needs" if len(names) > 1 else "needs"
    return (f"{', '.join(names)}: {each} a GPU backend (--backend {GPU_BACKENDS[0]}), and this run is on {device} "
            f"({device.name})")


@contextlib.contextmanager
def gc_held() -> Iterator[None]:
    """Hold the garbage collector off (as ``timeit`` does): a collection would time the other workloads'
    leftovers, not the path."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def time_once(fn: Callable[[], None]) -> float:
    """Seconds one call of ``fn`` takes, with the garbage collector held off."""
    with gc_held():
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start


def time_paired(paths: dict[str, Callable[[], None]], options: Options,
                prepare: Callable[[], None] = lambda: None,
                check: Callable[[str], None] = lambda name: None) -> dict[str, list[float]]:
    """Time several paths alternately, so drift in machine load hits them alike.

    Each run is ``prepare()`` (untimed), the timed path, then ``check(name)`` (untimed), which raises
    ValidationError if the path did not do its work. Warm-up runs are checked but not kept.

    Returns:
        Seconds per run, by path name, ``options.repeats`` samples each.
    """
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for repeat in range(options.warmup + options.repeats):
        for name, fn in paths.items():
            prepare()
            seconds = time_once(fn)
            check(name)
            if repeat >= options.warmup:
                samples[name].append(seconds)
    return samples

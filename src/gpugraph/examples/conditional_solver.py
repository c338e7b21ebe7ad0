"""A Jacobi solver that iterates until it converges inside one graph launch (a WHILE conditional node).

It solves A x = b for A = tridiag(-1, d, -1) with b = 1. Each run of the WHILE node's body makes two Jacobi
sweeps (x -> y -> x), each recording the largest change of any element, and a one-thread kernel then sets the
loop's condition: go on while that change is above the tolerance and fewer sweeps than the limit were made.
The change is the residual: a sweep from x gives y = (b + x[i-1] + x[i+1]) / d, so b - A x = d (y - x), and
the largest change is the residual ||b - A x||∞ of the iterate the sweep started from, divided by d.
The host launches once and synchronizes once; the result must equal NumPy's Jacobi iteration, element for
element, after the same number of sweeps, and solve the system.

The host-driven way (``solve_from_host``) launches a graph of two sweeps again and again and reads the change
back every ``k`` launches: the benchmark's comparison (``python -m gpugraph bench --workload solver``).
"""

from __future__ import annotations

import time
from importlib.resources import files

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

SOURCE = (files("gpugraph.examples") / "jacobi.cuh").read_text()  # (also included by the benchmark's C++ program)
SWEEP = gg.Kernel(SOURCE, "jacobi_sweep")
CHECK = gg.Kernel(SOURCE, "jacobi_check")
BLOCK = 256  # (the sweep's reduction is written for blocks of 256 threads)
N, DIAGONAL, TOLERANCE, LIMIT = 4096, 2.1, 1e-10, 100_000


class Problem:
    """The system's arrays on ``device``: b = 1, x = y = 0, and the solver's state (change, sweeps, last change)."""

    def __init__(self, device: gg.Device, n: int = N) -> None:
        self.n = n
        self.b = device.asarray(np.ones(n))
        self.x = device.zeros(n, np.float64)
        self.y = device.zeros(n, np.float64)
        self.state = device.zeros(3, np.uint64)

    def add_step(self, graph: gg.Graph, diagonal: float, tolerance: float, limit: int,
                 condition: gg.Condition | int = 0) -> None:
        """Add two sweeps and the check to ``graph`` (the check sets ``condition`` where one is given)."""
        grid = (self.n + BLOCK - 1) // BLOCK
        first = graph.add_kernel(SWEEP, grid, BLOCK, self.b, self.x, self.y, diagonal, self.n, self.state)
        second = graph.add_kernel(SWEEP, grid, BLOCK, self.b, self.y, self.x, diagonal, self.n, self.state,
                                  after=[first])
        graph.add_kernel(CHECK, 1, 1, self.state, tolerance, limit, condition, after=[second])

    def result(self) -> tuple[np.ndarray, int, float]:
        """x, the sweeps made and the change the last check saw."""
        state = self.state.to_numpy()
        return self.x.to_numpy(), int(state[1]), float(state[2:3].view(np.float64)[0])


def build(problem: Problem, diagonal: float = DIAGONAL, tolerance: float = TOLERANCE, limit: int = LIMIT) -> gg.Graph:
    """The solver as one graph: a WHILE node whose body is two sweeps and the check that sets its condition."""
    graph = gg.Graph(problem.x.device)
    condition = graph.condition(default=1)  # (reset to 1 at each launch: the body runs at least once)
    problem.add_step(graph.add_while(condition).bodies[0], diagonal, tolerance, limit, condition)
    return graph


def solve_from_host(problem: Problem, stream: gg.Stream, every: int, diagonal: float = DIAGONAL,
                    tolerance: float = TOLERANCE, limit: int = LIMIT) -> tuple[int, float]:
    """The same iteration driven from the host: a graph of two sweeps and the check, launched until a read-back
    of the change, made every ``every`` launches, is at most the tolerance (or the limit is reached). Returns
    the sweeps made and the host's seconds in launch and copy calls (its time not spent waiting for the GPU)."""
    graph = gg.Graph(problem.x.device)
    problem.add_step(graph, diagonal, tolerance, limit)
    seen = problem.x.device.pinned(3, np.uint64)
    busy = 0.0
    with graph.instantiate() as exe:
        sweeps = 0
        while True:
            start = time.perf_counter()
            for _ in range(every):
                exe.launch(stream)
            stream.memcpy(seen, problem.state)
            busy += time.perf_counter() - start
            stream.synchronize()
            sweeps += 2 * every
            if not seen[2:3].view(np.float64)[0] > tolerance or sweeps >= limit:
                return sweeps, busy


def reference(n: int = N, diagonal: float = DIAGONAL, tolerance: float = TOLERANCE,
              limit: int = LIMIT) -> tuple[np.ndarray, int]:
    """NumPy's Jacobi iteration with the solver's rule: x and the sweeps made."""
    b, x = np.ones(n), np.zeros(n)
    sweeps = 0
    while True:
        change = 0.0
        for _ in range(2):
            left, right = np.concatenate(([0.0], x[:-1])), np.concatenate((x[1:], [0.0]))
            y = (b + left + right) / diagonal
            change = max(change, float(np.abs(y - x).max()))
            x = y
        sweeps += 2
        if not (change > tolerance and sweeps < limit):
            return x, sweeps


def residual(x: np.ndarray, diagonal: float = DIAGONAL) -> float:
    """The largest element of |A x - b|."""
    left, right = np.concatenate(([0.0], x[:-1])), np.concatenate((x[1:], [0.0]))
    return float(np.abs(diagonal * x - left - right - 1.0).max())


def run(device: gg.Device) -> Result:
    """Solve with one launch; check against NumPy's iteration and the system itself."""
    def body() -> tuple[bool, str]:
        problem = Problem(device)
        stream = device.stream()
        with build(problem).instantiate() as exe:
            exe.launch(stream)
            stream.synchronize()
        x, sweeps, change = problem.result()
        want, want_sweeps = reference()
        same = sweeps == want_sweeps and np.array_equal(x, want)
        error = residual(x)
        ok = same and change <= TOLERANCE and error < 1e-8
        return ok, (f"{sweeps} sweeps in one launch (NumPy: {want_sweeps}), same x as NumPy: {same}; "
                    f"last change {change:.2e}, residual {error:.2e}")
    return timed("conditional_solver", body)


if __name__ == "__main__":
    outcome = run(gg.Device())
    print(outcome.detail)
    raise SystemExit(0 if outcome.validated else 1)

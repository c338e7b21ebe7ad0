"""Data-parallel training steps over every device of a backend: each device computes the gradient of a
least-squares loss on its shard of the data, the gradients are all-reduced to their mean, and every device
applies the same update to its copy of the weights. The steps run eagerly, then as one graph launch per
step (captured once over all devices), and both are checked against the same steps in NumPy.

    python -m gpugraph.examples.data_parallel [--backend cpu|cuda] [--steps N] [--processes N]

``--processes N`` runs the same steps over N processes, one device each (rank r on device r), as torchrun or
mpirun would start them: this process makes the group's unique id and gives it to each rank's process.

On CUDA it needs nccl4py (``pip install ".[nccl]"`` in a gpugraph checkout); the CPU backend's 4 devices need nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
from typing import Any

import numpy as np

import gpugraph as gg
from gpugraph.examples import Result, timed

FEATURES, ROWS, LR = 64, 256, 0.05  # weights, rows per device's shard, learning rate

# One block per row: r = x_row . w - y_row, then grad += r * x_row / rows (atomics: every row adds to it).
GRADIENT = gg.Kernel(r"""
__global__ void gradient(const float* x, const float* y, const float* w, float* grad, int rows, int features) {
    int row = blockIdx.x;
    __shared__ float residual;
    if (threadIdx.x == 0) {
        float dot = 0.0f;
        for (int j = 0; j < features; ++j) dot += x[row * features + j] * w[j];
        residual = dot - y[row];
    }
    __syncthreads();
    for (int j = threadIdx.x; j < features; j += blockDim.x)
        atomicAdd(&grad[j], residual * x[row * features + j] / rows);
}""", "gradient")

UPDATE = gg.Kernel(r"""
__global__ void update(float* w, const float* grad, float lr, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * grad[i];
}""", "update")


class Replica:
    """One device's shard, weights and gradient, its stream and its rank."""

    def __init__(self, comm: gg.Communicator, x: np.ndarray, y: np.ndarray) -> None:
        device = comm.device
        self.comm, self.stream = comm, device.stream()
        self.x, self.y = device.asarray(x), device.asarray(y)
        self.w, self.grad = device.zeros(FEATURES, np.float32), device.zeros(FEATURES, np.float32)


def step(replicas: list[Replica]) -> None:
    """Enqueue one training step on every replica's stream."""
    for r in replicas:
        r.stream.memset(r.grad, 0)
        r.stream.launch(GRADIENT, ROWS, 32, r.x, r.y, r.w, r.grad, ROWS, FEATURES)
    with gg.collective_group():
        for r in replicas:
            r.comm.all_reduce(r.grad, r.grad, op="avg", stream=r.stream)
    for r in replicas:
        r.stream.launch(UPDATE, 1, FEATURES, r.w, r.grad, LR, FEATURES)


def capture_step(replicas: list[Replica]) -> gg.Graph:
    """One step as one graph over every device: the first stream forks onto the others and joins them."""
    lead = replicas[0].stream
    with lead.capture() as cap:
        fork = lead.record()
        for r in replicas[1:]:
            r.stream.wait(fork)
        step(replicas)
        for r in replicas[1:]:
            lead.wait(r.stream.record())
    return cap.graph


def numpy_steps(shards: list[tuple[np.ndarray, np.ndarray]], steps: int) -> np.ndarray:
    w = np.zeros(FEATURES, np.float64)
    for _ in range(steps):
        grads = [x.T @ (x @ w - y) / ROWS for x, y in shards]
        w -= LR * np.mean(grads, axis=0)
    return w


def make_shards(size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal(FEATURES)
    shards = []
    for _ in range(size):
        x = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
        shards.append((x, (x @ truth).astype(np.float32)))
    return shards


def train(comms: list[gg.Communicator], shards: list[tuple[np.ndarray, np.ndarray]], steps: int) -> list[np.ndarray]:
    """The steps on the ranks ``comms`` (this process's), eagerly, then as one graph launch per step: the weights
    each replica ends with, eager ones first."""
    eager = [Replica(c, x, y) for c, (x, y) in zip(comms, shards)]
    for _ in range(steps):
        step(eager)
    for r in eager:  # (one communicator's collectives run in one order on every rank: eager first)
        r.stream.synchronize()
    graphed = [Replica(c, x, y) for c, (x, y) in zip(comms, shards)]
    with capture_step(graphed).instantiate() as exe:
        for _ in range(steps):
            exe.launch(graphed[0].stream)
        graphed[0].stream.synchronize()
    return [r.w.to_numpy() for r in eager + graphed]


def run(device: gg.Device, steps: int = 20) -> Result:
    """Train eagerly and with one graph launch per step on every device of ``device``'s backend."""
    def body() -> tuple[bool, str]:
        devices = [gg.Device(f"{device.backend}:{i}") for i in range(device._backend.device_count())]
        shards = make_shards(len(devices))
        expected = numpy_steps(shards, steps)
        comms = gg.communicators(devices)
        try:
            errors = [float(np.max(np.abs(w - expected))) for w in train(comms, shards, steps)]
        finally:
            for c in comms:
                c.close()
        worst = max(errors)
        return worst < 1e-4, (f"{len(devices)} devices, {steps} steps eager and as graph launches; largest "
                              f"difference from NumPy {worst:.2e}")
    return timed("data_parallel", body)


def rank_process(rank: int, size: int, backend: str, uid: gg.UniqueId, steps: int, results: Any) -> None:
    """The body of rank ``rank``'s process: join the group on device ``rank``, train, report the weights."""
    try:
        device = gg.Device(f"{backend}:{rank}")
        with gg.communicator(device, rank=rank, size=size, unique_id=uid) as comm:
            results.put((rank, train([comm], make_shards(size)[rank:rank + 1], steps)))
    except Exception as exc:  # noqa: BLE001 - reported by the parent process, which names the rank
        results.put((rank, f"{type(exc).__name__}: {exc}"))


def run_processes(backend: str, processes: int, steps: int = 20) -> Result:
    """Train as ``run`` does, with each rank in its own process (started here with multiprocessing's spawn)."""
    def body() -> tuple[bool, str]:
        uid = gg.unique_id(backend)  # (this process keeps the group's rendezvous until the ranks are done)
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        ranks = [context.Process(target=rank_process, args=(r, processes, backend, uid, steps, results))
                 for r in range(processes)]
        for p in ranks:
            p.start()
        try:
            got = dict(results.get(timeout=600) for _ in ranks)
        finally:
            for p in ranks:
                p.join(60)
                if p.is_alive():
                    p.kill()
        failed = [f"rank {r}: {w}" for r, w in sorted(got.items()) if isinstance(w, str)]
        if failed:
            return False, "; ".join(failed)
        expected = numpy_steps(make_shards(processes), steps)
        worst = max(float(np.max(np.abs(w - expected))) for weights in got.values() for w in weights)
        return worst < 1e-4, (f"{processes} processes, one device each, {steps} steps eager and as graph launches; "
                              f"largest difference from NumPy {worst:.2e}")
    return timed("data_parallel", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cpu or cuda (default: the best present)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--processes", type=int, default=0, help="ranks in processes of their own (one device each)")
    options = parser.parse_args()
    device = gg.Device(options.backend) if options.backend else gg.Device()
    if options.processes:
        count = device._backend.device_count()
        if not 1 <= options.processes <= count:
            parser.error(f"--processes: one device per process, and {device.backend} has {count}; got "
                         f"{options.processes}")
        result = run_processes(device.backend, options.processes, options.steps)
    else:
        result = run(device, options.steps)
    print(("Validation passed. " if result.validated else "Validation failed! ") + result.detail)
    raise SystemExit(0 if result.validated else 1)


if __name__ == "__main__":
    main()

"""Data-parallel training steps over every device of a backend: each device computes the gradient of a
least-squares loss on its shard of the data, the gradients are all-reduced to their mean, and every device
applies the same update to its copy of the weights. The steps run eagerly, then as one graph launch per
step (captured once over all devices), and both are checked against the same steps in NumPy.

    python -m gpugraph.examples.data_parallel [--backend cpu|cuda] [--steps N]

On CUDA it needs nccl4py (``pip install ".[nccl]"`` in a gpugraph checkout); the CPU backend's 4 devices need nothing.
"""

from __future__ import annotations

import argparse

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


def run(device: gg.Device, steps: int = 20) -> Result:
    """Train eagerly and with one graph launch per step on every device of ``device``'s backend."""
    def body() -> tuple[bool, str]:
        devices = [gg.Device(f"{device.backend}:{i}") for i in range(device._backend.device_count())]
        shards = make_shards(len(devices))
        expected = numpy_steps(shards, steps)
        comms = gg.communicators(devices)
        try:
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
            errors = [float(np.max(np.abs(r.w.to_numpy() - expected))) for r in eager + graphed]
        finally:
            for c in comms:
                c.close()
        worst = max(errors)
        return worst < 1e-4, (f"{len(devices)} devices, {steps} steps eager and as graph launches; largest "
                              f"difference from NumPy {worst:.2e}")
    return timed("data_parallel", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="cpu or cuda (default: the best present)")
    parser.add_argument("--steps", type=int, default=20)
    options = parser.parse_args()
    result = run(gg.Device(options.backend) if options.backend else gg.Device(), options.steps)
    print(("Validation passed. " if result.validated else "Validation failed! ") + result.detail)
    raise SystemExit(0 if result.validated else 1)


if __name__ == "__main__":
    main()

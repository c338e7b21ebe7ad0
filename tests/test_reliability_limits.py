"""Leaks and limits: pool memory goes back at synchronize and at a trim, launch-shape
caches stay bounded, child-graph nesting has a stated limit, and bad inputs fail at the call that made them.

Memory figures are read in a fresh interpreter (``/proc/self/statm``), where no other test's memory counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import _kernel
from gpugraph._nesting import MAX_NESTING
from gpugraph.backends.cpu._memory import Pool, block_size

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
MiB = 1 << 20


def run_script(script: str, device: gg.Device, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter with ``sys.argv[1]`` the device's spec."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", script, str(device)], capture_output=True, text=True,
                          timeout=timeout, env=env)


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc/self/statm")

# The stream-ordered pool releases at synchronize (threshold 0), the graph pool at a trim.

POOL_SCRIPT = r"""
import json, os, sys
import numpy as np
import gpugraph as gg

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

dev = gg.Device(sys.argv[1])
s = dev.stream()
sizes = [int(n) for n in np.random.default_rng(11).integers(16 << 10, 1 << 20, 1000)]
warm = s.alloc(1024, np.uint8); s.memset(warm, 1); s.free(warm); s.synchronize()
out = {}

base = rss()
for n in sizes:  # 1,000 alloc/free pairs of different sizes, each written
    a = s.alloc(n, np.uint8)
    s.memset(a, 1)
    s.free(a)
s.synchronize()
out["pairs"] = rss() - base

base = rss()
held = [s.alloc(1 << 20, np.uint8) for _ in range(200)]  # 200 MiB live at once
for a in held:
    s.memset(a, 2)
s.synchronize()
out["held"] = rss() - base
for a in held:
    s.free(a)
dev.synchronize()
out["released"] = rss() - base

dev.trim_graph_memory()
figures = dev.graph_memory().reserved
base = rss()
g = gg.Graph(dev)
allocs = [g.add_alloc(n, np.uint8) for n in sizes[:100]]  # about 50 MiB live at once in the graph
join = g.add_empty(after=[g.add_memset(a.array, 3, after=a) for a in allocs])
for a in allocs:
    g.add_free(a, after=join)
with g.instantiate() as exe:
    exe.launch(s)
    s.synchronize()
out["graph_kept"] = rss() - base
out["graph_reserved"] = dev.graph_memory().reserved - figures
dev.trim_graph_memory()
out["graph_trimmed"] = rss() - base
out["graph_reserved_trimmed"] = dev.graph_memory().reserved - figures
print(json.dumps(out))
"""


@needs_proc
def test_pool_memory_goes_back_at_synchronize_and_trim(device):
    done = run_script(POOL_SCRIPT, device)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["pairs"] < 50 * MiB, out  # stream-ordered memory is released at synchronize
    assert out["released"] < 50 * MiB, out
    # The graph pool keeps its memory until a trim, then returns it (reserved figures on every backend).
    assert out["graph_reserved"] >= 40 * MiB, out
    assert out["graph_reserved_trimmed"] <= 0, out
    assert out["graph_trimmed"] < 20 * MiB, out
    if device._backend.dlpack_device_type == 1:  # device memory is host memory here: RSS shows it
        assert out["held"] >= 150 * MiB, out
        assert out["graph_kept"] >= 40 * MiB, out


def test_pool_release_threshold():
    """cudaMemPoolAttrReleaseThreshold: a synchronize keeps at most the threshold's bytes of unused memory;
    a pool without one (the graph pool) keeps everything until trimmed."""
    class Alloc:
        nbytes = 0
        buffer = None
        keep = None
        owner = ""
        origin = "stream"
        ptr = 0

    def fill(pool: Pool, sizes: list[int]) -> None:
        allocs = []
        for n in sizes:
            a = Alloc()
            a.nbytes = n
            pool.map(a)
            allocs.append(a)
        for a in allocs:
            pool.unmap(a)

    sizes = [MiB, 2 * MiB, 4 * MiB]
    pool = Pool(release_threshold=3 * MiB)
    fill(pool, sizes)
    assert pool.reserved == 7 * MiB
    pool.release()
    assert pool.reserved == 3 * MiB  # the 4 MiB block went, largest first
    pool.release()
    assert pool.reserved == 3 * MiB
    kept = Pool()
    fill(kept, sizes)
    kept.release()
    assert kept.reserved == 7 * MiB
    kept.trim()
    assert kept.reserved == 0
    # Nearby sizes share a block size (at most a quarter more), so freed blocks are reused.
    assert block_size(MiB + 1) == block_size(MiB + 200_000) <= MiB * 5 // 4
    assert block_size(0) == block_size(1) == 256


# Launch-shape caches are bounded


def test_launch_shape_caches_stay_bounded(device, stream):
    for n in range(1, 3 * _kernel._CACHE_LIMIT):
        assert _kernel.launch_dims(n, (n % 1024) + 1) == ((n, 1, 1), ((n % 1024) + 1, 1, 1))
        _kernel.launch_dims((n, 2), 32)
    assert len(_kernel._grid_cache) <= _kernel._CACHE_LIMIT
    assert len(_kernel._block_cache) <= _kernel._CACHE_LIMIT
    x = device.asarray(np.ones(64, np.float32))
    stream.launch(K.scale, 2, 32, x, 3.0, 64)  # shapes are still right after the caches were emptied
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 3.0, np.float32))


# Child-graph nesting


def nested(device: gg.Device, levels: int, out: gg.Array, value: int) -> gg.Graph:
    """A graph of ``levels`` levels whose innermost graph sets ``out`` to ``value``."""
    g = gg.Graph(device)
    g.add_memset(out, value)
    for _ in range(levels - 1):
        parent = gg.Graph(device)
        parent.add_child(g)
        g = parent
    return g


def test_child_graphs_nest_up_to_the_limit(device, stream):
    out = device.zeros(4, np.int32)
    deepest = nested(device, MAX_NESTING, out, 1)
    with deepest.instantiate() as exe:  # every walk over the nesting works at the limit
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), np.full(4, 1))
        exe.update(nested(device, MAX_NESTING, out, 2))
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2))
    with deepest.clone().instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), np.full(4, 1))
    assert "child graph" in deepest.to_dot()
    before = len(deepest)
    parent = gg.Graph(device)
    with pytest.raises(gg.GraphError, match=f"nest {MAX_NESTING + 1} levels deep .*at most {MAX_NESTING} levels"):
        parent.add_child(deepest)
    assert len(parent) == 0 and len(deepest) == before  # nothing changed


def test_a_child_graph_embedded_deep_counts_its_level(device):
    out = device.zeros(4, np.int32)
    deepest = nested(device, MAX_NESTING, out, 1)
    inner = deepest.nodes[0].params.graph  # the graph of level 2, owned by the node
    with pytest.raises(gg.GraphError, match=f"child graph at level 2, the child holds {MAX_NESTING - 1}"):
        inner.add_child(nested(device, MAX_NESTING - 1, out, 1))
    inner.add_child(nested(device, MAX_NESTING - 2, out, 1))  # 2 + 62 levels: allowed
    innermost = deepest
    for _ in range(MAX_NESTING - 1):
        innermost = next(n for n in innermost.nodes if n.kind is gg.NodeKind.GRAPH).params.graph
    with pytest.raises(gg.GraphError, match=f"nest {MAX_NESTING + 1} levels deep"):
        innermost.add_child(gg.Graph(device))


def test_a_launch_into_a_capture_keeps_the_nesting_limit(device, stream):
    out = device.zeros(4, np.int32)
    with nested(device, MAX_NESTING - 1, out, 5).instantiate() as exe:
        with stream.capture() as cap:
            exe.launch(stream)  # a child graph: 64 levels in all
        with cap.graph.instantiate() as outer:
            outer.launch(stream)
            stream.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), np.full(4, 5))
    with nested(device, MAX_NESTING, out, 6).instantiate() as exe:
        with pytest.raises(gg.CaptureError, match=f"nest {MAX_NESTING + 1} levels deep"):
            with stream.capture():
                exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 5))


# Errors at the call


def test_object_arrays_are_refused_at_the_copy(device, stream):
    x = device.zeros(4, np.float64)
    objects = np.array([1, "a", None, 2.0], dtype=object)
    record = np.zeros(4, dtype=[("a", object)])
    for host in (objects, record):
        with pytest.raises(TypeError, match=r"memcpy\(src\): the NumPy array has dtype .*, which holds Python"):
            stream.memcpy(x, host, nbytes=32)
        with pytest.raises(TypeError, match=r"memcpy\(dst\): the NumPy array has dtype .*, which holds Python"):
            stream.memcpy(host, x, nbytes=32)
    g = gg.Graph(device)
    with pytest.raises(TypeError, match=r"add_memcpy\(src\): the NumPy array has dtype object"):
        g.add_memcpy(x, objects, nbytes=32)
    pinned = device.pinned(4, np.float64)
    node = g.add_memcpy(x, pinned)
    with g.instantiate() as exe:
        with pytest.raises(TypeError, match=r"set_memcpy\(src\): the NumPy array has dtype object"):
            exe.set_memcpy(node, x, objects, nbytes=32)
    stream.synchronize()  # nothing was enqueued: no error waits here
    assert objects[1] == "a"


HUGE = 2**60


def test_an_allocation_larger_than_memory_is_refused_at_the_call(device, stream):
    with pytest.raises(MemoryError, match=f"out of memory: cannot allocate {HUGE} bytes of stream-ordered"):
        stream.alloc(HUGE, np.uint8)
    with pytest.raises(MemoryError, match=f"out of memory: cannot allocate {HUGE} bytes of device"):
        device.empty(HUGE, np.uint8)
    g = gg.Graph(device)
    with pytest.raises(MemoryError, match=f"out of memory: cannot allocate {HUGE} bytes of graph"):
        g.add_alloc(HUGE, np.uint8)
    assert len(g) == 0
    stream.synchronize()  # nothing half-done: no error was left for the synchronize
    a = stream.alloc(16, np.uint8)  # the stream goes on
    stream.memset(a, 7)
    host = np.empty(16, np.uint8)
    stream.memcpy(host, a)
    stream.free(a)
    stream.synchronize()
    np.testing.assert_array_equal(host, np.full(16, 7))


def test_current_stream_takes_a_device_or_none(device):
    with pytest.raises(TypeError, match=f"current_stream\\(device\\): expected a Device or None, got str "
                                        f"\\(pass gg.Device\\('{device.backend}'\\)\\)"):
        gg.current_stream(device.backend)
    with pytest.raises(TypeError, match="expected a Device or None, got int"):
        gg.current_stream(0)
    assert gg.current_stream(device) is gg.current_stream(device)


def test_kernel_options():
    assert gg.Kernel(K.SOURCE, "scale", options=None).options == ()
    assert gg.Kernel(K.SOURCE, "scale", options=(o for o in ["-DX=1"])).options == ("-DX=1",)
    for bad in (5, b"-O3", ["-O3", None]):
        with pytest.raises(TypeError, match=r"Kernel 'scale': options must be a sequence of str .*or None, got"):
            gg.Kernel(K.SOURCE, "scale", options=bad)


def test_device_index_is_ascii_digits(device):
    for spec in (f"{device.backend}:", f"{device.backend}:\u00b2", f"{device.backend}:\u0661", f"{device.backend}:-0"):
        with pytest.raises(ValueError, match=f"Device: the index after ':' must be a non-negative int, got {spec!r}"):
            gg.Device(spec)
    assert gg.Device(f"{device.backend}:0") is device


DLPACK_SCRIPT = r"""
import sys
import numpy as np
import gpugraph as gg

dev = gg.Device(sys.argv[1])
s = dev.stream()
g = gg.Graph(dev)
a = g.add_alloc(1 << 18, np.float32)  # 1 MiB: memory of its own, unmapped when released
g.add_memset(a.array, 7.0, after=a)
exe = g.instantiate()
exe.launch(s)
s.synchronize()
graph_view = np.from_dlpack(a.array)
s.free(a.array)
s.synchronize()
dev.trim_graph_memory()
b = s.alloc(1 << 18, np.float32)
s.memset(b, 3.0)
s.synchronize()
stream_view = np.from_dlpack(b)
s.free(b)
s.synchronize()  # releases the stream-ordered pool's unused memory
print(graph_view[-1], stream_view[-1])
"""


def test_a_dlpack_view_keeps_pool_memory_after_the_free(device):
    """Reading a view after its allocation was freed is undefined (as on a GPU), but must not take the
    interpreter down: the export keeps the memory it viewed."""
    if gg.Array.__dlpack_device__(device.empty(1))[0] != 1:
        pytest.skip("NumPy views host memory only (kDLCPU)")
    done = run_script(DLPACK_SCRIPT, device, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.split() == ["7.0", "3.0"]

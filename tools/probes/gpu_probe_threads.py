"""What the CUDA driver does to a launch in flight when its executable graph changes, and whether patching
one executable graph from several threads while others capture is safe (A1-A7), which calls another thread's
global capture forbids (B), and what a call from a thread with no current context does (C).

Raw cuda-bindings calls only (no gpugraph), so the answers are the driver's. Run on a GPU machine, from the
repository root: ``python tools/probes/gpu_probe_threads.py [stress seconds]``. Each launch in flight is held at a
first host node (a gate) until the change has been made, then released.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

THREAD_LOCAL = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL


def ok(result):
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS and err != 0:
        raise RuntimeError(cu.cuGetErrorName(err)[1].decode())
    return result[1] if len(result) == 2 else result[1:]


def row(what: str, outcome: str) -> None:
    print(f"{what:<72} {outcome}", flush=True)


ok(cu.cuInit(0))
DEV = ok(cu.cuDeviceGet(0))
CTX = ok(cu.cuDevicePrimaryCtxRetain(DEV))
ok(cu.cuCtxSetCurrent(CTX))

SRC = b'extern "C" __global__ void put(int* p, int v) { p[threadIdx.x] = v; }'
prog = ok(nvrtc.nvrtcCreateProgram(SRC, b"k.cu", 0, [], []))
ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"-arch=sm_90"]))
cubin = b" " * ok(nvrtc.nvrtcGetCUBINSize(prog))
ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
PUT = ok(cu.cuModuleGetFunction(ok(cu.cuModuleLoadData(cubin)), b"put"))

# Host callables by key (userData); the trampoline logs what ran.
LOG: list = []
CALLS: dict[int, object] = {}
_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_TRAMPOLINE = _CB(lambda key: CALLS[key or 0]())
HOST_FN = cu.CUhostFn(ctypes.cast(_TRAMPOLINE, ctypes.c_void_p).value)
GATE_ENTERED, GATE_OPEN = threading.Event(), threading.Event()


def gate() -> None:
    GATE_ENTERED.set()
    GATE_OPEN.wait(10)


CALLS[1] = gate


def host_params(key: int):
    p = cu.CUDA_HOST_NODE_PARAMS()
    p.fn, p.userData = HOST_FN, key
    return p


def tagged(tag: str, width: int = 4):
    """A graph: gate -> width host nodes logging (tag, i) -> nothing."""
    g = ok(cu.cuGraphCreate(0))
    first = ok(cu.cuGraphAddHostNode(g, [], 0, host_params(1)))
    nodes = []
    for i in range(width):
        key = hash((tag, i)) & 0xFFFFFFFF | 2
        CALLS[key] = (lambda tag=tag, i=i: LOG.append((tag, i)))
        nodes.append(ok(cu.cuGraphAddHostNode(g, [first], 1, host_params(key))))
    return g, first, nodes


def held_launch(exe, stream, change) -> float:
    """Launch ``exe`` held at its gate, make ``change()``, release; the seconds ``change`` took."""
    GATE_ENTERED.clear()
    GATE_OPEN.clear()
    ok(cu.cuGraphLaunch(exe, stream))
    if not GATE_ENTERED.wait(10):
        raise RuntimeError("the gate never ran")
    start = time.perf_counter()
    change()
    took = time.perf_counter() - start
    GATE_OPEN.set()
    ok(cu.cuStreamSynchronize(stream))
    return took


def in_flight_update() -> None:
    s = ok(cu.cuStreamCreate(1))
    g_a, _, _ = tagged("a")
    g_b, _, _ = tagged("b")
    exe = ok(cu.cuGraphInstantiate(g_a, 0))
    LOG.clear()
    took = held_launch(exe, s, lambda: ok(cu.cuGraphExecUpdate(exe, g_b)))
    row("A1 cuGraphExecUpdate(a -> b) while a launch is held: tags that ran",
        f"{sorted({t for t, _ in LOG})} (update took {took * 1e3:.1f} ms)")
    LOG.clear()
    ok(cu.cuGraphLaunch(exe, s))
    ok(cu.cuStreamSynchronize(s))
    row("A2 the next launch", f"{sorted({t for t, _ in LOG})}")


def in_flight_host_set() -> None:
    s = ok(cu.cuStreamCreate(1))
    g_a, _, nodes = tagged("a")
    exe = ok(cu.cuGraphInstantiate(g_a, 0))
    CALLS[99] = lambda: LOG.append(("set", 0))
    LOG.clear()
    took = held_launch(exe, s, lambda: ok(cu.cuGraphExecHostNodeSetParams(exe, nodes[0], host_params(99))))
    row("A3 cuGraphExecHostNodeSetParams while a launch is held: what ran",
        f"{sorted(LOG)} (set took {took * 1e3:.1f} ms)")


def kernel_params(ptr: int, value: int):
    args = (ctypes.c_uint64 * 1)(ptr), (ctypes.c_int * 1)(value)
    pointers = (ctypes.c_void_p * 2)(*[ctypes.addressof(a) for a in args])
    p = cu.CUDA_KERNEL_NODE_PARAMS()
    p.func, p.extra = PUT, 0
    p.gridDimX, p.gridDimY, p.gridDimZ = 1, 1, 1
    p.blockDimX, p.blockDimY, p.blockDimZ = 32, 1, 1
    p.sharedMemBytes = 0
    p.kernelParams = ctypes.addressof(pointers)
    return p, (args, pointers)  # the second keeps the arguments alive while the first is used


def in_flight_kernel_set() -> None:
    s = ok(cu.cuStreamCreate(1))
    buf = ok(cu.cuMemAlloc(128))
    g = ok(cu.cuGraphCreate(0))
    first = ok(cu.cuGraphAddHostNode(g, [], 0, host_params(1)))
    old, _old_keep = kernel_params(int(buf), 1)
    node = ok(cu.cuGraphAddKernelNode(g, [first], 1, old))
    exe = ok(cu.cuGraphInstantiate(g, 0))
    new, _keep = kernel_params(int(buf), 2)
    took = held_launch(exe, s, lambda: ok(cu.cuGraphExecKernelNodeSetParams(exe, node, new)))
    out = np.zeros(32, np.int32)
    ok(cu.cuMemcpyDtoH(out.ctypes.data, buf, 128))
    row("A4 cuGraphExecKernelNodeSetParams(v=2) while a launch (v=1) is held: value written",
        f"{out[0]} (set took {took * 1e3:.1f} ms)")


def launches_on_two_streams() -> None:
    """One executable graph launched on two streams: does the second wait for the first (one at a time)?"""
    s1, s2 = ok(cu.cuStreamCreate(1)), ok(cu.cuStreamCreate(1))
    g_a, _, _ = tagged("a", 1)
    exe = ok(cu.cuGraphInstantiate(g_a, 0))
    GATE_ENTERED.clear()
    GATE_OPEN.clear()
    LOG.clear()
    ok(cu.cuGraphLaunch(exe, s1))
    GATE_ENTERED.wait(10)
    GATE_ENTERED.clear()
    ok(cu.cuGraphLaunch(exe, s2))
    second_entered = GATE_ENTERED.wait(1.0)  # the second launch's gate, while the first is held
    GATE_OPEN.set()
    ok(cu.cuCtxSynchronize())
    row("A5 same exec on a second stream while the first launch is held: ran at once?", f"{second_entered}")


def stress_global(seconds: float) -> None:
    """Two threads set a kernel node of one shared exec and launch it, under a lock; two others capture in
    global mode (kernel launches only: nothing a global capture forbids) and destroy what they captured."""
    buf = ok(cu.cuMemAlloc(4 * 32 * 4))
    g = ok(cu.cuGraphCreate(0))
    first, _first_keep = kernel_params(int(buf), 0)
    node = ok(cu.cuGraphAddKernelNode(g, [], 0, first))
    shared = ok(cu.cuGraphInstantiate(g, 0))
    lock = threading.Lock()
    counts = [0] * 4
    failures: list = []
    stop = time.perf_counter() + seconds

    def patcher(t: int) -> None:
        ok(cu.cuCtxSetCurrent(CTX))
        s = ok(cu.cuStreamCreate(1))
        while time.perf_counter() < stop:
            with lock:
                new, _keep = kernel_params(int(buf) + 128 * t, counts[t])
                ok(cu.cuGraphExecKernelNodeSetParams(shared, node, new))
                ok(cu.cuGraphLaunch(shared, s))
            counts[t] += 1

    def capturer(t: int) -> None:
        ok(cu.cuCtxSetCurrent(CTX))
        s = ok(cu.cuStreamCreate(1))
        _params, keep = kernel_params(int(buf) + 128 * t, t)
        while time.perf_counter() < stop:
            ok(cu.cuStreamBeginCapture(s, GLOBAL))
            for _ in range(3):
                ok(cu.cuLaunchKernel(PUT, 1, 1, 1, 32, 1, 1, 0, s, ctypes.addressof(keep[1]), 0))
            ok(cu.cuGraphDestroy(ok(cu.cuStreamEndCapture(s))))
            counts[t] += 1

    def guarded(fn, t: int) -> None:
        try:
            fn(t)
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(repr(exc))

    workers = [threading.Thread(target=guarded, args=(patcher if t < 2 else capturer, t)) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(seconds + 30)
    row(f"A7 stress {seconds:.0f} s: 2 threads patch+launch one exec, 2 capture (global)",
        f"rounds {counts}, failures {failures[:2]}")


def stress(seconds: float) -> None:
    """Threads patch-and-launch one shared exec under a lock (each on its own stream), and between, capture
    (thread_local), instantiate, launch and destroy graphs of their own with graph memory."""
    threads = 4
    buf = ok(cu.cuMemAlloc(4 * 32 * threads))
    g = ok(cu.cuGraphCreate(0))
    first, _first_keep = kernel_params(int(buf), 0)
    node = ok(cu.cuGraphAddKernelNode(g, [], 0, first))
    shared = ok(cu.cuGraphInstantiate(g, 0))
    lock = threading.Lock()
    counts = [0] * threads
    failures: list = []
    stop = time.perf_counter() + seconds

    def work(t: int) -> None:
        try:
            ok(cu.cuCtxSetCurrent(CTX))
            s = ok(cu.cuStreamCreate(1))
            while time.perf_counter() < stop:
                with lock:
                    new, _keep = kernel_params(int(buf) + 128 * t, t)
                    ok(cu.cuGraphExecKernelNodeSetParams(shared, node, new))
                    ok(cu.cuGraphLaunch(shared, s))
                ok(cu.cuStreamBeginCapture(s, THREAD_LOCAL))
                tmp = ok(cu.cuMemAllocAsync(128, s))
                _params, keep = kernel_params(int(tmp), t)
                ok(cu.cuLaunchKernel(PUT, 1, 1, 1, 32, 1, 1, 0, s, ctypes.addressof(keep[1]), 0))
                ok(cu.cuMemFreeAsync(tmp, s))
                graph = ok(cu.cuStreamEndCapture(s))
                exe = ok(cu.cuGraphInstantiate(graph, int(
                    cu.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)))
                ok(cu.cuGraphLaunch(exe, s))
                ok(cu.cuStreamSynchronize(s))
                ok(cu.cuGraphExecDestroy(exe))
                ok(cu.cuGraphDestroy(graph))
                counts[t] += 1
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(repr(exc))

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(seconds + 30)
    row(f"A6 stress {seconds:.0f} s: {threads} threads patch+launch one exec, capture their own",
        f"rounds {counts}, failures {failures[:2]}")


# B. Which calls another thread's global capture refuses (and whether they invalidate it) -----------------

GLOBAL = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL


def name(err) -> str:
    return "CUDA_SUCCESS" if not err else cu.cuGetErrorName(err)[1].decode()


def under_foreign_capture(what: str, call) -> None:
    """``call()`` (returning a CUresult) in this thread while a worker thread holds a global capture open."""
    began, release, ended = threading.Event(), threading.Event(), []

    def worker() -> None:
        ok(cu.cuCtxSetCurrent(CTX))
        s = ok(cu.cuStreamCreate(1))
        ok(cu.cuStreamBeginCapture(s, GLOBAL))
        ok(cu.cuMemsetD32Async(SCRATCH, 1, 4, s))
        began.set()
        release.wait(10)
        err, graph = cu.cuStreamEndCapture(s)
        ended.append(name(err))
        if not err:
            ok(cu.cuGraphDestroy(graph))

    thread = threading.Thread(target=worker)
    thread.start()
    began.wait(10)
    try:
        got = call()
        got = name(got[0] if isinstance(got, tuple) else got)
    except Exception as exc:  # noqa: BLE001 - reported
        got = f"EXCEPTION {exc}"
    release.set()
    thread.join(20)
    row(f"B {what}", f"{got}; the capture's end: {ended[0] if ended else 'never'}")


SCRATCH = ok(cu.cuMemAlloc(1 << 16))


def small_graph(memory: bool = False):
    g = ok(cu.cuGraphCreate(0))
    if memory:
        p = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
        p.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        p.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        p.poolProps.location.id = 0
        p.bytesize = 1 << 16
        node = ok(cu.cuGraphAddMemAllocNode(g, [], 0, p))
        ok(cu.cuGraphAddMemFreeNode(g, [node], 1, p.dptr))
    else:
        params, _keep = kernel_params(int(SCRATCH), 7)
        ok(cu.cuGraphAddKernelNode(g, [], 0, params))
    return g


def foreign_capture_table() -> None:
    other = ok(cu.cuStreamCreate(1))
    g, g_mem = small_graph(), small_graph(memory=True)
    exe = ok(cu.cuGraphInstantiate(small_graph(), 0))
    node = ok(cu.cuGraphGetNodes(g, 1))[0][0]
    exe_g = ok(cu.cuGraphInstantiate(g, 0))
    new_params, _keep = kernel_params(int(SCRATCH), 9)
    under_foreign_capture("cuGraphInstantiate (a kernel node)", lambda: cu.cuGraphInstantiate(small_graph(), 0))
    under_foreign_capture("cuGraphInstantiate (alloc and free nodes)", lambda: cu.cuGraphInstantiate(g_mem, 0))
    under_foreign_capture("cuGraphExecUpdate", lambda: cu.cuGraphExecUpdate(exe, small_graph()))
    under_foreign_capture("cuGraphExecKernelNodeSetParams",
                          lambda: cu.cuGraphExecKernelNodeSetParams(exe_g, node, new_params))
    under_foreign_capture("cuGraphLaunch (other stream)", lambda: cu.cuGraphLaunch(exe, other))
    under_foreign_capture("cuGraphUpload (other stream)", lambda: cu.cuGraphUpload(exe, other))
    doomed = ok(cu.cuGraphInstantiate(small_graph(), 0))
    under_foreign_capture("cuGraphExecDestroy", lambda: cu.cuGraphExecDestroy(doomed))
    under_foreign_capture("cuGraphCreate + cuGraphAddEmptyNode",
                          lambda: cu.cuGraphAddEmptyNode(ok(cu.cuGraphCreate(0)), [], 0))
    under_foreign_capture("cuGraphClone", lambda: cu.cuGraphClone(g))
    under_foreign_capture("cuGraphDestroy", lambda: cu.cuGraphDestroy(small_graph()))
    under_foreign_capture("cuStreamCreate", lambda: cu.cuStreamCreate(1))
    under_foreign_capture("cuStreamDestroy", lambda: cu.cuStreamDestroy(ok(cu.cuStreamCreate(1))))
    under_foreign_capture("cuEventCreate", lambda: cu.cuEventCreate(0))
    under_foreign_capture("cuEventRecord (other stream)", lambda: cu.cuEventRecord(ok(cu.cuEventCreate(0)), other))
    under_foreign_capture("cuEventQuery", lambda: cu.cuEventQuery(ok(cu.cuEventCreate(0))))
    under_foreign_capture("cuStreamQuery (other stream)", lambda: cu.cuStreamQuery(other))
    under_foreign_capture("cuStreamSynchronize (other stream)", lambda: cu.cuStreamSynchronize(other))
    under_foreign_capture("cuLaunchKernel (other stream)", lambda: cu.cuLaunchKernel(
        PUT, 1, 1, 1, 32, 1, 1, 0, other, ctypes.addressof(_keep[1]), 0))
    under_foreign_capture("cuMemsetD32Async (other stream)", lambda: cu.cuMemsetD32Async(SCRATCH, 1, 4, other))
    under_foreign_capture("cuMemAllocAsync (other stream)", lambda: cu.cuMemAllocAsync(64, other))
    under_foreign_capture("cuMemAlloc", lambda: cu.cuMemAlloc(64))
    device_block, host_block = ok(cu.cuMemAlloc(64)), ok(cu.cuMemHostAlloc(64, 0))
    host_src = ok(cu.cuMemHostAlloc(64, 0))
    async_block = ok(cu.cuMemAllocAsync(64, other))
    ok(cu.cuStreamSynchronize(other))
    recorded = ok(cu.cuEventCreate(0))
    ok(cu.cuEventRecord(recorded, other))
    ok(cu.cuStreamSynchronize(other))
    under_foreign_capture("cuMemFree", lambda: cu.cuMemFree(device_block))
    under_foreign_capture("cuMemFreeHost", lambda: cu.cuMemFreeHost(host_block))
    under_foreign_capture("cuMemFreeAsync (other stream)", lambda: cu.cuMemFreeAsync(async_block, other))
    under_foreign_capture("cuMemcpyHtoD (pinned)", lambda: cu.cuMemcpyHtoD(SCRATCH, host_src, 64))
    under_foreign_capture("cuMemcpyHtoDAsync (pinned, other stream)",
                          lambda: cu.cuMemcpyHtoDAsync(SCRATCH, host_src, 64, other))
    under_foreign_capture("cuEventSynchronize (recorded before)", lambda: cu.cuEventSynchronize(recorded))
    under_foreign_capture("cuStreamWaitEvent (other stream)", lambda: cu.cuStreamWaitEvent(other, recorded, 0))
    under_foreign_capture("cuLaunchHostFunc (other stream)", lambda: cu.cuLaunchHostFunc(other, HOST_FN, 99))
    under_foreign_capture("cuModuleLoadData", lambda: cu.cuModuleLoadData(cubin))
    under_foreign_capture("cuCtxSynchronize", cu.cuCtxSynchronize)


# C. Calls from a thread with no current context (a new thread): an error to retry on, or a crash? ---------

def no_context_call(api: str) -> None:
    """Make ``api`` from a new thread, on objects made in this one (run in a subprocess: it may crash)."""
    s = ok(cu.cuStreamCreate(1))
    buf = ok(cu.cuMemAlloc(128))
    g = ok(cu.cuGraphCreate(0))
    params, _keep = kernel_params(int(buf), 1)
    node = ok(cu.cuGraphAddKernelNode(g, [], 0, params))
    exe = ok(cu.cuGraphInstantiate(g, 0))
    e = ok(cu.cuEventCreate(0))
    calls = {
        "cuGraphExecKernelNodeSetParams": lambda: cu.cuGraphExecKernelNodeSetParams(exe, node, params),
        "cuGraphExecUpdate": lambda: cu.cuGraphExecUpdate(exe, g),
        "cuGraphNodeSetEnabled": lambda: cu.cuGraphNodeSetEnabled(exe, node, 1),
        "cuGraphLaunch": lambda: cu.cuGraphLaunch(exe, s),
        "cuLaunchKernel": lambda: cu.cuLaunchKernel(PUT, 1, 1, 1, 32, 1, 1, 0, s, ctypes.addressof(_keep[1]), 0),
        "cuMemsetD32Async": lambda: cu.cuMemsetD32Async(buf, 0, 4, s),
        "cuStreamSynchronize": lambda: cu.cuStreamSynchronize(s),
        "cuStreamQuery": lambda: cu.cuStreamQuery(s),
        "cuEventRecord": lambda: cu.cuEventRecord(e, s),
        "cuEventQuery": lambda: cu.cuEventQuery(e),
        "cuStreamWaitEvent": lambda: cu.cuStreamWaitEvent(s, e, 0),
    }
    out: list = []
    thread = threading.Thread(target=lambda: out.append(calls[api]()))
    thread.start()
    thread.join()
    err = out[0][0] if isinstance(out[0], tuple) else out[0]
    print(name(err), flush=True)


def no_context_table() -> None:
    import subprocess
    for api in ("cuGraphExecKernelNodeSetParams", "cuGraphExecUpdate", "cuGraphNodeSetEnabled", "cuGraphLaunch",
                "cuLaunchKernel", "cuMemsetD32Async", "cuStreamSynchronize", "cuStreamQuery", "cuEventRecord",
                "cuEventQuery", "cuStreamWaitEvent"):
        done = subprocess.run([sys.executable, __file__, "--no-context", api], capture_output=True, text=True,
                              timeout=60)
        got = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else f"process died (rc {done.returncode})"
        row(f"C {api} from a thread with no current context", got)


if len(sys.argv) > 2 and sys.argv[1] == "--no-context":
    no_context_call(sys.argv[2])
    sys.exit(0)

for probe in (in_flight_update, in_flight_host_set, in_flight_kernel_set, launches_on_two_streams,
              foreign_capture_table, no_context_table):
    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - a probe reports what the driver said and goes on
        row(probe.__name__, f"EXCEPTION {type(exc).__name__}: {exc}")
stress(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
stress_global(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0)
print("done", flush=True)

"""What page-locking (cuMemHostRegister / cuMemHostUnregister) may do while graphs use host memory: the facts the
host registry (src/gpugraph/backends/_host_registry.py) rests on. Each case prints one line.

- R1: a graph copy node over host memory that spans two registrations (the driver refuses it at add time).
- R2: unregister and register again, over a larger range, the memory a copy node was made over, after the node was
  made and again after the graph was instantiated: does the node still copy the right values at launch?
- R3: inside a stream capture (global and relaxed mode), register new memory, then unregister memory no captured
  node uses, then unregister memory a captured copy node uses and register the larger range: does the capture
  stay valid, and does the captured graph copy the right values?
- R4: does cuMemHostUnregister wait for a copy in flight over the memory (a 1 GiB host-to-device copy)? The
  call's time is printed beside the copy's own.
- R5: after R2's swap, the copy node's parameters set again (cuGraphMemcpyNodeSetParams, the same ones): does the
  graph then copy the right values? R6: the same for an executable graph made before the swap
  (cuGraphExecMemcpyNodeSetParams).
- R7: a copy node naming its host memory by its unified address (CU_MEMORYTYPE_UNIFIED) over two registrations:
  taken, and right?
- R8: two registrations of byte ranges that share a page but not a byte: does the driver take the second, and does a
  copy node inside each copy the right values?
- R9: a captured copy (cuMemcpyHtoDAsync) over two registrations, after a captured host function that fills the
  memory: taken, and right?
- R10: of R8's two byte ranges sharing a page, the first unregistered: is a copy from the second still right?

In R5-R9 a host node (or host function) before the copy fills the memory at each launch: a copy right on every launch
reads the memory at its turn, as page-locked memory is read (pageable memory is staged at a time the driver chooses).

Usage (on a CUDA machine): ``python3 tools/probes/gpu_probe_host_register.py [R1 ... R10]`` (each case in a process
of its own unless named).

Measured on an H100 (driver 580.159.04, 2026-12-07): R1 INVALID_VALUE over two registrations, SUCCESS inside one;
R2 the launch fails with CUDA_ERROR_LAUNCH_FAILED (the node is broken by the swap); R3 every call inside a global
capture STREAM_CAPTURE_UNSUPPORTED, and the capture invalidated; R4 unregistering took 38.7 ms beside a 19.6 ms copy
(it waits); R5, R6 SUCCESS and right on 20/20; R7 INVALID_VALUE over two registrations (pageable memory: taken, right on
0/20); R8 both registrations SUCCESS, right on 20/20 each; R9 the captured copy INVALID_VALUE; R10 right on 20/20.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import time

import numpy as np
from cuda.bindings import driver as cu

PAGE = 4096


def check(result: tuple, what: str) -> object:
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {result[0].name}")
    return result[1] if len(result) > 1 else None


def status(result: tuple) -> str:
    return result[0].name


def page_buffer(pages: int) -> np.ndarray:
    """A page-aligned host buffer of ``pages`` pages (float32), from NumPy's allocator."""
    raw = np.zeros(pages * PAGE + PAGE, np.uint8)
    start = -raw.ctypes.data % PAGE
    return raw[start:start + pages * PAGE].view(np.float32)


def copy_params(dst: int, src: int, nbytes: int, unified: bool = False) -> object:
    """A host -> device copy of ``nbytes`` as CUDA_MEMCPY3D: the host memory named as host memory, or (``unified``)
    by its unified address."""
    p = cu.CUDA_MEMCPY3D()
    if unified:
        p.srcMemoryType, p.srcDevice = cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED, src
    else:
        p.srcMemoryType, p.srcHost = cu.CUmemorytype.CU_MEMORYTYPE_HOST, src
    p.dstMemoryType, p.dstDevice = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, dst
    p.WidthInBytes, p.Height, p.Depth = nbytes, 1, 1
    return p


def copy_node(graph: object, ctx: object, dst: int, src: int, nbytes: int, deps: list,
              unified: bool = False) -> tuple:
    """cuGraphAddMemcpyNode of ``copy_params``: the driver's answer (result, node)."""
    return cu.cuGraphAddMemcpyNode(graph, deps, len(deps), copy_params(dst, src, nbytes, unified), ctx)


_FILL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Filler:
    """A graph host node that fills ``host`` with ``value`` when the graph runs: a copy node after it must read the
    array at its own turn, as page-locked memory is read (pageable memory staged at the driver's time reads the
    value of an earlier launch)."""

    def __init__(self, host: np.ndarray) -> None:
        self.host, self.value = host, 0.0
        self.fn = _FILL(lambda _: self.host.fill(self.value))  # (kept: the driver calls it)

    def add(self, graph: object) -> object:
        p = cu.CUDA_HOST_NODE_PARAMS()
        p.fn, p.userData = cu.CUhostFn(ctypes.cast(self.fn, ctypes.c_void_p).value), 0
        return check(cu.cuGraphAddHostNode(graph, [], 0, p), "host node")


def read_back(dptr: int, count: int) -> np.ndarray:
    out = np.empty(count, np.float32)
    check(cu.cuMemcpyDtoH(out.ctypes.data, dptr, out.nbytes), "cuMemcpyDtoH")
    return out


def launch(graph: object, stream: object) -> None:
    exe = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    check(cu.cuGraphLaunch(exe, stream), "cuGraphLaunch")
    check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    check(cu.cuGraphExecDestroy(exe), "cuGraphExecDestroy")


def r1(ctx: object, dptr: int) -> None:
    host = page_buffer(4)
    a, b = host.ctypes.data, host.ctypes.data + 2 * PAGE
    check(cu.cuMemHostRegister(a, 2 * PAGE, 0), "register first half")
    check(cu.cuMemHostRegister(b, 2 * PAGE, 0), "register second half")
    graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
    print("R1 copy over two registrations:", status(copy_node(graph, ctx, dptr, a, 4 * PAGE, [])))
    print("R1 copy inside the first one:", status(copy_node(graph, ctx, dptr, a, 2 * PAGE, [])))
    check(cu.cuGraphDestroy(graph), "cuGraphDestroy")
    check(cu.cuMemHostUnregister(a), "unregister")
    check(cu.cuMemHostUnregister(b), "unregister")


def r2(ctx: object, stream: object, dptr: int) -> None:
    for when in ("after the node was made", "after the graph was instantiated"):
        host = page_buffer(4)
        base = host.ctypes.data
        check(cu.cuMemHostRegister(base, 2 * PAGE, 0), "register")
        graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
        check(copy_node(graph, ctx, dptr, base, 2 * PAGE, []), "copy node")
        exe = None
        if when.endswith("instantiated"):
            exe = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        check(cu.cuMemHostUnregister(base), "unregister")
        swapped = status(cu.cuMemHostRegister(base, 4 * PAGE, 0))
        right = 0
        for value in range(1, 51):
            host[:] = value
            if exe is None:
                launch(graph, stream)
            else:
                check(cu.cuGraphLaunch(exe, stream), "cuGraphLaunch")
                check(cu.cuStreamSynchronize(stream), "sync")
            right += bool((read_back(dptr, 2 * PAGE // 4) == value).all())
        print(f"R2 registration swapped for a larger one {when}: register {swapped}, right on {right}/50 launches")
        if exe is not None:
            check(cu.cuGraphExecDestroy(exe), "destroy")
        check(cu.cuGraphDestroy(graph), "destroy")
        check(cu.cuMemHostUnregister(base), "unregister")


def r3(ctx: object, stream: object, dptr: int) -> None:
    modes = {"global": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
             "relaxed": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED}
    for name, mode in modes.items():
        used, other, fresh = page_buffer(4), page_buffer(2), page_buffer(2)
        check(cu.cuMemHostRegister(used.ctypes.data, 2 * PAGE, 0), "register used")
        check(cu.cuMemHostRegister(other.ctypes.data, 2 * PAGE, 0), "register other")
        check(cu.cuStreamBeginCapture(stream, mode), "begin capture")
        check(cu.cuMemcpyHtoDAsync(dptr, used.ctypes.data, 2 * PAGE, stream), "captured copy")
        answers = [("register new", status(cu.cuMemHostRegister(fresh.ctypes.data, 2 * PAGE, 0))),
                   ("unregister unused", status(cu.cuMemHostUnregister(other.ctypes.data))),
                   ("unregister used", status(cu.cuMemHostUnregister(used.ctypes.data))),
                   ("register larger", status(cu.cuMemHostRegister(used.ctypes.data, 4 * PAGE, 0)))]
        capturing = check(cu.cuStreamIsCapturing(stream), "is capturing")
        ended = cu.cuStreamEndCapture(stream)
        right = "-"
        if ended[0] == cu.CUresult.CUDA_SUCCESS:
            count = 0
            for value in range(1, 21):
                used[:] = value
                launch(ended[1], stream)
                count += bool((read_back(dptr, 2 * PAGE // 4) == value).all())
            right = f"{count}/20"
            check(cu.cuGraphDestroy(ended[1]), "destroy")
        print(f"R3 {name} capture: " + ", ".join(f"{what} {answer}" for what, answer in answers)
              + f"; still capturing: {capturing.name}; end capture {ended[0].name}; right on {right} launches")
        for buffer in (used, fresh, other):
            cu.cuMemHostUnregister(buffer.ctypes.data)
        cu.cuCtxSynchronize()  # (a failed capture's errors are sticky on nothing; clear the stream's state)


def r4(stream: object) -> None:
    nbytes = 1 << 30
    host = page_buffer(nbytes // PAGE)
    dptr = check(cu.cuMemAlloc(nbytes), "cuMemAlloc")
    check(cu.cuMemHostRegister(host.ctypes.data, nbytes, 0), "register")
    start = time.perf_counter()
    check(cu.cuMemcpyHtoDAsync(dptr, host.ctypes.data, nbytes, stream), "copy")
    check(cu.cuStreamSynchronize(stream), "sync")
    alone = time.perf_counter() - start
    start = time.perf_counter()
    check(cu.cuMemcpyHtoDAsync(dptr, host.ctypes.data, nbytes, stream), "copy")
    queued = time.perf_counter() - start
    check(cu.cuMemHostUnregister(host.ctypes.data), "unregister")
    unregister = time.perf_counter() - start - queued
    done = status(cu.cuStreamQuery(stream))
    check(cu.cuStreamSynchronize(stream), "sync")
    print(f"R4 a 1 GiB copy takes {alone * 1e3:.1f} ms; unregistering its memory while it runs took "
          f"{unregister * 1e3:.1f} ms (the stream then: {done})")
    check(cu.cuMemFree(dptr), "free")


def _swapped_node(ctx: object, dptr: int) -> tuple[Filler, object, object, object]:
    """A graph of a host node filling a buffer and a copy node after it over a 2-page registration of the buffer:
    (its filler, graph, copy node, the node's parameters). The caller swaps the registration."""
    filler = Filler(page_buffer(4))
    base = filler.host.ctypes.data
    check(cu.cuMemHostRegister(base, 2 * PAGE, 0), "register")
    graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
    fill = filler.add(graph)
    p = copy_params(dptr, base, 2 * PAGE)
    node = check(cu.cuGraphAddMemcpyNode(graph, [fill], 1, p, ctx), "copy node")
    return filler, graph, node, p


def _right(filler: Filler, dptr: int, run: object, count: int = 20, floats: int = 2 * PAGE // 4) -> str:
    """How many of ``count`` runs of ``run`` copied the values its host node wrote (``floats`` of them) to
    ``dptr``; the array holds the old value before each run."""
    right = 0
    for value in range(1, count + 1):
        filler.host[:], filler.value = -value, float(value)
        run()
        right += bool((read_back(dptr, floats) == value).all())
    return f"{right}/{count}"


def r5(ctx: object, stream: object, dptr: int) -> None:
    filler, graph, node, p = _swapped_node(ctx, dptr)
    print(f"R5 before the swap: right on {_right(filler, dptr, lambda: launch(graph, stream))} launches")
    check(cu.cuMemHostUnregister(filler.host.ctypes.data), "unregister")
    check(cu.cuMemHostRegister(filler.host.ctypes.data, 4 * PAGE, 0), "register larger")
    answer = status(cu.cuGraphMemcpyNodeSetParams(node, p))
    print(f"R5 the node's parameters set again after the swap: {answer}; right on "
          f"{_right(filler, dptr, lambda: launch(graph, stream))} launches")


def r6(ctx: object, stream: object, dptr: int) -> None:
    filler, graph, node, p = _swapped_node(ctx, dptr)
    exe = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    check(cu.cuMemHostUnregister(filler.host.ctypes.data), "unregister")
    check(cu.cuMemHostRegister(filler.host.ctypes.data, 4 * PAGE, 0), "register larger")
    answer = status(cu.cuGraphExecMemcpyNodeSetParams(exe, node, p, ctx))

    def run() -> None:
        check(cu.cuGraphLaunch(exe, stream), "cuGraphLaunch")
        check(cu.cuStreamSynchronize(stream), "sync")
    print(f"R6 the executable graph's node set again after the swap: {answer}; right on {_right(filler, dptr, run)} "
          f"launches")


def r7(ctx: object, stream: object, dptr: int) -> None:
    for pages in (2, 0):  # (two registrations; none: pageable memory, for comparison)
        filler = Filler(page_buffer(4))
        a, b = filler.host.ctypes.data, filler.host.ctypes.data + 2 * PAGE
        if pages:
            check(cu.cuMemHostRegister(a, 2 * PAGE, 0), "register first half")
            check(cu.cuMemHostRegister(b, 2 * PAGE, 0), "register second half")
        graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
        made = copy_node(graph, ctx, dptr, a, 4 * PAGE, [filler.add(graph)], unified=True)
        right = "-" if made[0] != cu.CUresult.CUDA_SUCCESS else _right(
            filler, dptr, lambda graph=graph: launch(graph, stream), floats=4 * PAGE // 4)
        where = "over two registrations" if pages else "of pageable memory"
        print(f"R7 a unified-address copy after a host node {where}: {made[0].name}; right on {right} launches")


def r8(ctx: object, stream: object, dptr: int) -> None:
    filler = Filler(page_buffer(1))
    base = filler.host.ctypes.data
    first = status(cu.cuMemHostRegister(base, 1024, 0))
    second = status(cu.cuMemHostRegister(base + 2048, 1024, 0))
    answers = []
    for offset in (0, 2048):
        graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
        made = copy_node(graph, ctx, dptr, base + offset, 1024, [filler.add(graph)])
        count = "-" if made[0] != cu.CUresult.CUDA_SUCCESS else _right(
            filler, dptr, lambda graph=graph: launch(graph, stream), floats=256)
        answers.append(f"copy at +{offset}: {made[0].name}, right on {count}")
    print(f"R8 byte ranges sharing a page: first {first}, second {second}; " + "; ".join(answers))


def r9(stream: object, dptr: int) -> None:
    filler = Filler(page_buffer(4))
    a = filler.host.ctypes.data
    check(cu.cuMemHostRegister(a, 2 * PAGE, 0), "register first half")
    check(cu.cuMemHostRegister(a + 2 * PAGE, 2 * PAGE, 0), "register second half")
    check(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL), "begin capture")
    fn = cu.CUhostFn(ctypes.cast(filler.fn, ctypes.c_void_p).value)
    check(cu.cuLaunchHostFunc(stream, fn, 0), "captured host function")
    copied = status(cu.cuMemcpyHtoDAsync(dptr, a, 4 * PAGE, stream))
    ended = cu.cuStreamEndCapture(stream)
    right = "-"
    if ended[0] == cu.CUresult.CUDA_SUCCESS and copied == "CUDA_SUCCESS":
        right = _right(filler, dptr, lambda: launch(ended[1], stream), floats=4 * PAGE // 4)
    print(f"R9 a captured copy over two registrations after a captured host function: copy {copied}, end capture "
          f"{ended[0].name}; right on {right} launches")


def r10(ctx: object, stream: object, dptr: int) -> None:
    filler = Filler(page_buffer(1))
    base = filler.host.ctypes.data
    check(cu.cuMemHostRegister(base, 1024, 0), "register the first range")
    check(cu.cuMemHostRegister(base + 2048, 1024, 0), "register the second range")
    graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
    check(copy_node(graph, ctx, dptr, base + 2048, 1024, [filler.add(graph)]), "copy node")
    exe = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    unregistered = status(cu.cuMemHostUnregister(base))

    def run() -> None:
        check(cu.cuGraphLaunch(exe, stream), "cuGraphLaunch")
        check(cu.cuStreamSynchronize(stream), "sync")
    print(f"R10 the first of two byte ranges sharing a page unregistered ({unregistered}): the second's copy right on "
          f"{_right(filler, dptr, run, floats=256)} launches")


def main() -> None:
    """Each case in a process of its own (a case that breaks a copy ends its context), or the cases named."""
    names = sys.argv[1:]
    if not names:
        for name in ("R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10"):
            subprocess.run([sys.executable, __file__, name], check=False)
        return
    check(cu.cuInit(0), "cuInit")
    device = check(cu.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(cu.cuDevicePrimaryCtxRetain(device), "retain")
    check(cu.cuCtxSetCurrent(ctx), "set current")
    stream = check(cu.cuStreamCreate(1), "cuStreamCreate")
    dptr = check(cu.cuMemAlloc(4 * PAGE), "cuMemAlloc")
    cases = {"R1": lambda: r1(ctx, dptr), "R2": lambda: r2(ctx, stream, dptr), "R3": lambda: r3(ctx, stream, dptr),
             "R4": lambda: r4(stream), "R5": lambda: r5(ctx, stream, dptr), "R6": lambda: r6(ctx, stream, dptr),
             "R7": lambda: r7(ctx, stream, dptr), "R8": lambda: r8(ctx, stream, dptr), "R9": lambda: r9(stream, dptr),
             "R10": lambda: r10(ctx, stream, dptr)}
    for name in names:
        try:
            cases[name]()
        except RuntimeError as error:
            print(f"{name} failed: {error}")


if __name__ == "__main__":
    main()

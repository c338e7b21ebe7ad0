"""The largest SWITCH conditional node the CUDA driver makes: cuGraphAddNode with a CUDA_CONDITIONAL_NODE_PARAMS of
type CU_GRAPH_COND_TYPE_SWITCH and a growing ``size`` (CUDA documents no maximum: "any value greater than zero"),
each in a graph of its own that is then instantiated. Sizes double from 1 until the driver refuses one, a step
takes longer than --seconds, or --top is passed; a refusal is then bisected. It prints each size's results and
times, and the largest size made and instantiated, for gpugraph's MAX_SWITCH_BODIES
(src/gpugraph/_graph_conditional.py). On an H100 (driver 580.159.04, 2026-12-07, --seconds 5) the driver refused no
size up to 4,194,304 bodies (7.7 s to make and instantiate that one).

Usage (on a CUDA machine with a 12.8 driver or newer):
``python3 tools/probes/gpu_probe_switch_limit.py [--top N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import time

from cuda.bindings import driver as cu


def check(result: tuple, what: str) -> object:
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {result[0].name}")
    return result[1] if len(result) > 1 else None


def try_size(context: object, size: int) -> tuple[str, float]:
    """Make a graph with one SWITCH node of ``size`` bodies and instantiate it: what the driver answered (OK, or
    the call and its error) and the seconds it took."""
    start = time.perf_counter()
    graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
    try:
        handle = check(cu.cuGraphConditionalHandleCreate(graph, context, 0, 0), "cuGraphConditionalHandleCreate")
        params = cu.CUgraphNodeParams()
        params.type = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = handle
        params.conditional.type = cu.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_SWITCH
        params.conditional.size = size
        params.conditional.ctx = context
        result = cu.cuGraphAddNode(graph, None, None, 0, params)
        if result[0] != cu.CUresult.CUDA_SUCCESS:
            return f"cuGraphAddNode: {result[0].name}", time.perf_counter() - start
        result = cu.cuGraphInstantiate(graph, 0)
        if result[0] != cu.CUresult.CUDA_SUCCESS:
            return f"cuGraphInstantiate: {result[0].name}", time.perf_counter() - start
        check(cu.cuGraphExecDestroy(result[1]), "cuGraphExecDestroy")
        return "OK", time.perf_counter() - start
    finally:
        check(cu.cuGraphDestroy(graph), "cuGraphDestroy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=1 << 24, help="the largest size tried (default 16777216)")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop doubling after a step this long")
    args = parser.parse_args()
    check(cu.cuInit(0), "cuInit")
    print("driver", check(cu.cuDriverGetVersion(), "cuDriverGetVersion"))
    device = check(cu.cuDeviceGet(0), "cuDeviceGet")
    context = check(cu.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    made, refused, size = 0, None, 1
    while size <= args.top:
        answer, seconds = try_size(context, size)
        print(f"size {size}: {answer} ({seconds:.3f} s)", flush=True)
        if answer != "OK":
            refused = size
            break
        made = size
        if seconds > args.seconds:
            print(f"stopped: size {size} took over {args.seconds:g} s")
            break
        size *= 2
    while refused is not None and refused - made > 1:  # the driver's limit lies between
        middle = (made + refused) // 2
        answer, seconds = try_size(context, middle)
        print(f"size {middle}: {answer} ({seconds:.3f} s)", flush=True)
        made, refused = (middle, refused) if answer == "OK" else (made, middle)
    print(f"largest SWITCH node made and instantiated: {made} bodies"
          + (f"; refused from {refused}" if refused is not None else " (no refusal up to there)"))
    check(cu.cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease")


if __name__ == "__main__":
    main()

"""The parameter records that adding and changing nodes make from a caller's arguments, checked.

``Graph.add_*``, the graph's setters (``Graph.set_*``) and an executable graph's (``GraphExec.set_*``) take the
same arguments for a node kind and apply the same rules to them: each rule is written here once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._device_like import DeviceLike
from ._event import Event
from ._graph_reads import GraphFields, condition_values
from ._kernel import Kernel, check_shared_mem, launch_dims
from ._memory import copy_box, host_pins, memcpy_nbytes, memset_pattern, memset_plane
from ._nodes import EventRecordParams, EventWaitParams, HostParams, KernelParams, MemcpyParams, MemsetParams, NodeKind
from ._placement import check_same_backend, check_same_device, check_shared, load_kernel


def kernel_record(old: KernelParams, args: tuple, grid: Any, block: Any, shared_mem: int | None, kernel: object,
                  device: DeviceLike, graph: GraphFields[Any], what: str) -> KernelParams:
    """``old`` with what a kernel-node setter changes: new arguments (none: keep them), launch shape, shared memory
    or kernel (a new kernel checks the arguments it is given, or the current ones). ``device``: the node's Device;
    ``graph``: the graph whose Conditions the arguments may name. The setter binds the untyped Params among the
    arguments once it has set the record (``Kernel.bind_params``)."""
    kernel = old.kernel if kernel is None else kernel
    if type(kernel) is not Kernel:
        raise TypeError(f"{what}(kernel): expected a Kernel, got {type(kernel).__name__}")
    if grid is None and block is None:
        new_grid, new_block = old.grid, old.block
    else:
        new_grid, new_block = launch_dims(old.grid if grid is None else grid, old.block if block is None else block)
    shared = old.shared_mem if shared_mem is None else check_shared_mem(shared_mem)
    if kernel is not old.kernel:
        load_kernel(device, kernel)
        args = kernel.convert_args(args or old.args, device, typed=True, bind=False)
    elif args:
        args = kernel.convert_args(args, device, typed=True, bind=False)
    else:
        args = old.args
    args = condition_values(graph, args, what, kernel)  # (as Graph.add_kernel takes them)
    check_shared(device, kernel, shared)
    return KernelParams(kernel, new_grid, new_block, shared, args, old.device)


def memcpy_record(device: DeviceLike, dst: Any, src: Any, nbytes: int | None, what: str, *, shape: Any = None,
                  dst_origin: Any = None, src_origin: Any = None) -> MemcpyParams:
    """A copy node's record (any direction; Arrays of ``device``'s backend or NumPy arrays, which it holds page-locked:
    ``_memory.pin_host``): ``nbytes`` from the operands' starts, or (``shape``) the box ``_memory.copy_box`` checks."""
    box = None
    if shape is not None or dst_origin is not None or src_origin is not None:
        nbytes, box = copy_box(dst, src, nbytes, shape, dst_origin, src_origin, what)
    else:
        nbytes = memcpy_nbytes(dst, src, nbytes, what, node=True)
    check_same_backend(device, dst, f"{what}(dst)")
    check_same_backend(device, src, f"{what}(src)")
    return MemcpyParams(dst, src, nbytes, box, host_pins(device, dst, src, nbytes, box, what))


def memset_record(device: DeviceLike, dst: Any, value: Any, count: int | None, what: str, *, shape: Any = None,
                  origin: Any = None) -> MemsetParams:
    """A memset node's record: ``count`` elements (default: all) of ``dst`` set to ``value``, or (``shape``) the 2-D
    box ``_memory.memset_plane`` checks."""
    check_same_backend(device, dst, f"{what}(dst)")  # (the node runs on dst's device)
    if shape is not None or origin is not None:
        pattern, element_size, row, pitch, rows, offset = memset_plane(dst, value, count, shape, origin, what)
        return MemsetParams(dst, value, pattern, element_size, row, pitch, rows, offset)
    pattern, element_size, units = memset_pattern(dst, value, count, what, node=True)
    return MemsetParams(dst, value, pattern, element_size, units)


def host_record(fn: Callable[..., Any], args: tuple, what: str) -> HostParams:
    """A host node's record: ``fn(*args)`` on the host."""
    if not callable(fn):
        raise TypeError(f"{what}(fn): expected a callable, got {type(fn).__name__}")
    return HostParams(fn, args)


def event_record(device: DeviceLike, kind: NodeKind, event: object, what: str) -> EventRecordParams | EventWaitParams:
    """An event-record or event-wait node's record (``kind``) of a graph on ``device``: it records an event of its
    own device, and may wait for one of any device of its backend."""
    if not isinstance(event, Event):
        raise TypeError(f"{what}(event): expected an Event, got {type(event).__name__}")
    if kind is NodeKind.EVENT_RECORD:
        check_same_device(device, event, f"{what}(event)")
        return EventRecordParams(event)
    check_same_backend(device, event, f"{what}(event)")
    return EventWaitParams(event)

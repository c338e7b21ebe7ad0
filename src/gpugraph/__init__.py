"""gpugraph: HIP/CUDA graphs for Python.

Build graphs by stream capture or explicitly, instantiate them once and launch them with one call, on
CUDA (cuda-bindings) or on the CPU reference backend that applies the same rules without a GPU.
"""

from . import _core

_core.use_chosen()  # first: whether each core module loads compiled or plain, before any is imported

from ._attributes import (
    ACCESS_PROPERTIES,
    MAX_CLUSTER_BLOCKS,
    MEM_SYNC_DOMAINS,
    AccessPolicyWindow,
    KernelAttributes,
)
from ._capture import Capture
from ._capture_rules import exchange_capture_mode, thread_capture_mode
from ._captured import CapturedFunction, CapturedStats, captured
from ._collectives import (
    Communicator,
    UniqueId,
    collective_group,
    communicator,
    communicators,
    unique_id,
)
from ._conditions import Condition
from ._current import current_stream, use_stream
from ._device import Device, GraphMemoryUsage
from ._dot import DOT_FLAGS
from ._errors import (
    BackendError,
    BackendUnavailableError,
    CaptureError,
    CollectiveError,
    GpuGraphError,
    GraphError,
    GraphInstantiateError,
    GraphUpdateError,
    HazardError,
    KernelCompileError,
    StreamErrors,
)
from ._event import Event
from ._exec import GraphExec
from ._graph import Graph
from ._graph_conditional import MAX_SWITCH_BODIES
from ._graph_node import Node
from ._hazards import Hazard
from ._host_memory import HostRegistration
from ._instantiate import INSTANTIATE_FLAGS
from ._interop import from_cuda_array_interface, from_dlpack
from ._kernel import Kernel, LaunchConfig, Module
from ._memory import Array
from ._nodes import (
    DEPENDENCY_KINDS,
    AllocParams,
    ChildGraphParams,
    ConditionalParams,
    EmptyParams,
    EventRecordParams,
    EventWaitParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemOpsParams,
    MemsetParams,
    NodeKind,
    SemaphoreSignalParams,
    SemaphoreWaitParams,
    WaitValue,
    WriteValue,
)
from ._params import Param
from ._properties import PROPERTIES, SCHEDULES
from ._semaphores import EmulatedSemaphore, ExternalSemaphore
from ._stream import Stream
from ._timeline import Timeline, TimelineRow, timeline
from ._user_objects import UserObject
from .backends import available_backends

__version__ = "0.1.0"

__all__ = [
    "ACCESS_PROPERTIES",
    "DEPENDENCY_KINDS",
    "DOT_FLAGS",
    "INSTANTIATE_FLAGS",
    "MAX_CLUSTER_BLOCKS",
    "MAX_SWITCH_BODIES",
    "MEM_SYNC_DOMAINS",
    "PROPERTIES",
    "SCHEDULES",
    "AccessPolicyWindow",
    "AllocParams",
    "Array",
    "BackendError",
    "BackendUnavailableError",
    "Capture",
    "CaptureError",
    "CapturedFunction",
    "CapturedStats",
    "ChildGraphParams",
    "CollectiveError",
    "Communicator",
    "Condition",
    "ConditionalParams",
    "Device",
    "EmptyParams",
    "EmulatedSemaphore",
    "Event",
    "EventRecordParams",
    "EventWaitParams",
    "ExternalSemaphore",
    "FreeParams",
    "GpuGraphError",
    "Graph",
    "GraphError",
    "GraphExec",
    "GraphInstantiateError",
    "GraphMemoryUsage",
    "GraphUpdateError",
    "Hazard",
    "HazardError",
    "HostParams",
    "HostRegistration",
    "Kernel",
    "KernelAttributes",
    "KernelCompileError",
    "KernelParams",
    "LaunchConfig",
    "MemOpsParams",
    "MemcpyParams",
    "MemsetParams",
    "Module",
    "Node",
    "NodeKind",
    "Param",
    "SemaphoreSignalParams",
    "SemaphoreWaitParams",
    "Stream",
    "StreamErrors",
    "Timeline",
    "TimelineRow",
    "UniqueId",
    "UserObject",
    "WaitValue",
    "WriteValue",
    "available_backends",
    "captured",
    "collective_group",
    "communicator",
    "communicators",
    "current_stream",
    "exchange_capture_mode",
    "from_cuda_array_interface",
    "from_dlpack",
    "thread_capture_mode",
    "timeline",
    "unique_id",
    "use_stream",
]

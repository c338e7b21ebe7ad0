"""The CUDA backend's driver symbol table (see backends._symbols): ``drv.graph_add_kernel_node`` is
cuda-bindings' ``cuda.bindings.driver.cuGraphAddKernelNode``, and so on for every driver function the backend
calls; and each one's HIP twin (``HIP``), the names a HIP backend's table over hip-python takes
(hipGraphAddKernelNode, hipModuleLaunchKernel for ``launch_kernel``, hipMalloc for ``mem_alloc``, ...).

Only functions: the driver's types, structs and enums (CUresult, CUDA_MEMCPY3D, CUgraphNodeType, ...) are
the vendor's own, used where the backend fills them (the node kinds in _nodes build the node structs).
"""

from __future__ import annotations

from cuda.bindings import driver as cu

from .._symbols import symbol_table

# Generic name -> cuda-bindings name: the CUDA name in snake case, without the ``cu``.
CUDA = {
    # Errors, devices and contexts
    "get_error_name": "cuGetErrorName",
    "get_error_string": "cuGetErrorString",
    "device_get": "cuDeviceGet",
    "device_get_attribute": "cuDeviceGetAttribute",
    "device_get_name": "cuDeviceGetName",
    "device_total_mem": "cuDeviceTotalMem",
    "device_primary_ctx_get_state": "cuDevicePrimaryCtxGetState",
    "device_primary_ctx_set_flags": "cuDevicePrimaryCtxSetFlags",
    "device_primary_ctx_retain": "cuDevicePrimaryCtxRetain",
    "ctx_set_current": "cuCtxSetCurrent",
    "ctx_get_current": "cuCtxGetCurrent",
    "ctx_synchronize": "cuCtxSynchronize",
    "device_can_access_peer": "cuDeviceCanAccessPeer",
    "ctx_enable_peer_access": "cuCtxEnablePeerAccess",
    "device_get_mem_pool": "cuDeviceGetMemPool",
    "mem_pool_set_access": "cuMemPoolSetAccess",
    # Memory
    "mem_alloc": "cuMemAlloc",
    "mem_free": "cuMemFree",
    "mem_alloc_async": "cuMemAllocAsync",
    "mem_free_async": "cuMemFreeAsync",
    "mem_host_alloc": "cuMemHostAlloc",
    "mem_free_host": "cuMemFreeHost",
    "mem_host_register": "cuMemHostRegister",
    "mem_host_unregister": "cuMemHostUnregister",
    "mem_host_get_device_pointer": "cuMemHostGetDevicePointer",
    "memcpy_async": "cuMemcpyAsync",
    "memset_d8_async": "cuMemsetD8Async",
    "memset_d16_async": "cuMemsetD16Async",
    "memset_d32_async": "cuMemsetD32Async",
    "memcpy3d_async": "cuMemcpy3DAsync",
    "memset_d2d8_async": "cuMemsetD2D8Async",
    "memset_d2d16_async": "cuMemsetD2D16Async",
    "memset_d2d32_async": "cuMemsetD2D32Async",
    "pointer_get_attribute": "cuPointerGetAttribute",
    "device_get_graph_mem_attribute": "cuDeviceGetGraphMemAttribute",
    "device_graph_mem_trim": "cuDeviceGraphMemTrim",
    "device_set_graph_mem_attribute": "cuDeviceSetGraphMemAttribute",
    # External semaphores
    "import_external_semaphore": "cuImportExternalSemaphore",
    "destroy_external_semaphore": "cuDestroyExternalSemaphore",
    "signal_external_semaphores_async": "cuSignalExternalSemaphoresAsync",
    "wait_external_semaphores_async": "cuWaitExternalSemaphoresAsync",
    # Memory operations
    "stream_wait_value32": "cuStreamWaitValue32",
    "stream_wait_value64": "cuStreamWaitValue64",
    "stream_write_value32": "cuStreamWriteValue32",
    "stream_write_value64": "cuStreamWriteValue64",
    # Modules and kernels
    "module_load_data": "cuModuleLoadData",
    "module_unload": "cuModuleUnload",
    "module_get_function": "cuModuleGetFunction",
    "module_get_function_count": "cuModuleGetFunctionCount",  # CUDA 12.4, and the one below
    "module_enumerate_functions": "cuModuleEnumerateFunctions",
    "module_get_global": "cuModuleGetGlobal",
    "func_get_name": "cuFuncGetName",
    "func_get_module": "cuFuncGetModule",
    "func_get_param_info": "cuFuncGetParamInfo",  # CUDA 12.4
    "launch_kernel": "cuLaunchKernel",
    "launch_host_func": "cuLaunchHostFunc",
    # Streams and events
    "stream_create_with_priority": "cuStreamCreateWithPriority",
    "stream_destroy": "cuStreamDestroy",
    "stream_get_device": "cuStreamGetDevice",
    "stream_get_flags": "cuStreamGetFlags",
    "stream_get_priority": "cuStreamGetPriority",
    "stream_synchronize": "cuStreamSynchronize",
    "stream_query": "cuStreamQuery",
    "stream_wait_event": "cuStreamWaitEvent",
    "event_create": "cuEventCreate",
    "event_destroy": "cuEventDestroy",
    "event_record": "cuEventRecord",
    "event_synchronize": "cuEventSynchronize",
    "event_query": "cuEventQuery",
    "event_elapsed_time": "cuEventElapsedTime",
    # Capture
    "stream_begin_capture": "cuStreamBeginCapture",
    "stream_begin_capture_to_graph": "cuStreamBeginCaptureToGraph",
    "stream_end_capture": "cuStreamEndCapture",
    "stream_is_capturing": "cuStreamIsCapturing",
    "stream_get_capture_info": "cuStreamGetCaptureInfo",
    "thread_exchange_stream_capture_mode": "cuThreadExchangeStreamCaptureMode",
    "stream_update_capture_dependencies": "cuStreamUpdateCaptureDependencies",
    # Graphs
    "graph_create": "cuGraphCreate",
    "graph_destroy": "cuGraphDestroy",
    "graph_clone": "cuGraphClone",
    "graph_get_nodes": "cuGraphGetNodes",
    "graph_get_edges": "cuGraphGetEdges",
    "graph_node_get_dependencies": "cuGraphNodeGetDependencies",
    "graph_get_id": "cuGraphGetId",  # CUDA 13.1, and the three below
    "graph_exec_get_id": "cuGraphExecGetId",
    "graph_node_get_local_id": "cuGraphNodeGetLocalId",
    "graph_node_get_tools_id": "cuGraphNodeGetToolsId",
    "graph_add_dependencies": "cuGraphAddDependencies",
    "graph_remove_dependencies": "cuGraphRemoveDependencies",
    "graph_destroy_node": "cuGraphDestroyNode",
    "graph_node_get_type": "cuGraphNodeGetType",
    "user_object_create": "cuUserObjectCreate",
    "user_object_retain": "cuUserObjectRetain",
    "user_object_release": "cuUserObjectRelease",
    "graph_retain_user_object": "cuGraphRetainUserObject",
    "graph_release_user_object": "cuGraphReleaseUserObject",
    # Nodes: add, read back
    "graph_add_kernel_node": "cuGraphAddKernelNode",
    "graph_add_memcpy_node": "cuGraphAddMemcpyNode",
    "graph_add_memset_node": "cuGraphAddMemsetNode",
    "graph_add_host_node": "cuGraphAddHostNode",
    "graph_add_empty_node": "cuGraphAddEmptyNode",
    "graph_add_child_graph_node": "cuGraphAddChildGraphNode",
    "graph_add_event_record_node": "cuGraphAddEventRecordNode",
    "graph_add_event_wait_node": "cuGraphAddEventWaitNode",
    "graph_add_mem_alloc_node": "cuGraphAddMemAllocNode",
    "graph_add_mem_free_node": "cuGraphAddMemFreeNode",
    "graph_add_external_semaphores_signal_node": "cuGraphAddExternalSemaphoresSignalNode",
    "graph_add_batch_mem_op_node": "cuGraphAddBatchMemOpNode",
    "graph_batch_mem_op_node_get_params": "cuGraphBatchMemOpNodeGetParams",
    "graph_batch_mem_op_node_set_params": "cuGraphBatchMemOpNodeSetParams",
    "graph_add_external_semaphores_wait_node": "cuGraphAddExternalSemaphoresWaitNode",
    "graph_external_semaphores_signal_node_get_params": "cuGraphExternalSemaphoresSignalNodeGetParams",
    "graph_external_semaphores_wait_node_get_params": "cuGraphExternalSemaphoresWaitNodeGetParams",
    "graph_external_semaphores_signal_node_set_params": "cuGraphExternalSemaphoresSignalNodeSetParams",
    "graph_external_semaphores_wait_node_set_params": "cuGraphExternalSemaphoresWaitNodeSetParams",
    "graph_kernel_node_get_params": "cuGraphKernelNodeGetParams",
    "graph_memcpy_node_get_params": "cuGraphMemcpyNodeGetParams",
    "graph_memset_node_get_params": "cuGraphMemsetNodeGetParams",
    "graph_host_node_get_params": "cuGraphHostNodeGetParams",
    "graph_child_graph_node_get_graph": "cuGraphChildGraphNodeGetGraph",
    "graph_event_record_node_get_event": "cuGraphEventRecordNodeGetEvent",
    "graph_event_wait_node_get_event": "cuGraphEventWaitNodeGetEvent",
    "graph_mem_alloc_node_get_params": "cuGraphMemAllocNodeGetParams",
    "graph_mem_free_node_get_params": "cuGraphMemFreeNodeGetParams",
    "graph_node_set_params": "cuGraphNodeSetParams",
    "graph_debug_dot_print": "cuGraphDebugDotPrint",
    "graph_kernel_node_set_params": "cuGraphKernelNodeSetParams",
    "graph_kernel_node_get_attribute": "cuGraphKernelNodeGetAttribute",
    "graph_kernel_node_set_attribute": "cuGraphKernelNodeSetAttribute",
    "graph_kernel_node_copy_attributes": "cuGraphKernelNodeCopyAttributes",
    "ctx_get_stream_priority_range": "cuCtxGetStreamPriorityRange",
    "occupancy_max_active_blocks_per_multiprocessor": "cuOccupancyMaxActiveBlocksPerMultiprocessor",
    "graph_memcpy_node_set_params": "cuGraphMemcpyNodeSetParams",
    "graph_memset_node_set_params": "cuGraphMemsetNodeSetParams",
    "graph_host_node_set_params": "cuGraphHostNodeSetParams",
    "graph_event_record_node_set_event": "cuGraphEventRecordNodeSetEvent",
    "graph_event_wait_node_set_event": "cuGraphEventWaitNodeSetEvent",
    # Executable graphs
    "graph_instantiate_with_params": "cuGraphInstantiateWithParams",
    "graph_exec_destroy": "cuGraphExecDestroy",
    "graph_launch": "cuGraphLaunch",
    "graph_upload": "cuGraphUpload",
    "graph_exec_update": "cuGraphExecUpdate",
    "graph_node_set_enabled": "cuGraphNodeSetEnabled",
    "graph_exec_kernel_node_set_params": "cuGraphExecKernelNodeSetParams",
    "graph_exec_memcpy_node_set_params": "cuGraphExecMemcpyNodeSetParams",
    "graph_exec_memset_node_set_params": "cuGraphExecMemsetNodeSetParams",
    "graph_exec_host_node_set_params": "cuGraphExecHostNodeSetParams",
    "graph_exec_child_graph_node_set_params": "cuGraphExecChildGraphNodeSetParams",
    "graph_exec_event_record_node_set_event": "cuGraphExecEventRecordNodeSetEvent",
    "graph_exec_event_wait_node_set_event": "cuGraphExecEventWaitNodeSetEvent",
    "graph_exec_external_semaphores_signal_node_set_params": "cuGraphExecExternalSemaphoresSignalNodeSetParams",
    "graph_exec_batch_mem_op_node_set_params": "cuGraphExecBatchMemOpNodeSetParams",
    "graph_exec_external_semaphores_wait_node_set_params": "cuGraphExecExternalSemaphoresWaitNodeSetParams",
}

# Each function's HIP twin: "hip" and the CUDA name without its "cu" (cuGraphAddKernelNode: hipGraphAddKernelNode)
# but for those below; None where HIP has none. Checked against ROCm's hip_runtime_api.h (rocm-systems, develop),
# HIPIFY's table of the driver API and docs/api-map.md, 2026-11-24. HIP's structs are its own (hipKernelNodeParams,
# HIP_MEMCPY3D, ...). Where a call takes other arguments: hipDeviceEnablePeerAccess the peer's device ordinal, not a
# context; hipMemcpyAsync a kind (hipMemcpyDefault); hipStreamWaitValue32/64 a mask; hipKernelNameRef returns the
# name; hipGraphKernelNodeCopyAttributes takes (src, dst), CUDA's (dst, src); hipGraphExecUpdate gives the error
# node and result as two values; HIP's edges carry no data (hipGraphGetEdges, hipGraphAddDependencies,
# hipGraphRemoveDependencies, hipGraphNodeGetDependencies, hipStreamGetCaptureInfo_v2,
# hipStreamUpdateCaptureDependencies). Recent: hipMemsetD2D8/16/32Async (ROCm 7.1), the batch mem-op calls (6.4).
HIP_DIFFERS: dict[str, str | None] = {
    "get_error_name": "hipDrvGetErrorName",
    "get_error_string": "hipDrvGetErrorString",
    "ctx_synchronize": "hipDeviceSynchronize",  # (hipCtxSynchronize is deprecated)
    "ctx_enable_peer_access": "hipDeviceEnablePeerAccess",  # (hipCtxEnablePeerAccess is deprecated)
    "mem_alloc": "hipMalloc",
    "mem_free": "hipFree",
    "mem_alloc_async": "hipMallocAsync",
    "mem_free_async": "hipFreeAsync",
    "mem_host_alloc": "hipHostAlloc",
    "mem_free_host": "hipHostFree",
    "mem_host_register": "hipHostRegister",
    "mem_host_unregister": "hipHostUnregister",
    "mem_host_get_device_pointer": "hipHostGetDevicePointer",
    "memcpy3d_async": "hipDrvMemcpy3DAsync",
    "func_get_name": "hipKernelNameRef",
    "func_get_module": None,
    "func_get_param_info": None,  # (hipKernelGetParamInfo takes a hipKernel_t, which no hipFunction_t gives)
    "launch_kernel": "hipModuleLaunchKernel",
    "event_create": "hipEventCreateWithFlags",
    "stream_get_capture_info": "hipStreamGetCaptureInfo_v2",
    "graph_get_id": None,  # (CUDA 13.1's ids: none in HIP, as the three below)
    "graph_exec_get_id": None,
    "graph_node_get_local_id": None,
    "graph_node_get_tools_id": None,
    # The driver's structs (CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, a device pointer): HIP's hipDrv* calls
    "graph_add_memcpy_node": "hipDrvGraphAddMemcpyNode",
    "graph_add_memset_node": "hipDrvGraphAddMemsetNode",
    "graph_add_mem_free_node": "hipDrvGraphAddMemFreeNode",
    "graph_memcpy_node_get_params": "hipDrvGraphMemcpyNodeGetParams",
    "graph_memcpy_node_set_params": "hipDrvGraphMemcpyNodeSetParams",
    "graph_exec_memcpy_node_set_params": "hipDrvGraphExecMemcpyNodeSetParams",
    "graph_exec_memset_node_set_params": "hipDrvGraphExecMemsetNodeSetParams",
    "ctx_get_stream_priority_range": "hipDeviceGetStreamPriorityRange",
    "occupancy_max_active_blocks_per_multiprocessor": "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
}
HIP: dict[str, str] = {generic: twin for generic, name in CUDA.items()
                       if (twin := HIP_DIFFERS.get(generic, "hip" + name[2:])) is not None}

drv = symbol_table(cu, CUDA)

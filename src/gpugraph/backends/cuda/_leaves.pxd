# The C signatures of _leaves' calls, compiled: handles as addresses, the driver's result as an int.
from libc.stdint cimport uintptr_t

from cuda.bindings cimport cydriver
from gpugraph.backends._hot cimport HotCalls

cpdef int launch_kernel(uintptr_t function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                        unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_mem,
                        uintptr_t stream, uintptr_t kernel_params) except? -1
cpdef int graph_launch(uintptr_t graph_exec, uintptr_t stream) except? -1
cpdef int exec_kernel_node_set(uintptr_t graph_exec, uintptr_t context, uintptr_t node, uintptr_t function,
                               unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x,
                               unsigned int block_y, unsigned int block_z, unsigned int shared_mem,
                               uintptr_t kernel_params) except? -1
cdef void _kernel_node(cydriver.CUDA_KERNEL_NODE_PARAMS* params, uintptr_t function, unsigned int grid_x,
                       unsigned int grid_y, unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                       unsigned int block_z, unsigned int shared_mem, uintptr_t kernel_params) noexcept
cpdef int begin_capture(uintptr_t stream, int mode) except? -1
cpdef tuple capture_graph(uintptr_t stream)
cpdef tuple end_capture(uintptr_t stream)
cpdef tuple exec_update(uintptr_t graph_exec, uintptr_t graph)
cpdef int graph_destroy(uintptr_t graph) except? -1
cpdef object graph_nodes(uintptr_t graph)
cdef object _graph_nodes(uintptr_t graph)

cdef class CudaHot(HotCalls):
    pass

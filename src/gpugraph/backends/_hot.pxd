# The C signatures of _hot.HotCalls' calls, compiled: addresses as uintptr_t, the driver's result as an int.
from libc.stdint cimport uintptr_t

cdef class HotCalls:
    cpdef int graph_launch(self, uintptr_t graph_exec, uintptr_t stream) except? -1
    cpdef int launch_kernel(self, uintptr_t function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                            unsigned int block_x, unsigned int block_y, unsigned int block_z,
                            unsigned int shared_mem, uintptr_t stream, uintptr_t kernel_params) except? -1
    cpdef int captured_launch(self, object capture, object record, uintptr_t function, unsigned int grid_x,
                              unsigned int grid_y, unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                              unsigned int block_z, unsigned int shared_mem, uintptr_t stream,
                              uintptr_t kernel_params) except? -1
    cpdef uintptr_t node_address(self, object node) except? 0
    cpdef int exec_kernel_node_set(self, uintptr_t graph_exec, uintptr_t context, uintptr_t node, uintptr_t function,
                                   unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                                   unsigned int block_x, unsigned int block_y, unsigned int block_z,
                                   unsigned int shared_mem, uintptr_t kernel_params) except? -1

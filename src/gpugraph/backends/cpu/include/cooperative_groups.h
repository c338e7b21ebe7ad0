// gpugraph's CPU backend: cooperative groups synchronize a warp or a grid, which the CPU backend cannot do.
#pragma once
#error "gpugraph CPU backend: cooperative groups (cooperative_groups.h) are not supported on the CPU; run the kernel on a GPU, or give Kernel(..., cpu=fn)"

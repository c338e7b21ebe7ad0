// gpugraph's CPU backend: CUDA's device runtime header (cudaGraphSetConditional), for kernels that include it.
#pragma once
#include "gpugraph_cpu.h"

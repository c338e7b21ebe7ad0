// gpugraph's CPU backend: cuda_fp16.h, for kernels that include it (the language is gpugraph_cpu.h).
#pragma once
#include "gpugraph_cpu.h"

// gpugraph's CPU backend: HIP's runtime header, for kernels that include it (the language is gpugraph_cpu.h).
#pragma once
#include "../gpugraph_cpu.h"

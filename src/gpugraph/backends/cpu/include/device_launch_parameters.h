// gpugraph's CPU backend: device_launch_parameters.h, for kernels that include it (the language is gpugraph_cpu.h).
#pragma once
#include "gpugraph_cpu.h"

#pragma once
// CUDA device discovery (host side). Only backend/registry.cpp and backend/cuda/ include this.

#include "backend/registry.h"

namespace llmctl::cuda {

// Lists visible devices through the CUDA runtime; on failure `reason` says why
// ("CUDA driver not found", "no CUDA-capable device is visible", ...). Never throws.
GpuProbe probe_devices();

}  // namespace llmctl::cuda

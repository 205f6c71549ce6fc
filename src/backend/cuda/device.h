#pragma once
// CUDA device discovery (host side). Only backend/selection.cpp and backend/cuda/ include this.

#include "backend/selection.h"

namespace llmctl::cuda {

// Lists visible devices through the CUDA runtime; on failure `reason` says why
// ("CUDA driver not found", "no CUDA-capable device is visible", ...). Never throws.
GpuProbe probe_devices();

// Number of devices this process can use; 0 when there is no driver or no device. Never
// throws and creates no context (cheap enough for a test's "is there a GPU?" check).
int visible_device_count();

}  // namespace llmctl::cuda

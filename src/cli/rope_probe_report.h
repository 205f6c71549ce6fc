#pragma once
// `llmctl rope-probe` output: the readable tables and the --svg charts.

#include <string>
#include <vector>

#include "diag/rope_probe.h"

namespace llmctl::cli {

// The four tables and the check lines (`failures`; "all checks pass" when empty).
void print_rope_probe_tables(const RopeProbeReport& r, const std::vector<std::string>& failures);
// Writes the distance curve to `path` and the angle-precision chart beside it
// (PATH without ".svg" + "-angles.svg"); returns the paths written. Throws FileError.
std::vector<std::string> write_rope_probe_svgs(const RopeProbeReport& r, const std::string& path);

}  // namespace llmctl::cli

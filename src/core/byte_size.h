#pragma once
// Sizes in messages and reports, one format everywhere: "1.50 GiB", "12.25 MiB", "3.00 KiB",
// "512 B" (binary units, two decimals). Tables that print exact byte counts print the number.
#include <cstdint>
#include <string>

namespace llmctl {

std::string format_bytes(uint64_t n);

}  // namespace llmctl

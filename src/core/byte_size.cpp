#include "core/byte_size.h"

#include <fmt/format.h>

namespace llmctl {

std::string format_bytes(uint64_t n) {
  constexpr const char* kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (3 - i));
    if (n >= unit)
      return fmt::format("{:.2f} {}", static_cast<double>(n) / static_cast<double>(unit), kUnits[i]);
  }
  return fmt::format("{} B", n);
}

}  // namespace llmctl

#pragma once
// Errors: library code throws llmctl::Error; main() catches once and decides the
// exit code (ARCHITECTURE.md "Errors and exit codes").

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace llmctl {

// Exit codes scripts can rely on.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,          // bad input file, user error, failed operation
  kExitUsage = 2,          // command-line usage error (CLI11)
  kExitCheckFailed = 3,    // a --check found a problem
  kExitInterrupted = 130,  // stopped by SIGINT (128 + 2, the shells' convention)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string hint = {})
      : std::runtime_error(what), hint_(std::move(hint)) {}
  // A known fix, printed on its own line after the error; may be empty.
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// An error in a file: rendered as "FILE: WHAT (at byte N)".
class FileError : public Error {
 public:
  static constexpr uint64_t kNoOffset = UINT64_MAX;
  FileError(const std::string& path, const std::string& what, uint64_t offset = kNoOffset,
            std::string hint = {})
      : Error(render(path, what, offset), std::move(hint)), path_(path), offset_(offset) {}
  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }

 private:
  static std::string render(const std::string& path, const std::string& what, uint64_t offset) {
    if (offset == kNoOffset) return fmt::format("{}: {}", path, what);
    return fmt::format("{}: {} (at byte {})", path, what, offset);
  }
  std::string path_;
  uint64_t offset_;
};

}  // namespace llmctl

// Internal invariant that stays on in release builds. Never put side effects in `cond`.
#define LLMCTL_ASSERT(cond)                                                                      \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      throw ::llmctl::Error(fmt::format("internal error: assertion '{}' failed at {}:{}", #cond, \
                                        __FILE__, __LINE__));                                    \
  } while (0)

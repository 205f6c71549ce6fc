#include "core/text_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace llmctl {

namespace {

std::string read_stream(std::FILE* f, const std::string& name) {
  std::string out;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  if (std::ferror(f)) throw FileError(name, fmt::format("read failed: {}", std::strerror(errno)));
  return out;
}

}  // namespace

std::string read_whole_file(const std::string& path) {
  if (path == "-") return read_stream(stdin, "<stdin>");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw FileError(path, "is a directory, expected a file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw FileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  try {
    std::string s = read_stream(f, path);
    std::fclose(f);
    return s;
  } catch (...) {
    std::fclose(f);
    throw;
  }
}

bool stdin_is_terminal() { return ::isatty(STDIN_FILENO) == 1; }
bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

bool stdout_shares_stderr() {
  struct stat out {};
  struct stat err {};
  if (::fstat(STDOUT_FILENO, &out) != 0 || ::fstat(STDERR_FILENO, &err) != 0) return false;
  return out.st_dev == err.st_dev && out.st_ino == err.st_ino;
}

}  // namespace llmctl

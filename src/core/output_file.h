#pragma once
// Every file the tool writes (SVG plots, importance matrices, GGUF images and quantize's
// streamed output, --logits-out): nothing lost, nothing clobbered.
//
// The bytes go to a temporary file beside the target (PATH.tmp-XXXXXX, same directory, so the
// rename cannot cross file systems), which is renamed over PATH only when every byte is written
// and the file is closed without error; on any failure (a full disk, a read-only directory) the
// temporary file is removed and the old PATH, if any, is untouched, so no truncated or zero-byte
// file is left behind. A PATH that exists and is not a regular file is never renamed over: a
// FIFO or a character device (a terminal, /dev/null, /dev/full) is written in place, and so is
// an existing path under /dev/ or /proc/ (/dev/stdout, /dev/fd/N: a descriptor the caller
// opened, perhaps on a regular file), so their write errors are reported as errors; a
// directory, socket or block device is refused.
// Every error is a FileError naming PATH with the operating system's reason.

#include <cstddef>
#include <string>
#include <string_view>

namespace llmctl {

// A file written as a stream under those rules: the constructor creates the temporary file (or
// opens the FIFO or device), write() appends (buffered), commit() makes PATH the complete file.
// Destroyed without commit() (an exception, Ctrl-C), it removes the temporary file.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes);
  void write(const void* data, size_t n) { write(std::string_view(static_cast<const char*>(data), n)); }
  // Writes what is buffered, closes, and renames the temporary file over PATH.
  void commit();
  const std::string& path() const { return path_; }

 private:
  void write_fd(std::string_view bytes);
  std::string path_;
  std::string tmp_path_;  // empty: written in place (a FIFO or a character device)
  int fd_ = -1;
  std::string buffer_;
  bool committed_ = false;
};

// A file that records are appended to as they are known (`run --batch --resume FILE`): not
// replaced, so it has no temporary file; each append() goes to the OS at once (O_APPEND, no
// buffer), so a record is on disk when the next request starts, and a failed write (a full
// disk) is a FileError naming PATH with the OS's reason, never a record lost silently.
class AppendFile {
 public:
  explicit AppendFile(std::string path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view bytes);

 private:
  std::string path_;
  int fd_ = -1;
};

// The whole file at once, through OutputFile.
void write_output_file(const std::string& path, std::string_view bytes);

// What PATH is, for callers that refuse non-regular outputs themselves (quantize streams its
// GGUF through its own temporary file): "" when PATH does not exist or is a regular file, else
// "a directory", "a character device", "a FIFO", "a socket", "a block device".
std::string non_regular_kind(const std::string& path);

}  // namespace llmctl

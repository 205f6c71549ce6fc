#pragma once
// Files the tool writes whole (SVG plots, importance matrices, GGUF images): nothing lost,
// nothing clobbered.
//
// The bytes go to a temporary file beside the target (PATH.tmp-XXXXXX, same directory, so the
// rename cannot cross file systems), which is renamed over PATH only when every byte is written
// and the file is closed without error; on any failure (a full disk, a read-only directory) the
// temporary file is removed and the old PATH, if any, is untouched, so no truncated or zero-byte
// file is left behind. A PATH that exists and is not a regular file is never renamed over: a
// FIFO or a character device (a terminal, /dev/stdout, /dev/null, /dev/full) is written in place,
// so its write errors are reported as errors; a directory, socket or block device is refused.
// Every error is a FileError naming PATH with the operating system's reason.

#include <string>
#include <string_view>

namespace llmctl {

void write_output_file(const std::string& path, std::string_view bytes);

// What PATH is, for callers that refuse non-regular outputs themselves (quantize streams its
// GGUF through its own temporary file): "" when PATH does not exist or is a regular file, else
// "a directory", "a character device", "a FIFO", "a socket", "a block device".
std::string non_regular_kind(const std::string& path);

}  // namespace llmctl

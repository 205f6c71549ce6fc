#pragma once
// Streaming GGUF v3 writer: the header (metadata and tensor infos) first, then each tensor's
// data appended in declaration order, so a multi-gigabyte file never sits in memory.
// GgufBuilder (io/gguf_writer.h) holds every tensor's bytes; this writer produces the same
// bytes for the same content (tests/test_gguf_stream_writer.cpp), reusing GgufBuilder for
// the metadata encoding.
//
// Atomic output through core/output_file.h: everything goes to a temporary file beside PATH,
// and commit() renames it to PATH. A writer destroyed without commit() (an exception, a bad
// tensor, Ctrl-C) removes the temporary file, so PATH is either absent, its previous content,
// or the complete new file.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/output_file.h"
#include "io/gguf_writer.h"

namespace llmctl {

struct GgufTensorDecl {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;  // ggml order, shape[0] contiguous
};

class GgufStreamWriter {
 public:
  // `metadata` supplies the keys in order (its tensors, if any, are ignored) and the
  // alignment (general.alignment, else 32). Checks every declaration (shape, row length a
  // whole number of blocks, unique names) and writes the header to the temporary file.
  // Throws Error / FileError.
  GgufStreamWriter(std::string path, const GgufBuilder& metadata,
                   std::vector<GgufTensorDecl> tensors);
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Appends bytes of the current tensor (tensors in declaration order; a tensor may arrive in
  // several pieces). Throws Error when more bytes arrive than the tensor holds.
  void write(const void* data, size_t n);
  // Ends the current tensor: checks its byte count and pads to the alignment.
  void end_tensor();
  // Checks that every tensor was written, flushes, closes and renames the file to PATH.
  void commit();

  uint64_t tensor_bytes(size_t i) const { return sizes_.at(i); }

 private:
  void put(const void* data, size_t n);
  std::string path_;
  std::optional<OutputFile> file_;  // created once the declarations are checked
  uint64_t align_ = 32;
  std::vector<GgufTensorDecl> decls_;
  std::vector<uint64_t> sizes_;
  size_t current_ = 0;            // tensor being written
  uint64_t current_written_ = 0;  // its bytes so far
  uint64_t offset_ = 0;           // bytes written to the file
};

}  // namespace llmctl

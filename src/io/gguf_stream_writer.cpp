#include "io/gguf_stream_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"

namespace llmctl {

namespace {

// GGUF v3 header: magic u32, version u32, n_tensors u64, n_kv u64, then the key/values.
constexpr size_t kTensorCountOffset = 8;

template <class T>
void append(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

uint64_t checked_size(const GgufTensorDecl& t) {
  const GgmlTypeTraits tr = ggml_traits(t.type);
  if (t.shape.empty() || t.shape.size() > kGgufMaxDims)
    throw Error(fmt::format("tensor '{}': {} dimensions, expected 1..{}", t.name, t.shape.size(),
                            kGgufMaxDims));
  int64_t n = 1;
  for (const int64_t d : t.shape) {
    if (d <= 0 || n > std::numeric_limits<int64_t>::max() / d)
      throw Error(fmt::format("tensor '{}': invalid dimension {}", t.name, d));
    n *= d;
  }
  if (t.shape[0] % tr.block_size != 0)
    throw Error(fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}",
                            t.name, t.shape[0], tr.name, tr.block_size));
  return static_cast<uint64_t>(n) / tr.block_size * tr.type_size;
}

}  // namespace

GgufStreamWriter::GgufStreamWriter(std::string path, const GgufBuilder& metadata,
                                   std::vector<GgufTensorDecl> tensors)
    : path_(std::move(path)), decls_(std::move(tensors)) {
  align_ = metadata.alignment();
  std::set<std::string> names;
  for (const auto& t : decls_) {
    if (!names.insert(t.name).second)
      throw Error(fmt::format("duplicate tensor name '{}'", t.name));
    sizes_.push_back(checked_size(t));
  }

  // The metadata part is exactly what GgufBuilder writes for a file without tensors; only
  // the tensor count differs.
  GgufBuilder meta;
  for (const auto& kv : metadata.metadata()) meta.set(kv.key, kv.value);
  std::vector<uint8_t> header = meta.build();
  const uint64_t n_tensors = decls_.size();
  std::memcpy(header.data() + kTensorCountOffset, &n_tensors, sizeof n_tensors);
  uint64_t offset = 0;
  for (size_t i = 0; i < decls_.size(); ++i) {
    const GgufTensorDecl& t = decls_[i];
    append<uint64_t>(header, t.name.size());
    header.insert(header.end(), t.name.begin(), t.name.end());
    append(header, static_cast<uint32_t>(t.shape.size()));
    for (const int64_t d : t.shape) append(header, d);
    append(header, static_cast<uint32_t>(t.type));
    append(header, offset);
    offset += (sizes_[i] + align_ - 1) / align_ * align_;
  }
  if (!decls_.empty())
    while (header.size() % align_ != 0) header.push_back(0);

  file_.emplace(path_);
  put(header.data(), header.size());
}

void GgufStreamWriter::put(const void* data, size_t n) {
  file_->write(data, n);
  offset_ += n;
}

void GgufStreamWriter::write(const void* data, size_t n) {
  if (current_ >= decls_.size())
    throw Error(fmt::format("{}: data written after the last tensor", path_));
  if (current_written_ + n > sizes_[current_])
    throw Error(fmt::format("tensor '{}': {} bytes written, it holds {}", decls_[current_].name,
                            current_written_ + n, sizes_[current_]));
  put(data, n);
  current_written_ += n;
}

void GgufStreamWriter::end_tensor() {
  if (current_ >= decls_.size())
    throw Error(fmt::format("{}: end_tensor() after the last tensor", path_));
  if (current_written_ != sizes_[current_])
    throw Error(fmt::format("tensor '{}': {} bytes written, expected {}", decls_[current_].name,
                            current_written_, sizes_[current_]));
  static const uint8_t zeros[256] = {};
  for (uint64_t pad = (align_ - offset_ % align_) % align_; pad > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof zeros));
    put(zeros, n);
    pad -= n;
  }
  ++current_;
  current_written_ = 0;
}

void GgufStreamWriter::commit() {
  if (current_ != decls_.size())
    throw Error(fmt::format("{}: {} of {} tensors written", path_, current_, decls_.size()));
  file_->commit();
}

}  // namespace llmctl

// libFuzzer target for the safetensors header parser (see README.md here for how to run it).
//
// Properties checked on every input:
//   - SafetensorsFile::from_memory either succeeds or throws FileError; any other exception,
//     crash, out-of-bounds read (ASan) or undefined behaviour (UBSan) is a finding;
//   - an accepted file: tensors sorted by unique name, each with at most kSafetensorsMaxDims
//     non-negative dims whose element count times the dtype size equals its byte range, the
//     range inside the input after the header (first and last byte read), no two ranges
//     overlapping; find() returns each tensor by name.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: property violated: %s\n", what);
  std::abort();
}

uint64_t element_size(llmctl::GgmlType t) {
  switch (t) {
    case llmctl::GgmlType::F32:
      return 4;
    case llmctl::GgmlType::F16:
    case llmctl::GgmlType::BF16:
      return 2;
    default:
      finding("tensor of a dtype the reader does not support");
  }
}

void check_accepted(const llmctl::SafetensorsFile& f, const uint8_t* data, size_t size) {
  if (f.data_offset() > size) finding("header extends past the input");
  const uint64_t buffer = size - f.data_offset();
  const uint8_t* base = data + f.data_offset();
  volatile uint8_t sink = 0;
  const llmctl::SafetensorsTensor* prev = nullptr;
  for (const auto& t : f.tensors()) {
    if (prev != nullptr && !(prev->name < t.name)) finding("tensors not sorted by unique name");
    prev = &t;
    if (t.shape.size() > llmctl::kSafetensorsMaxDims) finding("too many dims");
    for (const int64_t d : t.shape)
      if (d < 0) finding("negative dim");
    if (t.begin > t.end || t.end > buffer) finding("byte range outside the buffer");
    if (static_cast<uint64_t>(t.n_elements()) * element_size(t.type) != t.n_bytes())
      finding("byte range does not match shape and dtype");
    if (t.data != base + t.begin) finding("data pointer does not match begin");
    if (t.n_bytes() > 0) sink = static_cast<uint8_t>(sink ^ t.data[0] ^ t.data[t.n_bytes() - 1]);
    if (f.find(t.name) != &t) finding("find() does not return the tensor");
  }
  (void)sink;
  // Quadratic, but an accepted fuzz input holds few tensors.
  const auto& ts = f.tensors();
  if (ts.size() <= 512)
    for (size_t a = 0; a < ts.size(); ++a)
      for (size_t b = a + 1; b < ts.size(); ++b)
        if (ts[a].n_bytes() > 0 && ts[b].n_bytes() > 0 && ts[a].begin < ts[b].end &&
            ts[b].begin < ts[a].end)
          finding("two tensors overlap");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // from_memory keeps the shared copy, so tensor pointers must point into that copy.
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  try {
    const llmctl::SafetensorsFile f = llmctl::SafetensorsFile::from_memory(bytes, "fuzz-input");
    check_accepted(f, bytes->data(), bytes->size());
  } catch (const llmctl::FileError&) {
    // Rejected with a proper error: fine.
  }
  return 0;
}

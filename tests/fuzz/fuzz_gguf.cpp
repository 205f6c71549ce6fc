// libFuzzer target for the GGUF parser (see README.md here for how to run it).
//
// Properties checked on every input:
//   - parsing either succeeds or throws FileError; any other exception, crash, out-of-bounds
//     read (ASan) or undefined behaviour (UBSan) is a finding;
//   - every tensor's data range lies inside the input (its first and last byte are read);
//   - an accepted file can be formatted (text and JSON) and rewritten by GgufBuilder, and the
//     rewritten image parses back to the same metadata and tensor bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "io/gguf_writer.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_gguf: property violated: %s\n", what);
  std::abort();
}

bool same_value(const llmctl::GgufValue& a, const llmctl::GgufValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || a.s != b.s || a.arr.elem_type() != b.arr.elem_type() ||
      a.arr.size() != b.arr.size() || std::memcmp(&a.f, &b.f, sizeof a.f) != 0)
    return false;
  for (size_t k = 0; k < a.arr.size(); ++k)
    if (!same_value(a.arr[k], b.arr[k])) return false;
  return true;
}

void check_accepted(const llmctl::GgufFile& f, const uint8_t* data, size_t size) {
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    if (t.data < data || t.n_bytes == 0 || t.n_bytes > size ||
        static_cast<size_t>(t.data - data) > size - t.n_bytes)
      finding("tensor data outside the input");
    sink = static_cast<uint8_t>(sink ^ t.data[0] ^ t.data[t.n_bytes - 1]);
  }
  (void)sink;

  for (const auto& kv : f.metadata()) (void)llmctl::format_gguf_value(kv.value);
  (void)llmctl::gguf_to_json(f).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);

  const auto image = std::make_shared<const std::vector<uint8_t>>(llmctl::GgufBuilder::from_file(f).build());
  const llmctl::GgufFile g = llmctl::GgufFile::from_memory(image, "rewritten");
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size())
    finding("rewrite changed the counts");
  for (size_t k = 0; k < f.metadata().size(); ++k)
    if (f.metadata()[k].key != g.metadata()[k].key || !same_value(f.metadata()[k].value, g.metadata()[k].value))
      finding("rewrite changed a metadata value");
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const auto& a = f.tensors()[k];
    const auto& b = g.tensors()[k];
    if (a.name != b.name || a.type != b.type || a.shape != b.shape || a.n_bytes != b.n_bytes ||
        std::memcmp(a.data, b.data, a.n_bytes) != 0)
      finding("rewrite changed a tensor");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // from_memory keeps its own copy, so tensor pointers must point into that copy.
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  try {
    const llmctl::GgufFile f = llmctl::GgufFile::from_memory(bytes, "fuzz-input");
    check_accepted(f, bytes->data(), bytes->size());
  } catch (const llmctl::FileError&) {
    // Rejected with a proper error: fine.
  }
  return 0;
}

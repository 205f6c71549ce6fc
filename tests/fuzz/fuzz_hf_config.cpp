// libFuzzer target for the config.json reader (hf_config_from_json; see README.md here).
//
// Properties checked on every input:
//   - parsing either succeeds or throws FileError; any other exception (a nlohmann type_error
//     from an unchecked get<>, say), crash or undefined behaviour (UBSan: a double that does
//     not fit int64, a division by zero) is a finding;
//   - an accepted config is one the weight binder and forward pass may trust: every count
//     positive, n_heads divisible by n_kv_heads, n_rot even and within head_dim, head_dim *
//     n_heads == n_embd when head_dim was derived, finite positive eps and rope base, the
//     llama3 divisors (n_rot / 2 of them) finite and >= 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "model/hf_config.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_hf_config: property violated: %s\n", what);
  std::abort();
}

void check_accepted(const llmctl::HfConfig& h) {
  const llmctl::ModelConfig& c = h.config;
  if (llmctl::find_arch_by_gguf(c.arch) == nullptr) finding("unknown arch accepted");
  if (!llmctl::unimplemented_math(c).empty()) finding("unimplemented math accepted");
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.head_dim <= 0 || c.n_ff <= 0 || c.n_ctx_train <= 0)
    finding("a count is not positive");
  if (c.n_heads % c.n_kv_heads != 0) finding("n_kv_heads does not divide n_heads");
  if (c.n_rot < 2 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim) finding("bad n_rot");
  if (!(std::isfinite(c.rms_eps) && c.rms_eps > 0.0f)) finding("bad rms_eps");
  if (!(std::isfinite(c.rope_freq_base) && c.rope_freq_base > 0.0)) finding("bad rope base");
  if (!(std::isfinite(c.rope_freq_scale) && c.rope_freq_scale > 0.0)) finding("bad rope scale");
  if (h.rope_scaling_type == "llama3") {
    if (h.rope_freqs.size() != static_cast<size_t>(c.n_rot / 2)) finding("rope_freqs size");
    for (const float d : h.rope_freqs)
      if (!(std::isfinite(d) && d >= 1.0f - 1e-5f)) finding("llama3 divisor not finite or < 1");
  } else if (!h.rope_freqs.empty()) {
    finding("rope_freqs without llama3 scaling");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_accepted(llmctl::hf_config_from_json(text, "fuzz/config.json"));
  } catch (const llmctl::FileError&) {
    // Rejected with a proper error: fine.
  }
  return 0;
}

// The engine's options, declared once (engine_options.h).
#include "cli/engine_options.h"

#include <fmt/format.h>

#include <filesystem>

#include "cli/cli_style.h"
#include "core/error.h"

namespace llmctl::cli {

namespace {

constexpr int kMaxThreads = 1024;

// auto, cpu, cuda or cuda:N; anything else is a usage error before a model is loaded.
CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v == "auto" || v == "cpu" || v == "cuda") return {};
        const std::string prefix = "cuda:";
        if (v.rfind(prefix, 0) == 0 && v.size() > prefix.size() &&
            v.find_first_not_of("0123456789", prefix.size()) == std::string::npos && v.size() < 10)
          return {};
        return fmt::format("wants auto, cpu, cuda or cuda:N, got '{}'", v);
      },
      "");
}

// An on|off switch into a bool.
void add_switch(CLI::App* sub, const char* name, bool& target, const char* help) {
  sub->add_option_function<std::string>(
         name, [&target](const std::string& v) { target = v == "on"; }, help)
      ->check(one_of({"on", "off"}))
      ->default_str(target ? "on" : "off");
}

}  // namespace

void add_engine_options(CLI::App* sub, EngineOptions& o, const EngineOptionSpec& spec) {
  const unsigned w = spec.which;
  const size_t n_before = sub->get_options().size();
  if (w & kModel)
    sub->add_option("-m,--model", o.model, "GGUF file or Hugging Face model directory")
        ->type_name("FILE")
        ->capture_default_str();
  if (w & kModelList)
    sub->add_option("-m,--model", o.models,
                    "Models (GGUF files or Hugging Face directories), comma-separated or repeated")
        ->type_name("FILE")
        ->delimiter(',')
        ->required();
  if (w & kThreads)
    sub->add_option("-t,--threads", o.threads,
                    "CPU threads, up to 1024 (0: every core this process may use)")
        ->capture_default_str()
        ->check(in_range(0, kMaxThreads));
  if (w & kThreadList)
    sub->add_option("-t,--threads", o.thread_list,
                    "CPU thread counts to measure, comma-separated, up to 1024 each (default, or "
                    "0: every core this process may use)")
        ->delimiter(',')
        ->check(in_range(0, kMaxThreads));
  if (w & kDevice)
    sub->add_option("--device", o.device, "auto (a visible GPU, else the CPU), cpu or cuda[:N]")
        ->type_name("DEVICE")
        ->capture_default_str()
        ->check(device_name());
  if (w & kCtxSize)
    sub->add_option(spec.ctx_names, o.ctx_size, spec.ctx_help)
        ->check(in_range(int64_t{1}, int64_t{1} << 31));
  if (w & kKvType) {
    const std::vector<std::string> types = kv_type_names();
    sub->add_option_function<std::string>(
           "--kv-type",
           [&o](const std::string& v) {
             o.kv_type = v;
             o.kv_type_given = true;
           },
           "KV cache storage, K and V: f32, f16, or ggml's q8_0 / q4_0 blocks (head_dim a "
           "multiple of 32)")
        ->default_str(o.kv_type)
        ->check(one_of(types));
    sub->add_option("--cache-type-k", o.cache_type_k,
                    "llama.cpp's -ctk: the K cache type (V keeps --kv-type's, f16 by default)")
        ->check(one_of(types));
    sub->add_option("--cache-type-v", o.cache_type_v,
                    "llama.cpp's -ctv: the V cache type (K keeps --kv-type's)")
        ->check(one_of(types));
  }
  if (w & kBatchInvariant)
    add_switch(sub, "--batch-invariant", o.batch_invariant,
               "CUDA: on = every token computed bit-identically alone or batched; off = "
               "prefill-sized matmuls through cuBLAS (faster, f16 rounding, batch-dependent). No "
               "effect on the CPU");
  if (w & kCudaGraphs)
    add_switch(sub, "--cuda-graphs", o.cuda_graphs,
               "CUDA: on = record each decode step into a CUDA graph and replay it (fewer kernel "
               "launches, same results; a failed capture warns once and falls back); off = "
               "plain launches (the default until verified on a GPU). No effect on the CPU");
  if (w & kBatchSize)
    sub->add_option("-b,--batch-size", o.batch_size, "Tokens per forward pass (prefill chunk)")
        ->capture_default_str()
        ->check(in_range(int64_t{1}, int64_t{65536}));
  if (w & kCpuReference)
    sub->add_flag("--cpu-reference", o.cpu_reference,
                  "CPU: the scalar reference kernels (one thread, slow) instead of the SIMD ones");
  const std::vector<CLI::Option*> all = sub->get_options();
  for (size_t i = n_before; i < all.size(); ++i)
    if (!all[i]->check_name("--model")) all[i]->group(kEngineGroup);
}

KvTypeNames resolve_kv_types(const std::string& kv_type, bool kv_type_given,
                             const std::optional<std::string>& cache_type_k,
                             const std::optional<std::string>& cache_type_v) {
  using Given = std::pair<const char*, const std::optional<std::string>*>;
  for (const auto& [name, type] : {Given{"-ctk", &cache_type_k}, Given{"-ctv", &cache_type_v}})
    if (*type && kv_type_given && **type != kv_type)
      throw CLI::ValidationError(
          "--kv-type", fmt::format("--kv-type {} and {} {} differ: --kv-type sets both K and V "
                                   "(give -ctk and -ctv alone for different types)",
                                   kv_type, name, **type));
  return {cache_type_k.value_or(kv_type), cache_type_v.value_or(kv_type)};
}

void check_engine_options(EngineOptions& o) {
  KvTypeNames t = resolve_kv_types(o.kv_type, o.kv_type_given, o.cache_type_k, o.cache_type_v);
  o.kv_type = std::move(t.k);
  o.kv_type_v = std::move(t.v);
}

void apply_kv_types(const EngineOptions& o, KvCacheOptions& kv) {
  kv.type = *kv_type_from_name(o.kv_type);
  kv.v_type = *kv_type_from_name(o.kv_type_v.empty() ? o.kv_type : o.kv_type_v);
  if (*kv.v_type == kv.type) kv.v_type.reset();
}

BackendChoice backend_choice(const EngineOptions& o, int threads) {
  BackendChoice c;
  c.device = o.device;
  c.n_threads = threads;
  c.cpu_reference = o.cpu_reference;
  c.batch_invariant = o.batch_invariant;
  c.cuda_graphs = o.cuda_graphs;
  return c;
}

void require_model_path(const std::string& path, const char* role) {
  if (std::filesystem::exists(path)) return;
  throw Error(fmt::format("{}: no such {} file or directory", path, role),
              path == kDefaultModel
                  ? fmt::format("fetch the default model with scripts/fetch-models.sh (it writes "
                                "{}), or pass -m MODEL.gguf",
                                kDefaultModel)
                  : std::string("check the path, or pass -m MODEL.gguf"));
}

}  // namespace llmctl::cli

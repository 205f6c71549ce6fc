#pragma once
// The options of the engine, declared once for every subcommand that runs a model (run,
// bench, eval, rope-probe, svd-embed; quantize takes -t): the same names, help, ranges and
// checks everywhere.
//
//   -m,--model FILE        GGUF file or Hugging Face directory (bench: several)
//   -t,--threads N         CPU threads, 0..1024; 0 (the default) = every core this process may
//                          use (bench: a comma-separated list)
//   --device {auto,cpu,cuda[:N]}   auto (default): a visible GPU, else the CPU
//   -c,--ctx-size N        context positions, 1..2^31 (default: the subcommand says)
//   --kv-type {f32,f16,q8_0,q4_0}   KV cache storage of K and V; llama.cpp's -ctk/--cache-type-k
//                          and -ctv/--cache-type-v set K's and V's alone (the other keeps
//                          --kv-type's); --kv-type with a -ctk/-ctv of another type is an error
//   --batch-invariant {on,off}, --cuda-graphs {on,off}   CUDA switches (no effect on the CPU)
//   -b,--batch-size N      tokens per forward pass, 1..65536
//   --cpu-reference        the scalar reference CPU kernels
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/selection.h"
#include "model/kv_cache.h"

namespace llmctl::cli {

inline constexpr const char* kDefaultModel = "models/stories260K.gguf";

struct EngineOptions {
  std::string model = kDefaultModel;
  std::vector<std::string> models;  // bench: -m A,B
  int threads = 0;                  // 0: every core
  std::vector<int> thread_list;     // bench: -t 1,2,4 (empty: every core)
  std::string device = "auto";
  std::optional<int64_t> ctx_size;
  std::string kv_type = "f16";  // after check_engine_options(): K's type
  std::string kv_type_v;        // after check_engine_options(): V's type
  bool kv_type_given = false;                             // --kv-type on the command line
  std::optional<std::string> cache_type_k, cache_type_v;  // -ctk, -ctv (llama.cpp)
  bool batch_invariant = true;
  bool cuda_graphs = false;
  int64_t batch_size = 512;  // tokens per forward call
  bool cpu_reference = false;
};

// Which of them a subcommand takes (or-ed).
enum EngineOption : unsigned {
  kModel = 1u << 0,       // -m, one model, default kDefaultModel
  kModelList = 1u << 1,   // -m, one or more (required)
  kThreads = 1u << 2,     // -t, one count
  kThreadList = 1u << 3,  // -t, a list
  kDevice = 1u << 4,
  kCtxSize = 1u << 5,
  kKvType = 1u << 6,  // --kv-type, -ctk, -ctv
  kBatchInvariant = 1u << 7,
  kCudaGraphs = 1u << 8,
  kBatchSize = 1u << 9,
  kCpuReference = 1u << 10,
};

// What differs between subcommands: which options, and the words for the context.
struct EngineOptionSpec {
  unsigned which = 0;
  const char* ctx_names = "-c,--ctx-size";
  const char* ctx_help = "Context positions per sequence (default: the model's context length)";
};
// The help group of every engine option but -m, so a subcommand's own options come first.
inline constexpr const char* kEngineGroup = "Engine";

// Declares the chosen options on `sub`, writing into `o` (which must outlive parsing).
void add_engine_options(CLI::App* sub, EngineOptions& o, const EngineOptionSpec& spec);

// The checks CLI11 cannot make, after parsing: -ctk/-ctv do not contradict --kv-type; K's type
// is then in kv_type, V's in kv_type_v. Throws CLI::ValidationError (exit 2).
void check_engine_options(EngineOptions& o);
// K's and V's cache type names from --kv-type (`kv_type`, given on the command line or a
// default) and llama.cpp's -ctk / -ctv: --kv-type sets both, -ctk and -ctv one each, and a
// -ctk / -ctv naming another type than a given --kv-type is a contradiction, not an override
// (CLI::ValidationError). run, bench, eval (check_engine_options) and kvplan share this rule.
struct KvTypeNames {
  std::string k, v;
};
KvTypeNames resolve_kv_types(const std::string& kv_type, bool kv_type_given,
                             const std::optional<std::string>& cache_type_k,
                             const std::optional<std::string>& cache_type_v);
// KvCacheOptions::type and v_type from the checked options.
void apply_kv_types(const EngineOptions& o, KvCacheOptions& kv);

// The backend the options ask for (`threads` for bench's list).
BackendChoice backend_choice(const EngineOptions& o, int threads);

// Throws Error when `path` does not exist, with how to fetch the default model when it is that.
void require_model_path(const std::string& path, const char* role = "model");

}  // namespace llmctl::cli

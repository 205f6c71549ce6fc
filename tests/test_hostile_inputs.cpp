// Hostile inputs at the command line (issue 9, items 3 and 4): every case must end with the
// documented exit code and a message naming what is wrong, never a crash (death by signal)
// or a hang (each run has a 60 s deadline). Model variants are stories260K rewritten with one
// metadata key or tensor changed (GgufBuilder), so each case isolates one fault.
//
// Covered elsewhere, and not repeated here:
//   GGUF structure (counts, strings, arrays, offsets, every truncated prefix) test_gguf_bad_input
//   config values through the library, NaN/Inf rope_freqs               test_model_config
//   config.json values (counts, eps, rope, heads)                        test_hf_config
//   safetensors headers                                                  test_safetensors
//   NaN/Inf weights and scales: inspect --verify                          test_cli_inspect,
//                                                                         test_verify_weights
//   prompt longer than -c, --top-p 2, --temp -1, -c 0, -n -2             test_cli_run
//   --decode ids outside the vocabulary ("1 512")                         test_cli_tokenize
//   SIGINT, closed stdout, --batch interrupted and resumed               test_cli_signals
//   malformed --batch lines, --resume                                    test_batch_io,
//                                                                         test_cli_run_modes
// Each TEST_CASE prints one line "hostile: CATEGORY inputs=N crashes=C hangs=H wrong_exit=W"
// for the reliability note (run the binary with -s to see them).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/kv_cache.h"
#include "support/cli_process.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;
namespace gv = llmctl::gguf_value;

namespace {

constexpr double kDeadline = 60.0;

struct Edit {
  std::string key;
  std::optional<GgufValue> value;  // nullopt: remove the key
};
using TensorEdit = std::function<void(GgufBuilder::Tensor&)>;

// stories260K with `edits` applied to its metadata and `tensor_edit` to each tensor.
std::string variant(const std::string& name, const std::vector<Edit>& edits,
                    const TensorEdit& tensor_edit = nullptr) {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  GgufBuilder b;
  for (const auto& kv : f.metadata()) {
    bool removed = false;
    for (const auto& e : edits) removed = removed || (e.key == kv.key && !e.value);
    if (!removed) b.set(kv.key, kv.value);
  }
  for (const auto& e : edits)
    if (e.value) b.set(e.key, *e.value);
  for (const auto& t : f.tensors()) {
    GgufBuilder::Tensor x{t.name, t.type, t.shape,
                          std::vector<uint8_t>(t.data, t.data + t.n_bytes)};
    if (tensor_edit) tensor_edit(x);
    b.add_tensor(x.name, x.type, x.shape, x.bytes);
  }
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  b.write(path);
  return path;
}

struct Case {
  std::string what;
  std::vector<std::string> args;
  int code;             // expected exit code
  std::string message;  // expected in stderr
  std::string stdin_data = "";
  test::StdinMode stdin_mode = test::StdinMode::Data;
};

// Runs every case; checks exit code and message; prints the category's tally.
void run_cases(const std::string& category, const std::vector<Case>& cases) {
  int crashes = 0, hangs = 0, wrong = 0;
  for (const Case& c : cases) {
    const test::CliExit e = test::run_llmctl_for(c.args, kDeadline, c.stdin_data, c.stdin_mode);
    INFO(category << ": " << c.what << "\nstderr: " << e.err);
    CHECK_FALSE(e.timed_out);
    CHECK_FALSE(e.signaled);
    CHECK(e.code == c.code);
    CHECK(e.err.find(c.message) != std::string::npos);
    hangs += e.timed_out ? 1 : 0;
    crashes += (e.signaled && !e.timed_out) ? 1 : 0;
    wrong += (!e.timed_out && !e.signaled && e.code != c.code) ? 1 : 0;
  }
  std::printf("hostile: %s inputs=%zu crashes=%d hangs=%d wrong_exit=%d\n", category.c_str(),
              cases.size(), crashes, hangs, wrong);
}

std::vector<std::string> run_args(const std::string& model) {
  return {"run", "-m", model, "-p", "Once upon a time", "-n", "4", "--temp", "0"};
}

Case meta_case(const std::string& what, const std::vector<Edit>& edits,
               const std::string& message) {
  static int n = 0;
  return {what, run_args(variant("meta" + std::to_string(n++), edits)), 1, message};
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("hostile metadata: counts, heads, rope base, norm epsilon", "[cli]") {
  const std::string k = "llama.";
  run_cases(
      "metadata counts",
      {
          meta_case("zero layers", {{k + "block_count", gv::u32(0)}},
                    "'llama.block_count' = 0 is outside [1, 4096]"),
          meta_case("2^32-1 layers", {{k + "block_count", gv::u32(0xffffffffu)}},
                    "'llama.block_count' = 4294967295 is outside"),
          meta_case("4096 layers, tensors for 5", {{k + "block_count", gv::u32(4096)}}, "blk.5."),
          meta_case("zero heads", {{k + "attention.head_count", gv::u32(0)}},
                    "'llama.attention.head_count' = 0 is outside"),
          meta_case("huge heads", {{k + "attention.head_count", gv::u64(1ull << 40)}},
                    "'llama.attention.head_count' = 1099511627776 is outside"),
          meta_case("zero KV heads", {{k + "attention.head_count_kv", gv::u32(0)}},
                    "'llama.attention.head_count_kv' = 0 is outside"),
          meta_case("KV heads do not divide heads", {{k + "attention.head_count_kv", gv::u32(3)}},
                    "head_count_kv = 3 does not divide head_count = 8"),
          meta_case("heads do not divide n_embd, no key_length",
                    {{k + "attention.head_count", gv::u32(6)},
                     {k + "attention.head_count_kv", gv::u32(6)}},
                    "head_count = 6 does not divide embedding_length = 64"),
          meta_case("zero context", {{k + "context_length", gv::u32(0)}},
                    "'llama.context_length' = 0 is outside"),
          meta_case("2^40 context", {{k + "context_length", gv::u64(1ull << 40)}},
                    "'llama.context_length' = 1099511627776 is outside"),
          meta_case("negative n_embd", {{k + "embedding_length", gv::i32(-64)}},
                    "'llama.embedding_length' = -64 is outside"),
          meta_case("rope base 0", {{k + "rope.freq_base", gv::f32(0.0f)}},
                    "rope.freq_base = 0 must be a finite number above 1"),
          meta_case("rope base -1", {{k + "rope.freq_base", gv::f32(-1.0f)}},
                    "rope.freq_base = -1 must be a finite number above 1"),
          meta_case("rope base NaN", {{k + "rope.freq_base", gv::f32(kNaN)}},
                    "must be a finite number above 1"),
          meta_case("rope base Inf", {{k + "rope.freq_base", gv::f32(kInf)}},
                    "must be a finite number above 1"),
          meta_case("norm eps 0", {{k + "attention.layer_norm_rms_epsilon", gv::f32(0.0f)}},
                    "layer_norm_rms_epsilon = 0 is outside (0, 1)"),
          meta_case("norm eps -1", {{k + "attention.layer_norm_rms_epsilon", gv::f32(-1.0f)}},
                    "layer_norm_rms_epsilon = -1 is outside (0, 1)"),
          meta_case("norm eps NaN", {{k + "attention.layer_norm_rms_epsilon", gv::f32(kNaN)}},
                    "layer_norm_rms_epsilon = nan is outside (0, 1)"),
          meta_case("odd rope dims", {{k + "rope.dimension_count", gv::u32(7)}},
                    "rope.dimension_count = 7 is odd"),
      });
}

TEST_CASE("hostile metadata: tensor shapes that disagree with the configuration", "[cli]") {
  auto reshape = [](const std::string& name, std::vector<int64_t> shape) {
    return [name, shape](GgufBuilder::Tensor& t) {
      if (t.name == name) t.shape = shape;
    };
  };
  const auto rows = run_args(variant("shape_k", {}, reshape("blk.1.attn_k.weight", {32, 64})));
  const auto embd = run_args(variant("shape_embd", {{"llama.embedding_length", gv::u32(32)},
                                                    {"llama.rope.dimension_count", gv::u32(4)}}));
  const auto drop = run_args(variant("drop_ffn", {}, [](GgufBuilder::Tensor& t) {
    if (t.name == "blk.3.ffn_down.weight") t.name = "blk.3.ffn_down.weight.renamed";
  }));
  // Without --verify a NaN weight is caught where it surfaces: the sampler refuses NaN
  // logits (inspect --verify names the tensor: test_cli_inspect).
  const auto nan_weight = run_args(variant("nan_weight", {}, [](GgufBuilder::Tensor& t) {
    if (t.name != "blk.2.attn_q.weight") return;
    const float nan = std::nanf("");
    std::memcpy(t.bytes.data() + 4 * 200, &nan, 4);
  }));
  run_cases("tensor shapes and values",
            {
                {"attn_k transposed", rows, 1,
                 "tensor 'blk.1.attn_k.weight': expected [64, 32], got [32, 64]"},
                {"n_embd 32 for 64-wide tensors", embd, 1,
                 "tensor 'token_embd.weight': expected [32, 512], got [64, 512]"},
                {"a layer tensor missing", drop, 1, "missing tensor 'blk.3.ffn_down.weight'"},
                {"a NaN weight, no --verify", nan_weight, 1, "sampler: logits contain NaN"},
            });
  // With --verify the scan names the tensor before anything runs.
  std::vector<std::string> verified = nan_weight;
  verified.push_back("--verify");
  run_cases("tensor values, --verify", {{"a NaN weight, --verify", verified, 1,
                                         "blk.2.attn_q.weight"}});
}

TEST_CASE("hostile metadata: vocabulary arrays and special token ids", "[cli]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  auto shortened = [&](const std::string& key) {
    GgufValue v = *f.find(key);
    v.arr.pop_back();
    return v;
  };
  // One more entry, a copy of the last with another piece (for the string array).
  auto longer = [&](const std::string& key, const std::string& piece) {
    GgufValue v = *f.find(key);
    GgufValue extra = v.arr.back();
    if (!piece.empty()) extra.s = piece;
    v.arr.push_back(extra);
    return v;
  };
  const std::string t = "tokenizer.ggml.";
  std::vector<Case> cases{
      meta_case("scores shorter than tokens", {{t + "scores", shortened(t + "scores")}},
                "tokenizer.ggml.scores has 511 entries, tokenizer.ggml.tokens 512"),
      meta_case("token_type shorter than tokens", {{t + "token_type", shortened(t + "token_type")}},
                "tokenizer.ggml.token_type has 511 entries, tokenizer.ggml.tokens 512"),
      meta_case("no tokens", {{t + "tokens", gv::string_array({})}}, "tokenizer.ggml.tokens"),
      meta_case("more tokens than embedding rows",
                {{t + "tokens", longer(t + "tokens", "<extra>")},
                 {t + "scores", longer(t + "scores", "")},
                 {t + "token_type", longer(t + "token_type", "")}},
                "the vocabulary has 513 tokens but the model embeds only 512"),
      meta_case("bos id outside", {{t + "bos_token_id", gv::u32(512)}},
                "tokenizer.ggml.bos_token_id = 512 is out of range (vocabulary of 512 tokens)"),
      meta_case("eos id outside", {{t + "eos_token_id", gv::u32(1u << 31)}},
                "tokenizer.ggml.eos_token_id = 2147483648 is out of range"),
      meta_case("unknown id outside", {{t + "unknown_token_id", gv::u32(100000)}},
                "tokenizer.ggml.unknown_token_id = 100000 is out of range"),
  };
  run_cases("vocabulary", cases);
}

TEST_CASE("hostile runtime options: prompt, -n, sampling values, token ids", "[cli]") {
  const std::string m = test::require_test_file("models/stories260K.gguf");
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a{"run", "-m", m, "-p", "Once upon a time"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  run_cases(
      "runtime options",
      {
          {"prompt longer than -c", with({"-c", "3"}), 1, "-c/--ctx-size"},
          {"-n 0: nothing to generate", with({"-n", "0"}), 0, " gen_tokens=0 "},
          {"-n -1: until EOS or a full context", with({"-n", "-1", "-c", "12", "--ignore-eos"}), 0,
           " finish=length "},
          {"-n -3", with({"-n", "-3"}), 2, "-n"},
          {"--temp nan", with({"--temp", "nan"}), 2, "temperature must be finite"},
          {"--temp inf", with({"--temp", "inf"}), 2, "temperature must be finite"},
          {"--top-p 0", with({"--top-p", "0"}), 2, "top_p must be in (0, 1]"},
          {"--top-p -0.5", with({"--top-p", "-0.5"}), 2, "top_p must be in (0, 1]"},
          {"--top-p 1.0001", with({"--top-p", "1.0001"}), 2, "top_p must be in (0, 1]"},
          {"--top-p nan", with({"--top-p", "nan"}), 2, "top_p must be in (0, 1]"},
          {"--min-p 2", with({"--min-p", "2"}), 2, "min_p must be in [0, 1]"},
          {"--top-k -1", with({"--top-k", "-1"}), 2, "top_k must be >= 0"},
          {"--repeat-penalty nan", with({"--repeat-penalty", "nan"}), 2,
           "repeat_penalty must be finite"},
          {"-t -1", with({"-t", "-1"}), 2, "-t"},
          {"--decode 512 (vocab 512)",
           {"tokenize", "-m", m, "--decode", "1 512"},
           1,
           "token id 512 is out of range (vocabulary of 512 tokens)"},
          {"--decode -1", {"tokenize", "-m", m, "--decode", "-1"}, 1, "-1"},
          {"--decode 2^40", {"tokenize", "-m", m, "--decode", "1099511627776"}, 1, "1099511627776"},
          {"empty prompt, no BOS", {"run", "-m", m, "-p", "", "--no-bos"}, 1, "empty"},
      });
}

TEST_CASE("hostile runtime: stdin closed or empty, truncated and odd model files, memory",
          "[cli]") {
  const std::string m = test::require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir();
  const std::string whole = test::read_file(m);
  test::write_file(dir + "/head.gguf", whole.substr(0, 1000));              // inside the metadata
  test::write_file(dir + "/data.gguf", whole.substr(0, whole.size() / 2));  // inside tensors
  test::write_file(dir + "/empty.gguf", "");
  const std::vector<std::string> from_stdin{"run", "-m", m, "-n", "4", "--temp", "0"};
  run_cases("runtime io",
            {
                {"stdin closed, no -p", from_stdin, 1, "<stdin>: read failed", "",
                 test::StdinMode::Closed},
                // Not a terminal and empty: the prompt is "" and generation starts from BOS alone.
                {"stdin empty (not a terminal), no -p", from_stdin, 0, " prompt_tokens=1 ", ""},
                // -i reads turns until EOF; a closed stdin reads as EOF at once (no turn, exit 0).
                {"-i with stdin closed",
                 {"run", "-m", m, "-i", "-n", "4", "--chat-template", "chatml"},
                 0,
                 "end with EOF",
                 "",
                 test::StdinMode::Closed},
                {"model truncated in the metadata", run_args(dir + "/head.gguf"), 1,
                 dir + "/head.gguf: tensor count 48 cannot fit"},
                {"model truncated in the tensor data", run_args(dir + "/data.gguf"), 1,
                 "runs past the end of the"},
                {"empty model file", run_args(dir + "/empty.gguf"), 1,
                 dir + "/empty.gguf: unexpected end of file reading magic"},
                {"model is a directory without config.json", run_args(dir), 1, "no config.json"},
                // 5 layers x 2 x 2e9 positions x 32 dims x 4 bytes = 2.3 TiB, 256 GB per buffer.
                {"KV cache larger than memory",
                 {"run", "-m", m, "-p", "x", "-c", "2000000000", "--kv-type", "f32"},
                 1,
                 "KV cache of 2384.19 GiB"},
                {"KV cache over the block limit",
                 {"run", "-m", m, "-p", "x", "-c", "2147483647"},
                 1,
                 "blocks of 16 positions is more than the"},
            });
}

TEST_CASE("hostile memory request: the KV cache's need is checked before allocating", "[cpu]") {
  cpu::CpuBackend be;
  KvCacheOptions o;
  o.block_size = 16;
  o.n_blocks = 1000;
  o.type = KvType::F16;
  // 2 (K, V) x 5 layers x 16000 positions x 32 dims x 2 bytes.
  CHECK(PagedKvCache::required_bytes(5, 32, o) == 2ull * 5 * 16000 * 32 * 2);
  o.max_bytes = 1'000'000;
  CHECK_THROWS_WITH(PagedKvCache(be, 5, 32, o),
                    Catch::Contains("KV cache of 9.77 MiB (5 layers x K and V x 16000 positions x "
                                    "32 dims x f16) does not fit in the 976.56 KiB available"));
  o.max_bytes = 2ull * 5 * 16000 * 32 * 2;  // exactly enough
  CHECK_NOTHROW(PagedKvCache(be, 5, 32, o));
  // Saturates instead of overflowing.
  o.n_blocks = int64_t{1} << 40;
  CHECK(PagedKvCache::required_bytes(4096, int64_t{1} << 28, o) == UINT64_MAX);
  CHECK(host_kv_memory_limit() > 0);  // Linux /proc/meminfo
}

TEST_CASE("hostile Hugging Face directory: numbers that overflow a double", "[cli]") {
  // Found by fuzz_hf_config: nlohmann reports 1e400 as out_of_range, not parse_error, and it
  // used to escape as "internal error".
  namespace fs = std::filesystem;
  const std::string src = test::fixture_path("hf_tiny_llama");
  auto copy_dir = [&](const std::string& name) {
    const std::string dir = test::temp_dir() + "/" + name;
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(src))
      fs::copy_file(e.path(), fs::path(dir) / e.path().filename());
    return dir;
  };
  const std::string cfg = copy_dir("hf_theta");
  std::string text = test::read_file(cfg + "/config.json");
  text.replace(text.find("\"rope_theta\": 10000.0"), 21, "\"rope_theta\": 1e400");
  test::write_file(cfg + "/config.json", text);
  const std::string st = copy_dir("hf_shape");
  const std::string header = R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  test::write_file(st + "/model.safetensors", file + header + std::string(4, '\0'));
  run_cases("hf numbers", {
                              {"config.json rope_theta 1e400", run_args(cfg), 1,
                               cfg + "/config.json: not usable JSON"},
                              {"safetensors shape [1e400]", run_args(st), 1,
                               st + "/model.safetensors: header is not usable JSON"},
                          });
}

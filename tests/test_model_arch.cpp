// The architecture table (model/arch.h): every row's tensor set, written here by hand with
// llama.cpp's and transformers' names, binds on a generated tiny GGUF and runs; the per-layer
// table is consistent under every combination of switches; unknown architectures are named
// with the known ones; a row or config asking for math the forward pass lacks is refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/hf_config.h"
#include "model/weights.h"
#include "support/random_data.h"

using namespace llmctl;
using Catch::Matchers::Contains;
namespace gv = llmctl::gguf_value;

namespace {

// n_embd 32, 4 heads of 8 (2 kv heads), n_ff 64, 2 layers, 16 tokens.
constexpr int64_t kEmbd = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kFf = 64, kLayers = 2,
                  kVocab = 16;
constexpr int64_t kQDim = kHeads * kHeadDim, kKvDim = kKvHeads * kHeadDim;

// What each row's layers hold, by hand (llama.cpp's tensor names, transformers' module names,
// ggml-order shapes), independent of kLayerTensors.
struct ExpectedTensor {
  std::string gguf, hf;
  std::vector<int64_t> shape;
};

const std::vector<ExpectedTensor> kLlamaLayer = {
    {"attn_norm.weight", "input_layernorm.weight", {kEmbd}},
    {"attn_q.weight", "self_attn.q_proj.weight", {kEmbd, kQDim}},
    {"attn_k.weight", "self_attn.k_proj.weight", {kEmbd, kKvDim}},
    {"attn_v.weight", "self_attn.v_proj.weight", {kEmbd, kKvDim}},
    {"attn_output.weight", "self_attn.o_proj.weight", {kQDim, kEmbd}},
    {"ffn_norm.weight", "post_attention_layernorm.weight", {kEmbd}},
    {"ffn_gate.weight", "mlp.gate_proj.weight", {kEmbd, kFf}},
    {"ffn_up.weight", "mlp.up_proj.weight", {kEmbd, kFf}},
    {"ffn_down.weight", "mlp.down_proj.weight", {kFf, kEmbd}},
};

std::vector<ExpectedTensor> qwen2_layer() {
  std::vector<ExpectedTensor> t = kLlamaLayer;
  t.push_back({"attn_q.bias", "self_attn.q_proj.bias", {kQDim}});
  t.push_back({"attn_k.bias", "self_attn.k_proj.bias", {kKvDim}});
  t.push_back({"attn_v.bias", "self_attn.v_proj.bias", {kKvDim}});
  return t;
}

// Gemma 3 (llama.cpp's gemma3 tensor list, transformers' Gemma3DecoderLayer): norms on both
// sides of attention and FFN, QK-norm per head.
std::vector<ExpectedTensor> gemma3_layer() {
  std::vector<ExpectedTensor> t = kLlamaLayer;
  t[5].hf = "pre_feedforward_layernorm.weight";
  t.push_back({"attn_q_norm.weight", "self_attn.q_norm.weight", {kHeadDim}});
  t.push_back({"attn_k_norm.weight", "self_attn.k_norm.weight", {kHeadDim}});
  t.push_back({"post_attention_norm.weight", "post_attention_layernorm.weight", {kEmbd}});
  t.push_back({"post_ffw_norm.weight", "post_feedforward_layernorm.weight", {kEmbd}});
  return t;
}

// Qwen 3 (llama.cpp's qwen3 tensor list, transformers' Qwen3DecoderLayer): llama plus
// QK-norm per head.
std::vector<ExpectedTensor> qwen3_layer() {
  std::vector<ExpectedTensor> t = kLlamaLayer;
  t.push_back({"attn_q_norm.weight", "self_attn.q_norm.weight", {kHeadDim}});
  t.push_back({"attn_k_norm.weight", "self_attn.k_norm.weight", {kHeadDim}});
  return t;
}

// OLMo 2 (llama.cpp's olmo2, transformers' Olmo2DecoderLayer): no norms before attention or
// FFN, norms after both, QK-norm over the whole q and k.
std::vector<ExpectedTensor> olmo2_layer() {
  std::vector<ExpectedTensor> t;
  for (const ExpectedTensor& e : kLlamaLayer)
    if (e.gguf != "attn_norm.weight" && e.gguf != "ffn_norm.weight") t.push_back(e);
  t.push_back({"attn_q_norm.weight", "self_attn.q_norm.weight", {kQDim}});
  t.push_back({"attn_k_norm.weight", "self_attn.k_norm.weight", {kKvDim}});
  t.push_back({"post_attention_norm.weight", "post_attention_layernorm.weight", {kEmbd}});
  t.push_back({"post_ffw_norm.weight", "post_feedforward_layernorm.weight", {kEmbd}});
  return t;
}

// Gemma 2 (llama.cpp's gemma2, transformers' Gemma2DecoderLayer): Gemma 3 without QK-norm.
std::vector<ExpectedTensor> gemma2_layer() {
  std::vector<ExpectedTensor> t = gemma3_layer();
  t.erase(t.begin() + static_cast<std::ptrdiff_t>(kLlamaLayer.size()),
          t.begin() + static_cast<std::ptrdiff_t>(kLlamaLayer.size()) + 2);
  return t;
}

// Phi-3 (llama.cpp's phi3 tensor list, transformers' Phi3DecoderLayer): llama with one fused
// QKV projection and one fused gate/up projection (ffn_up of 2 n_ff rows).
std::vector<ExpectedTensor> phi3_layer() {
  return {
      {"attn_norm.weight", "input_layernorm.weight", {kEmbd}},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight", {kEmbd, kQDim + 2 * kKvDim}},
      {"attn_output.weight", "self_attn.o_proj.weight", {kQDim, kEmbd}},
      {"ffn_norm.weight", "post_attention_layernorm.weight", {kEmbd}},
      {"ffn_up.weight", "mlp.gate_up_proj.weight", {kEmbd, 2 * kFf}},
      {"ffn_down.weight", "mlp.down_proj.weight", {kFf, kEmbd}},
  };
}

// Mixture of experts (llama.cpp's qwen2moe and qwen3moe tensor lists): the dense FFN replaced
// by the router and 3-D expert tensors [n_embd, n_ff_exp, n_expert] (down [n_ff_exp, n_embd,
// n_expert]); qwen2moe adds the shared expert and its gate. No HF names (GGUF only).
constexpr int64_t kExperts = 4, kExpertsUsed = 2, kFfExpert = 16, kFfShared = 24;

std::vector<ExpectedTensor> routed(std::vector<ExpectedTensor> dense, bool shared) {
  std::vector<ExpectedTensor> t;
  for (const ExpectedTensor& e : dense)
    if (e.gguf.rfind("ffn_", 0) != 0 || e.gguf == "ffn_norm.weight") t.push_back(e);
  t.push_back({"ffn_gate_inp.weight", "", {kEmbd, kExperts}});
  t.push_back({"ffn_gate_exps.weight", "", {kEmbd, kFfExpert, kExperts}});
  t.push_back({"ffn_up_exps.weight", "", {kEmbd, kFfExpert, kExperts}});
  t.push_back({"ffn_down_exps.weight", "", {kFfExpert, kEmbd, kExperts}});
  if (shared) {
    t.push_back({"ffn_gate_inp_shexp.weight", "", {kEmbd}});
    t.push_back({"ffn_gate_shexp.weight", "", {kEmbd, kFfShared}});
    t.push_back({"ffn_up_shexp.weight", "", {kEmbd, kFfShared}});
    t.push_back({"ffn_down_shexp.weight", "", {kFfShared, kEmbd}});
  }
  return t;
}

// gpt-oss (llama.cpp's openai-moe tensor list): qwen2's attention plus an output bias and one
// sink per head, the pre-FFN norm named post_attention_norm, routed experts with a router
// bias and 2-D expert biases [n_ff_exp | n_embd, n_expert]. GGUF only.
std::vector<ExpectedTensor> gptoss_layer() {
  std::vector<ExpectedTensor> t = routed(qwen2_layer(), false);
  for (ExpectedTensor& e : t)
    if (e.gguf == "ffn_norm.weight") e.gguf = "post_attention_norm.weight";
  t.push_back({"attn_output.bias", "self_attn.o_proj.bias", {kEmbd}});
  t.push_back({"attn_sinks.weight", "self_attn.sinks", {kHeads}});
  t.push_back({"ffn_gate_inp.bias", "", {kExperts}});
  t.push_back({"ffn_gate_exps.bias", "", {kFfExpert, kExperts}});
  t.push_back({"ffn_up_exps.bias", "", {kFfExpert, kExperts}});
  t.push_back({"ffn_down_exps.bias", "", {kEmbd, kExperts}});
  return t;
}

// Every row of kArchRows must have its expectation here (granite's layers are llama's).
std::map<std::string, std::vector<ExpectedTensor>> expected_layers() {
  return {{"llama", kLlamaLayer},
          {"qwen2", qwen2_layer()},
          {"qwen3", qwen3_layer()},
          {"qwen2moe", routed(qwen2_layer(), true)},
          {"qwen3moe", routed(qwen3_layer(), false)},
          {"olmo2", olmo2_layer()},
          {"gemma2", gemma2_layer()},
          {"gemma3", gemma3_layer()},
          {"granite", kLlamaLayer},
          {"phi3", phi3_layer()},
          {"mistral3", kLlamaLayer},
          {"gpt-oss", gptoss_layer()}};
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A tiny random GGUF of architecture `arch` with the given layer tensors.
GgufBuilder tiny_model(const std::string& arch, const std::vector<ExpectedTensor>& layer) {
  std::mt19937 rng(7);
  GgufBuilder b;
  const std::string a = arch + ".";
  b.set("general.architecture", gv::string(arch));
  b.set(a + "embedding_length", gv::u32(static_cast<uint32_t>(kEmbd)));
  b.set(a + "block_count", gv::u32(static_cast<uint32_t>(kLayers)));
  b.set(a + "attention.head_count", gv::u32(static_cast<uint32_t>(kHeads)));
  b.set(a + "attention.head_count_kv", gv::u32(static_cast<uint32_t>(kKvHeads)));
  b.set(a + "feed_forward_length", gv::u32(static_cast<uint32_t>(kFf)));
  b.set(a + "context_length", gv::u32(64));
  b.set(a + "attention.layer_norm_rms_epsilon", gv::f32(1e-5f));
  b.set(a + "logit_scale", gv::f32(1.0f));  // required by granite, read by no other row
  const ArchRow* row = find_arch_by_gguf(arch);
  if (row != nullptr && row->moe.experts == MoeExperts::Required) {
    b.set(a + "expert_count", gv::u32(static_cast<uint32_t>(kExperts)));
    b.set(a + "expert_used_count", gv::u32(static_cast<uint32_t>(kExpertsUsed)));
    b.set(a + "expert_feed_forward_length", gv::u32(static_cast<uint32_t>(kFfExpert)));
    b.set(a + "expert_shared_feed_forward_length", gv::u32(static_cast<uint32_t>(kFfShared)));
  }
  if (row != nullptr && row->window.length_required) b.set(a + "attention.sliding_window", gv::u32(2));
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    std::vector<float> v = test::random_floats(rng, static_cast<size_t>(n), 0.2f);
    if (shape.size() == 1)
      for (float& x : v) x += 1.0f;  // norms near 1
    b.add_tensor(name, GgmlType::F32, std::move(shape), f32_bytes(v));
  };
  add("token_embd.weight", {kEmbd, kVocab});
  add("output_norm.weight", {kEmbd});
  for (int64_t il = 0; il < kLayers; ++il)
    for (const ExpectedTensor& t : layer) add("blk." + std::to_string(il) + "." + t.gguf, t.shape);
  return b;
}

GgufFile open_built(const GgufBuilder& b) {
  return GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(b.build()), "t.gguf");
}

std::string config_error(const GgufBuilder& b, const ArchTable& table = {}) {
  try {
    config_from_gguf(open_built(b), table);
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

// The tensors of layer `il` bound in `l`, by name.
std::map<std::string, const WeightView*> bound_tensors(const LayerWeights& l) {
  std::map<std::string, const WeightView*> out;
  for (const LayerTensor& t : kLayerTensors) {
    const WeightView& v = l.*t.member;
    if (v.present()) out[v.name] = &v;
  }
  return out;
}

// A config of the tiny shape with the given switches (not through a reader).
ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = "llama";
  c.n_vocab = kVocab;
  c.n_embd = kEmbd;
  c.n_layers = kLayers;
  c.n_heads = kHeads;
  c.n_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.n_ff = kFf;
  c.n_ctx_train = 64;
  c.n_rot = kHeadDim;
  return c;
}

}  // namespace

TEST_CASE("arch table: every row's tensor set binds on a generated tiny model and runs", "[cpu]") {
  const auto expected = expected_layers();
  REQUIRE(expected.size() == ArchTable{}.n_rows);
  for (const ArchRow& row : ArchTable{}) {
    INFO(row.gguf_name);
    REQUIRE(expected.count(row.gguf_name) == 1);
    const std::vector<ExpectedTensor>& layer = expected.at(row.gguf_name);
    const GgufFile f = open_built(tiny_model(row.gguf_name, layer));
    const ModelConfig c = config_from_gguf(f);
    CHECK(c.arch == row.gguf_name);
    CHECK(c.rope_type == row.gguf_rope);
    CHECK(c.has_qkv_bias == row.qkv_bias);
    const ModelWeights w = bind_weights(f, c);
    REQUIRE(w.layers.size() == static_cast<size_t>(kLayers));
    for (int64_t il = 0; il < kLayers; ++il) {
      const auto bound = bound_tensors(w.layers[static_cast<size_t>(il)]);
      CHECK(bound.size() == layer.size());  // nothing more is bound
      for (const ExpectedTensor& t : layer) {
        const std::string name = "blk." + std::to_string(il) + "." + t.gguf;
        INFO(name);
        REQUIRE(bound.count(name) == 1);
        const WeightView& v = *bound.at(name);
        CHECK(v.n_cols == t.shape[0]);
        CHECK(v.n_rows == elements(t.shape) / t.shape[0]);  // 3-D: n_expert matrices
      }
    }
    // The HF names the table gives for this row's present tensors are transformers' names.
    std::set<std::string> hf_names, want_hf;
    for (const LayerTensor& t : kLayerTensors)
      if (layer_tensor_present(t, c)) hf_names.insert(hf_tensor_name(t, 1, c));
    for (const ExpectedTensor& t : layer) want_hf.insert("model.layers.1." + t.hf);
    CHECK(hf_names == want_hf);

    // Each tensor counts once in the statistics: 2 layers of the expected elements, plus
    // token_embd (tied output) and output_norm.
    uint64_t layer_params = 0;
    for (const ExpectedTensor& t : layer) layer_params += static_cast<uint64_t>(elements(t.shape));
    CHECK(weight_stats(w).params ==
          static_cast<uint64_t>(kLayers) * layer_params + uint64_t{kEmbd * kVocab + kEmbd});

    cpu::CpuBackend backend;
    Forward fwd(c, w, backend, 4);
    for (const int32_t token : {1, 7, 3}) {
      const std::vector<float>& logits = fwd.step(token);
      REQUIRE(logits.size() == static_cast<size_t>(kVocab));
      for (const float x : logits) CHECK(std::isfinite(x));
    }
  }
}

TEST_CASE("arch table: rows and the layer table are consistent", "[cpu]") {
  std::set<std::string> gguf_names, hf_classes;
  for (const ArchRow& row : ArchTable{}) {
    INFO(row.gguf_name);
    CHECK(gguf_names.insert(row.gguf_name).second);
    for (const char* cls : row.hf_classes)
      if (cls != nullptr) CHECK(hf_classes.insert(cls).second);
    // Hugging Face rotates halves in every family: only adjacent pairing in GGUF needs the
    // Q/K permutation.
    CHECK(row.hf_qk_permute == (row.gguf_rope == RopeType::Normal));
    CHECK(find_arch_by_gguf(row.gguf_name) == &row);
    ModelConfig c = tiny_config();
    apply_arch_row(row, c);
    CHECK(unimplemented_math(c).empty());  // a listed row runs
  }
  // One entry per member.
  for (size_t i = 0; i < kLayerTensors.size(); ++i)
    for (size_t j = 0; j < i; ++j) CHECK(kLayerTensors[i].member != kLayerTensors[j].member);
  // Under every combination of switches, present tensors have distinct GGUF and HF names.
  for (const NormPlacement norms : {NormPlacement::Pre, NormPlacement::Post, NormPlacement::Both})
    for (const QkNorm qk : {QkNorm::None, QkNorm::PerHead, QkNorm::WholeVector})
      for (const bool fused_qkv : {false, true})
        for (const bool fused_gate_up : {false, true})
          for (const bool bias : {false, true}) {
            ModelConfig c = tiny_config();
            c.norms = norms;
            c.qk_norm = qk;
            c.fused_qkv = fused_qkv;
            c.fused_gate_up = fused_gate_up;
            c.has_qkv_bias = bias;
            std::set<std::string> g, h;
            size_t n = 0;
            for (const LayerTensor& t : kLayerTensors) {
              if (!layer_tensor_present(t, c)) continue;
              ++n;
              g.insert(gguf_tensor_name(t, 0, c));
              h.insert(hf_tensor_name(t, 0, c));
            }
            CHECK(g.size() == n);
            CHECK(h.size() == n);
          }
}

TEST_CASE("arch table: tensors of switches no row uses yet bind by their names and shapes",
          "[cpu]") {
  // Gemma-style norms on both sides, QK-norm per head (on a llama file); then OLMo2-style
  // whole-vector QK-norm with fused projections (phi3's, no row has both).
  ModelConfig c = tiny_config();
  c.norms = NormPlacement::Both;
  c.qk_norm = QkNorm::PerHead;
  const std::vector<ExpectedTensor> layer = gemma3_layer();
  const GgufFile f = open_built(tiny_model("llama", layer));
  const ModelWeights w = bind_weights(f, c);
  const LayerWeights& l = w.layers[1];
  CHECK(l.attn_q_norm.name == "blk.1.attn_q_norm.weight");
  CHECK(l.attn_k_norm.n_cols == kHeadDim);
  CHECK(l.attn_post_norm.name == "blk.1.post_attention_norm.weight");
  CHECK(l.ffn_post_norm.name == "blk.1.post_ffw_norm.weight");
  CHECK(bound_tensors(l).size() == layer.size());
  std::set<std::string> hf_names, want_hf;
  for (const LayerTensor& t : kLayerTensors)
    if (layer_tensor_present(t, c)) hf_names.insert(hf_tensor_name(t, 0, c));
  for (const ExpectedTensor& t : layer) want_hf.insert("model.layers.0." + t.hf);
  CHECK(hf_names == want_hf);

  c.norms = NormPlacement::Post;  // no pre-norms at all
  c.qk_norm = QkNorm::WholeVector;
  c.fused_qkv = true;
  c.fused_gate_up = true;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const LayerTensor& t : kLayerTensors)
    if (layer_tensor_present(t, c)) shapes[t.gguf] = layer_tensor_shape(t, c);
  const std::map<std::string, std::vector<int64_t>> want = {
      {"attn_qkv.weight", {kEmbd, kQDim + 2 * kKvDim}},
      {"attn_output.weight", {kQDim, kEmbd}},
      {"attn_q_norm.weight", {kQDim}},
      {"attn_k_norm.weight", {kKvDim}},
      {"post_attention_norm.weight", {kEmbd}},
      {"ffn_up.weight", {kEmbd, 2 * kFf}},
      {"ffn_down.weight", {kFf, kEmbd}},
      {"post_ffw_norm.weight", {kEmbd}},
  };
  CHECK(shapes == want);
}

TEST_CASE("arch table: an unknown architecture's error names the known ones", "[cpu]") {
  const std::string gguf = config_error(tiny_model("phi2", kLlamaLayer));
  CHECK_THAT(gguf, Contains("t.gguf: architecture 'phi2' is not supported (supported: "));
  for (const ArchRow& row : ArchTable{}) CHECK_THAT(gguf, Contains(row.gguf_name));

  nlohmann::json j = {{"architectures", {"PhiForCausalLM"}}};
  std::string hf = "(no error)";
  try {
    hf_config_from_json(j.dump(), "config.json");
  } catch (const FileError& e) {
    hf = e.what();
  }
  CHECK_THAT(hf, Contains("architecture 'PhiForCausalLM' is not supported (supported: "));
  for (const ArchRow& row : ArchTable{})
    for (const char* cls : row.hf_classes)
      if (cls != nullptr) CHECK_THAT(hf, Contains(cls));
}

TEST_CASE("arch table: a row asking for math the forward pass lacks is refused", "[cpu]") {
  struct Case {
    const char* what;
    void (*edit)(ArchRow&);
  };
  const Case cases[] = {
      {"biases on a fused QKV projection",
       [](ArchRow& r) {
         r.fused_qkv = true;
         r.qkv_bias = true;
       }},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    ArchRow row = kArchRows[0];  // llama, plus one switch
    row.gguf_name = "testarch";
    row.hf_classes = {"TestArchForCausalLM", nullptr, nullptr, nullptr};
    k.edit(row);
    const ArchTable table{&row, 1};
    const std::string err = config_error(tiny_model("testarch", kLlamaLayer), table);
    CHECK_THAT(err, Contains("t.gguf: architecture 'testarch' needs "));
    CHECK_THAT(err, Contains(k.what));
    CHECK_THAT(err, Contains("which llmctl's forward pass does not implement yet"));

    const nlohmann::json j = {{"architectures", {"TestArchForCausalLM"}},
                              {"vocab_size", kVocab},
                              {"hidden_size", kEmbd},
                              {"num_hidden_layers", kLayers},
                              {"num_attention_heads", kHeads},
                              {"intermediate_size", kFf},
                              {"max_position_embeddings", 64}};
    std::string hf_err = "(no error)";
    try {
      hf_config_from_json(j.dump(), "config.json", table);
    } catch (const FileError& e) {
      hf_err = e.what();
    }
    // (hidden_act defaults to the row's activation, so the GELU row gets this far too.)
    CHECK_THAT(hf_err, Contains("config.json: architecture 'testarch' needs "));
    CHECK_THAT(hf_err, Contains(k.what));
  }
  ArchRow row = kArchRows[0];
  row.fused_qkv = true;
  row.qkv_bias = true;
  CHECK(config_error(tiny_model("llama", kLlamaLayer), ArchTable{&row, 1}) ==
        "t.gguf: architecture 'llama' needs biases on a fused QKV projection, which llmctl's "
        "forward pass does not implement yet");
}

TEST_CASE("arch table: the forward pass refuses a config asking for math it lacks", "[cpu]") {
  const GgufFile f = open_built(tiny_model("llama", kLlamaLayer));
  ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend backend;
  c.fused_qkv = true;
  c.has_qkv_bias = true;
  CHECK_THROWS_WITH(Forward(c, w, backend, 4),
                    Contains("architecture 'llama' needs biases on a fused QKV projection"));
}

TEST_CASE("arch table: llama.cpp's defaults for the keys a file leaves out", "[cpu]") {
  // gemma2: window 4096 on even layers, soft-caps 50 and 30, the 27B's attention scale.
  const ModelConfig g = config_from_gguf(open_built(tiny_model("gemma2", gemma2_layer())));
  CHECK(g.sliding_window == 4096);
  CHECK(layer_window(g, 0) == 4096);
  CHECK(layer_window(g, 1) == 0);
  CHECK(g.attn_softcap == 50.0);
  CHECK(g.final_softcap == 30.0);
  CHECK(g.embd_scale == Approx(std::sqrt(static_cast<double>(kEmbd))));
  CHECK(g.attn_scale == 0.0);  // 1/sqrt(head_dim)
  ModelConfig big = tiny_config();
  big.n_layers = 46;
  apply_arch_row(*find_arch_by_gguf("gemma2"), big);
  CHECK(big.attn_scale == Approx(1.0 / std::sqrt(static_cast<double>(kEmbd / kHeads))));
  // olmo2: no window without the key.
  CHECK(config_from_gguf(open_built(tiny_model("olmo2", olmo2_layer()))).sliding_window == 0);

  // granite: logit_scale is required, the other scales optional (0: none).
  GgufBuilder gr = tiny_model("granite", kLlamaLayer);
  gr.set("granite.attention.scale", gv::f32(0.0f));
  gr.set("granite.residual_scale", gv::f32(0.25f));
  const ModelConfig c = config_from_gguf(open_built(gr));
  CHECK(c.attn_scale == 0.0);
  CHECK(c.residual_scale == 0.25);
  CHECK(c.embd_scale == 1.0);
  CHECK(c.logit_scale == 1.0);
  gr.set("granite.logit_scale", gv::f32(-2.0f));
  CHECK_THAT(config_error(gr),
             Contains("metadata 'granite.logit_scale' = -2 must be a finite number above 0"));
}

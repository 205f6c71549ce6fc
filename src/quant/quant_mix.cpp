// llama.cpp's quantization mixes (quant_mix.h): the table of mixes and the per-tensor rules,
// learnt from llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) and checked against the
// types llama-quantize writes (tests/fixtures/quant_mix_llamacpp.json, tools/gen_quant_mix_fixture.py).
#include "quant/quant_mix.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

namespace llmctl {

namespace {

// llama_ftype numbers (llama.h): the mixes the rules below name.
enum Ftype : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9, kQ2_K = 10,
  kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15, kQ5_K_S = 16,
  kQ5_K_M = 17, kQ6_K = 18, kQ2_K_S = 21, kIQ4_NL = 25, kIQ4_XS = 30, kBF16 = 32,
  kMXFP4_MOE = 38,
};

// The IQ1/IQ2/IQ3 mixes need an importance matrix and their own encoders: not offered.
const std::array<QuantMix, 21> kMixes = {{
    {"F32", kF32, GgmlType::F32},
    {"F16", kF16, GgmlType::F16},
    {"BF16", kBF16, GgmlType::BF16},
    {"Q8_0", kQ8_0, GgmlType::Q8_0},
    {"Q6_K", kQ6_K, GgmlType::Q6_K},
    {"Q5_K_M", kQ5_K_M, GgmlType::Q5_K},
    {"Q5_K_S", kQ5_K_S, GgmlType::Q5_K},
    {"Q5_1", kQ5_1, GgmlType::Q5_1},
    {"Q5_0", kQ5_0, GgmlType::Q5_0},
    {"Q4_K_M", kQ4_K_M, GgmlType::Q4_K},
    {"Q4_K_S", kQ4_K_S, GgmlType::Q4_K},
    {"Q4_1", kQ4_1, GgmlType::Q4_1},
    {"Q4_0", kQ4_0, GgmlType::Q4_0},
    {"IQ4_NL", kIQ4_NL, GgmlType::IQ4_NL},
    {"IQ4_XS", kIQ4_XS, GgmlType::IQ4_XS},
    {"Q3_K_L", kQ3_K_L, GgmlType::Q3_K},
    {"Q3_K_M", kQ3_K_M, GgmlType::Q3_K},
    {"Q3_K_S", kQ3_K_S, GgmlType::Q3_K},
    {"Q2_K", kQ2_K, GgmlType::Q2_K},
    {"Q2_K_S", kQ2_K_S, GgmlType::Q2_K},
    {"MXFP4_MOE", kMXFP4_MOE, GgmlType::MXFP4},
}};

struct Alias {
  const char* name;
  const char* mix;
};
constexpr Alias kAliases[] = {
    {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}, {"Q3_K", "Q3_K_M"}, {"MXFP4", "MXFP4_MOE"}};

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

enum class Category { TokenEmbd, AttnQ, AttnK, AttnV, AttnQkv, AttnOutput, FfnUp, FfnGate,
                      FfnDown, Output, Other };

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight") return Category::TokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::AttnQkv;
  if (contains(name, "attn_v.weight")) return Category::AttnV;
  if (contains(name, "attn_k.weight")) return Category::AttnK;
  if (contains(name, "attn_q.weight")) return Category::AttnQ;
  if (contains(name, "attn_output.weight")) return Category::AttnOutput;
  if (contains(name, "ffn_up")) return Category::FfnUp;
  if (contains(name, "ffn_gate")) return Category::FfnGate;
  if (contains(name, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// N of a "blk.N." name, -1 for the others (llama.cpp's weight_name_comparer key).
int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) layer = -1;
  return layer;
}

// The first and last eighth of the layers, and every third layer in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// An integer key, 0 when absent or not one integer (a per-layer array of head counts: the
// rules then see no grouping, which only matters for Q2_K/IQ4 attn_v choices).
int64_t get_int(const GgufFile& f, const std::string& key) {
  try {
    return f.get_int_or(key, 0);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

const QuantMix* find_quant_mix(std::string_view name) {
  std::string u = upper(name);
  for (const Alias& a : kAliases)
    if (u == a.name) u = a.mix;
  for (const QuantMix& m : kMixes)
    if (u == m.name) return &m;
  return nullptr;
}

std::string quant_mix_names() {
  std::string s;
  for (const QuantMix& m : kMixes) s += (s.empty() ? "" : ", ") + std::string(m.name);
  for (const Alias& a : kAliases) s += fmt::format(", {} (= {})", a.name, a.mix);
  return s;
}

MixModel mix_model_from_gguf(const GgufFile& file) {
  MixModel m;
  m.arch = file.get_string_or("general.architecture", "");
  m.n_layer = get_int(file, m.arch + ".block_count");
  m.n_head = get_int(file, m.arch + ".attention.head_count");
  m.n_head_kv = get_int(file, m.arch + ".attention.head_count_kv");
  m.n_expert = get_int(file, m.arch + ".expert_count");
  return m;
}

bool mix_allows_quantization(const std::string& name, const std::vector<int64_t>& shape) {
  size_t n_dims = shape.size();
  while (n_dims > 1 && shape[n_dims - 1] == 1) --n_dims;  // ggml_n_dims
  if (n_dims < 2) return false;
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  for (const char* keep : {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d", "attn_rel_b.weight",
                           "position_embd", "token_types.weight"})
    if (contains(name, keep)) return false;
  return true;
}

MixRules::MixRules(const QuantMix& mix, const MixModel& model,
                   const std::vector<GgufTensorInfo>& tensors, bool has_imatrix)
    : mix_(mix), model_(model), has_imatrix_(has_imatrix) {
  std::vector<const GgufTensorInfo*> visited;
  for (const GgufTensorInfo& t : tensors) {
    const Category c = category_of(t.name);
    if (c == Category::AttnV || c == Category::AttnQkv) ++n_attn_v_;
    if (c == Category::Output) tied_ = false;
    if (mix_allows_quantization(t.name, t.shape)) visited.push_back(&t);
  }
  std::stable_sort(visited.begin(), visited.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  int i_attn_v = 0, i_ffn_down = 0;
  for (const GgufTensorInfo* t : visited) {
    const Category c = category_of(t->name);
    if (c == Category::AttnV || c == Category::AttnQkv) rank_[t->name] = i_attn_v++;
    if (c == Category::FfnDown) rank_[t->name] = i_ffn_down++;
  }
}

int MixRules::rank_of(const std::string& name) const {
  const auto it = rank_.find(name);
  return it != rank_.end() ? it->second : 0;
}

GgmlType MixRules::type_for(const GgufTensorInfo& t) {
  using T = GgmlType;
  const uint32_t f = mix_.file_type;
  T type = mix_.base;
  if (ggml_traits(type).block_size == 1) return type;  // F32, F16, BF16: no rules
  const Category c = category_of(t.name);
  const bool falcon = model_.arch == "falcon";
  const int n_gqa = model_.n_head_kv > 0 ? static_cast<int>(model_.n_head / model_.n_head_kv) : 1;
  const bool eight_experts = model_.n_expert == 8;
  const int n_layer = static_cast<int>(model_.n_layer);
  // The layer of an ffn tensor: its place in llama.cpp's order, or "blk.N." with experts.
  auto layer = [&]() { return model_.n_expert > 1 ? layer_of(t.name) : rank_of(t.name); };
  const int i_attn_v = rank_of(t.name);

  if (c == Category::Output || (tied_ && c == Category::TokenEmbd)) {
    const int64_t nx = t.shape.empty() ? 0 : t.shape[0];
    if (f == kMXFP4_MOE || falcon || nx % ggml_traits(type).block_size != 0)
      type = T::Q8_0;
    else if (type != T::Q8_0)
      type = T::Q6_K;
  } else if (f == kMXFP4_MOE) {
    // MXFP4 for the stacked expert matrices (a third dimension > 1), Q8_0 for every other
    // matrix, the untied token_embd included (llama.cpp tests this before the categories)
    type = t.shape.size() > 2 && t.shape[2] > 1 ? T::MXFP4 : T::Q8_0;
  } else if (c == Category::TokenEmbd) {
    // untied embedding: the base type
  } else if (c == Category::AttnV || c == Category::AttnQkv) {
    if (f == kQ2_K)
      type = n_gqa >= 4 ? T::Q4_K : T::Q3_K;
    else if (f == kQ2_K_S && n_gqa >= 4)
      type = T::Q4_K;
    else if (f == kQ3_K_M)
      type = i_attn_v < 2 ? T::Q5_K : T::Q4_K;
    else if (f == kQ3_K_L)
      type = T::Q5_K;
    else if ((f == kIQ4_NL || f == kIQ4_XS) && n_gqa >= 4)
      type = T::Q5_K;
    else if ((f == kQ4_K_M || f == kQ5_K_M) && use_more_bits(i_attn_v, n_attn_v_))
      type = T::Q6_K;
    else if (f == kQ4_K_S && i_attn_v < 4)
      type = T::Q5_K;
    // llama.cpp's 70B model type: 80 layers of llama (with grouped KV heads: 65B has none),
    // qwen2 or olmo.
    const bool is_70b = n_layer == 80 && ((model_.arch == "llama" && n_gqa > 1) ||
                                          model_.arch == "qwen2" || model_.arch == "olmo");
    if (is_70b && (type == T::Q3_K || type == T::Q4_K)) type = T::Q5_K;
    if (eight_experts) type = T::Q8_0;
  } else if (c == Category::AttnK) {
    if (eight_experts) type = T::Q8_0;
  } else if (c == Category::FfnDown) {
    const int i = layer();
    if (f == kQ2_K)
      type = T::Q3_K;
    else if (f == kQ2_K_S) {
      if (i < n_layer / 8) type = T::Q4_K;
    } else if (f == kQ3_K_M)
      type = i < n_layer / 16                        ? T::Q5_K
             : !falcon || use_more_bits(i, n_layer) ? T::Q4_K
                                                     : T::Q3_K;
    else if (f == kQ3_K_L)
      type = falcon ? T::Q4_K : T::Q5_K;
    else if (f == kQ4_K_M) {
      if (falcon)
        type = i < n_layer / 16 ? T::Q6_K : use_more_bits(i, n_layer) ? T::Q5_K : T::Q4_K;
      else if (use_more_bits(i, n_layer))
        type = T::Q6_K;
    } else if (i < n_layer / 8 && (f == kIQ4_NL || f == kIQ4_XS) && !has_imatrix_)
      type = T::Q5_K;
    else if (f == kQ5_K_M && use_more_bits(i, n_layer))
      type = T::Q6_K;
    else if (f == kQ4_K_S && !falcon && i < n_layer / 8)
      type = T::Q5_K;
    else if ((f == kQ4_0 || f == kQ5_0) && has_imatrix_ && i < n_layer / 8)
      type = f == kQ4_0 ? T::Q4_1 : T::Q5_1;  // llama.cpp's guard for the first ffn_down
  } else if (c == Category::AttnOutput) {
    if (!falcon) {
      if (eight_experts) {
        if (f == kQ2_K || f == kQ3_K_S || f == kQ3_K_M || f == kIQ4_NL || f == kQ4_K_S ||
            f == kQ4_K_M || f == kIQ4_XS)
          type = T::Q5_K;
      } else if (f == kQ2_K) {
        type = T::Q3_K;
      } else if (f == kQ3_K_M) {
        type = T::Q4_K;
      } else if (f == kQ3_K_L) {
        type = T::Q5_K;
      }
    } else if (f == kQ3_K_L) {
      type = T::Q4_K;
    }
  }
  // (llama.cpp also counts ffn_gate/ffn_up layers, for the IQ3_XS mix only, not offered here.)
  return type;
}

}  // namespace llmctl

#include "quant/quant_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <regex>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace llmctl {

namespace {

constexpr const char* kAccepted =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, "
    "mxfp4";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::regex compile_regex(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(
        fmt::format("--tensor-type: invalid regular expression '{}': {}", pattern, e.what()),
        "the part before '=' is an ECMAScript regex searched in the tensor name, e.g. "
        "'attn_v=q8_0' or '^output\\.weight$=f16'");
  }
}

bool fits(GgmlType type, int64_t row_len) {
  return row_len % static_cast<int64_t>(ggml_traits(type).block_size) == 0;
}

}  // namespace

GgmlType parse_quant_type(const std::string& name, const std::string& what) {
  const std::string n = lower(name);
  const std::optional<GgmlType> t = ggml_type_from_name(n);
  if (t && can_quantize(*t)) return *t;
  if (t)
    throw Error(
        fmt::format("{}: type '{}' is not supported yet (llmctl writes {})", what, name, kAccepted),
        "the other ggml types (iq1_*, iq2_*, iq3_*, ...) are not written by llmctl");
  throw Error(fmt::format("{}: unknown type '{}' (expected one of {})", what, name, kAccepted));
}

uint32_t llama_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    case GgmlType::Q4_0:
      return 2;
    case GgmlType::Q4_1:
      return 3;
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::Q5_0:
      return 8;
    case GgmlType::Q5_1:
      return 9;
    case GgmlType::Q2_K:
      return 10;
    case GgmlType::Q3_K:
      return 11;  // MOSTLY_Q3_K_S: every matrix Q3_K
    case GgmlType::IQ4_NL:
      return 25;
    case GgmlType::IQ4_XS:
      return 30;
    case GgmlType::Q4_K:
      return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K (the _M mix is not what --type q4_k does)
    case GgmlType::Q5_K:
      return 16;  // MOSTLY_Q5_K_S
    case GgmlType::Q6_K:
      return 18;
    case GgmlType::BF16:
      return 32;
    case GgmlType::MXFP4:
      return 38;  // MOSTLY_MXFP4_MOE (llama.cpp has no all-MXFP4 file type)
    default:
      throw Error(fmt::format("no llama file type for {}", ggml_type_name(type)));
  }
}

std::vector<GgmlType> fallback_chain(GgmlType wanted) {
  // Block size 1 types always fit. A k-quant (256-element super-blocks) falls back first to
  // the 32-element type llama.cpp's quantizer uses for it (llama_tensor_get_type): the next
  // size up, so the tensor loses no more than asked (Q4_K 4.5 bpw -> Q5_0 5.5, Q5_K 5.5 ->
  // Q5_1 6.0, Q6_K 6.56 -> Q8_0 8.5). A 32-element type falls back to F16 (16 bpw), the
  // smallest type with block size 1 that loses little.
  switch (wanted) {
    case GgmlType::Q4_K:
      return {wanted, GgmlType::Q5_0, GgmlType::F16};
    case GgmlType::Q5_K:
      return {wanted, GgmlType::Q5_1, GgmlType::F16};
    case GgmlType::Q6_K:
      return {wanted, GgmlType::Q8_0, GgmlType::F16};
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      return {wanted, GgmlType::Q4_0, GgmlType::F16};
    case GgmlType::IQ4_XS:
      return {wanted, GgmlType::IQ4_NL, GgmlType::F16};
    default:
      break;
  }
  if (ggml_traits(wanted).block_size == 1) return {wanted};
  return {wanted, GgmlType::F16};
}

TensorTypeOverride parse_tensor_type_override(const std::string& arg) {
  const size_t eq = arg.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw Error(fmt::format("--tensor-type '{}': expected REGEX=TYPE, e.g. 'ffn_down=q8_0'", arg));
  TensorTypeOverride o;
  o.pattern = arg.substr(0, eq);
  compile_regex(o.pattern);  // validate now, so a bad regex is reported before any work
  o.type = parse_quant_type(arg.substr(eq + 1), fmt::format("--tensor-type '{}'", arg));
  return o;
}

QuantPlan plan_quantization(const std::vector<GgufTensorInfo>& tensors, const QuantOptions& opt) {
  std::vector<std::regex> regexes;
  regexes.reserve(opt.overrides.size());
  for (const auto& o : opt.overrides) regexes.push_back(compile_regex(o.pattern));

  QuantPlan plan;
  plan.type = opt.type;
  plan.mix = opt.mix != nullptr ? opt.mix->name : "";
  plan.pure = opt.pure;
  plan.file_type = opt.mix != nullptr ? opt.mix->file_type : llama_file_type(opt.type);
  std::optional<MixRules> rules;
  if (opt.mix != nullptr && !opt.pure) rules.emplace(*opt.mix, opt.model, tensors, opt.has_imatrix);
  for (const GgufTensorInfo& t : tensors) {
    TensorPlan p;
    p.name = t.name;
    p.shape = t.shape;
    p.src_type = t.type;
    p.src_bytes = t.n_bytes;
    p.n_elements = t.n_elements();

    if (t.shape.size() <= 1) {
      p.wanted = GgmlType::F32;
      p.rule = "1-D";
    } else if (opt.mix != nullptr && !mix_allows_quantization(t.name, t.shape)) {
      p.wanted = t.type;
      p.rule = "kept (llama.cpp does not quantize it)";
    } else {
      p.wanted = opt.type;
      p.rule = "--type";
      bool matched = false;
      for (size_t i = 0; i < regexes.size() && !matched; ++i) {
        if (std::regex_search(t.name, regexes[i])) {
          p.wanted = opt.overrides[i].type;
          p.rule = fmt::format("--tensor-type {}", opt.overrides[i].pattern);
          matched = true;
        }
      }
      if (!matched && t.name == "token_embd.weight" && opt.keep_embedding) {
        p.wanted = *opt.keep_embedding;
        p.rule = "--keep-embedding";
      } else if (!matched && t.name == "output.weight" && opt.keep_output) {
        p.wanted = *opt.keep_output;
        p.rule = "--keep-output";
      } else if (!matched && rules) {
        p.wanted = rules->type_for(t);
        if (p.wanted != opt.type) p.rule = fmt::format("{} rule", opt.mix->name);
      }
    }

    p.chosen = p.wanted;
    if (p.wanted != p.src_type && !can_dequantize(p.src_type)) {
      p.chosen = p.src_type;
      p.rule = "copied";
      plan.warnings.push_back(
          fmt::format("tensor '{}': source type {} cannot be decoded; copied "
                      "unchanged instead of {}",
                      t.name, ggml_type_name(p.src_type), ggml_type_name(p.wanted)));
    } else {
      const int64_t row_len = t.shape.empty() ? 1 : t.shape[0];
      const std::vector<GgmlType> chain = fallback_chain(p.wanted);
      const auto it =
          std::find_if(chain.begin(), chain.end(), [&](GgmlType c) { return fits(c, row_len); });
      LLMCTL_ASSERT(it != chain.end());
      p.chosen = *it;
      if (p.chosen != p.wanted)
        plan.warnings.push_back(fmt::format(
            "tensor '{}': row length {} is not a multiple of the {} block size {}; writing {} "
            "instead",
            t.name, row_len, ggml_type_name(p.wanted), ggml_traits(p.wanted).block_size,
            ggml_type_name(p.chosen)));
    }
    p.copy = p.chosen == p.src_type;
    const GgmlTypeTraits tr = ggml_traits(p.chosen);
    p.out_bytes =
        p.copy ? t.n_bytes : static_cast<uint64_t>(p.n_elements) / tr.block_size * tr.type_size;
    plan.src_tensor_bytes += p.src_bytes;
    plan.out_tensor_bytes += p.out_bytes;
    plan.tensors.push_back(std::move(p));
  }
  return plan;
}

std::vector<std::pair<GgmlType, int>> unwritable_types(const QuantPlan& plan) {
  std::vector<std::pair<GgmlType, int>> out;
  for (const TensorPlan& p : plan.tensors) {
    if (p.copy || can_quantize(p.chosen)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == p.chosen; });
    if (it == out.end())
      out.emplace_back(p.chosen, 1);
    else
      ++it->second;
  }
  return out;
}

}  // namespace llmctl

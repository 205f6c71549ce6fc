// Tokenizer::from_hf_tokenizer_json: a Hugging Face tokenizer.json with a BPE model, either
// byte-level (Llama 3, Qwen2.5, SmolLM2 style; the same tokenizer as a GGUF gpt2 vocabulary)
// or SentencePiece-style over characters with byte fallback (Llama 2, Mistral, Gemma style).
// What is read:
//   model            type BPE: vocab {piece: id}, merges ("a b" strings or [a, b] pairs),
//                    ignore_merges, byte_fallback (the character-level kind; "<0xAB>" pieces
//                    become Byte tokens); subword prefixes/suffixes are refused
//   added_tokens     {id, content, special}: special -> Control, else UserDefined
//   normalizer       NFC/NFD/NFKC/NFKD, Prepend, Replace(String), Sequence of them
//                    (text_normalizer.h); anything else is refused, naming it
//   pre_tokenizer    byte-level: Sequence / Split(Regex|String, Isolated, invert false) /
//                    ByteLevel (use_regex: GPT-2's pattern; add_prefix_space when first) /
//                    Digits, turned into one regex list run as the GGUF pre-tokenizers are;
//                    character-level: none, or Metaspace without split (as normalizer steps)
//   decoder          ByteLevel; or Replace("▁", " ") / ByteFallback / Fuse / Strip / Metaspace
//   post_processor   TemplateProcessing "<bos> $A": BOS and add_bos; ByteLevel ignored
// EOS (and BOS when no template gives one) come from tokenizer_config.json beside the file.

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json_error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm_pieces.h"
#include "tokenizer/tokenizer_impl.h"

namespace llmctl {

namespace {

using Json = nlohmann::json;

// HF's ByteLevel(use_regex=true) pattern.
constexpr const char* kByteLevelRegex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

Json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return Json::parse(ss.str());
  } catch (const Json::exception& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())));
  }
}

std::string type_of(const Json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string("?");
}

[[noreturn]] void unsupported(const std::string& path, const std::string& what) {
  throw FileError(path, fmt::format("tokenizer.json: {} is not supported", what),
                  FileError::kNoOffset,
                  "llmctl reads BPE tokenizer.json files, byte-level (Llama 3, Qwen2.5, SmolLM2 "
                  "style) or with byte fallback (Llama 2, Gemma style); a GGUF of the model "
                  "carries the same vocabulary");
}

// The regex list of a byte-level pre-tokenizer; `prefix_space` is set by a ByteLevel with
// add_prefix_space that comes first (tokenizers then prefixes the whole text; after another
// step it would prefix every piece, which llmctl does not do).
void collect_patterns(const std::string& path, const Json& pre, std::vector<std::string>& out,
                      bool& prefix_space, bool& first) {
  if (pre.is_null()) return;
  const std::string type = type_of(pre);
  const bool is_first = first;
  first = false;
  if (type == "Sequence") {
    first = is_first;
    for (const Json& p : pre.at("pretokenizers")) collect_patterns(path, p, out, prefix_space, first);
  } else if (type == "Split") {
    const std::string behavior = pre.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated" || pre.value("invert", false))
      unsupported(path, fmt::format("pre_tokenizer Split with behavior {}{}", behavior,
                                    pre.value("invert", false) ? " and invert" : ""));
    const Json& pattern = pre.at("pattern");
    if (pattern.contains("Regex"))
      out.push_back(pattern.at("Regex").get<std::string>());
    else
      out.push_back("\\Q" + pattern.at("String").get<std::string>() + "\\E");
  } else if (type == "ByteLevel") {
    if (pre.value("add_prefix_space", false)) {
      if (!is_first) unsupported(path, "ByteLevel add_prefix_space after another pre-tokenizer");
      prefix_space = true;
    }
    if (pre.value("use_regex", true)) out.push_back(kByteLevelRegex);
  } else if (type == "Digits") {
    out.push_back(pre.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else {
    unsupported(path, fmt::format("pre_tokenizer {}", type));
  }
}

void collect_normalizer(const std::string& path, const Json& n,
                        std::vector<TextNormalizer::Step>& out) {
  if (n.is_null()) return;
  using Kind = TextNormalizer::Kind;
  const std::string type = type_of(n);
  if (type == "Sequence") {
    for (const Json& step : n.at("normalizers")) collect_normalizer(path, step, out);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    const Kind k = type == "NFC" ? Kind::Nfc : type == "NFD" ? Kind::Nfd
                 : type == "NFKC" ? Kind::Nfkc : Kind::Nfkd;
    out.push_back({k, "", ""});
  } else if (type == "Prepend") {
    out.push_back({Kind::Prepend, n.at("prepend").get<std::string>(), ""});
  } else if (type == "Replace") {
    const Json& pattern = n.at("pattern");
    if (!pattern.contains("String")) unsupported(path, "normalizer Replace with a Regex pattern");
    out.push_back({Kind::Replace, pattern.at("String").get<std::string>(),
                   n.at("content").get<std::string>()});
  } else {
    unsupported(path, fmt::format("normalizer {}", type));
  }
}

// Whether a ByteLevel step appears in a pre-tokenizer or decoder (the byte-level kind).
bool has_byte_level(const Json& j) {
  if (j.is_null()) return false;
  if (type_of(j) == "ByteLevel") return true;
  for (const char* key : {"pretokenizers", "decoders"})
    if (j.is_object() && j.contains(key))
      for (const Json& step : j[key])
        if (has_byte_level(step)) return true;
  return false;
}

// SentencePiece-style files: a Metaspace pre-tokenizer (newer Llama 2 style files) is the
// normalizer steps Replace(" ", "▁") and, unless prepend_scheme is "never", Prepend("▁").
void metaspace_steps(const std::string& path, const Json& pre, std::vector<TextNormalizer::Step>& out) {
  if (pre.is_null()) return;
  if (type_of(pre) != "Metaspace")
    unsupported(path, fmt::format("pre_tokenizer {} with a byte_fallback BPE", type_of(pre)));
  if (pre.value("split", true)) unsupported(path, "pre_tokenizer Metaspace with split");
  const std::string space = pre.value("replacement", std::string(kSpaceSymbol));
  out.push_back({TextNormalizer::Kind::Replace, " ", space});
  const std::string scheme = pre.value("prepend_scheme", std::string("always"));
  if (scheme == "first" || scheme == "always")
    out.push_back({TextNormalizer::Kind::Prepend, space, ""});
  else if (scheme != "never")
    unsupported(path, fmt::format("Metaspace prepend_scheme {}", scheme));
}

// A SentencePiece-style decoder (Replace/ByteFallback/Fuse/Strip/Metaspace); returns whether
// it drops one leading space.
bool check_spm_decoder(const std::string& path, const Json& d) {
  if (d.is_null()) return false;
  const std::string type = type_of(d);
  if (type == "Sequence") {
    bool strips = false;
    for (const Json& step : d.at("decoders")) strips = check_spm_decoder(path, step) || strips;
    return strips;
  }
  if (type == "Replace" || type == "ByteFallback" || type == "Fuse") return false;
  if (type == "Strip") {
    if (d.value("content", std::string(" ")) != " " || d.value("start", 0) > 1 || d.value("stop", 0) != 0)
      unsupported(path, "decoder Strip other than one leading space");
    return d.value("start", 0) == 1;
  }
  if (type == "Metaspace") return d.value("prepend_scheme", std::string("always")) != "never";
  unsupported(path, fmt::format("decoder {}", type));
}

// The special token a "<bos> $A" template starts with, or "" when there is none.
std::string template_bos(const std::string& path, const Json& post) {
  if (post.is_null()) return "";
  const std::string type = type_of(post);
  if (type == "Sequence") {
    std::string bos;
    for (const Json& p : post.at("processors"))
      if (std::string b = template_bos(path, p); !b.empty()) bos = b;
    return bos;
  }
  if (type == "ByteLevel") return "";
  if (type != "TemplateProcessing") unsupported(path, fmt::format("post_processor {}", type));
  std::string bos;
  bool seen_sequence = false;
  for (const Json& item : post.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
    } else if (item.contains("SpecialToken")) {
      if (seen_sequence) unsupported(path, "a TemplateProcessing special token after the text");
      bos = item.at("SpecialToken").at("id").get<std::string>();
    }
  }
  return bos;
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::string config_token(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

}  // namespace

std::unique_ptr<TokenizerImpl> make_hf_json_tokenizer(const std::string& path) {
  const Json doc = read_json(path);
  try {
    const Json& model = doc.at("model");
    if (type_of(model) != "BPE") unsupported(path, fmt::format("model type {}", type_of(model)));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null()) unsupported(path, fmt::format("BPE {}", key));
    const Json pre_tokenizer = doc.value("pre_tokenizer", Json());
    const Json decoder = doc.value("decoder", Json());
    const bool byte_level = has_byte_level(pre_tokenizer) || has_byte_level(decoder);
    const bool byte_fallback = model.value("byte_fallback", false);
    if (byte_level && byte_fallback) unsupported(path, "a byte-level BPE with byte_fallback");
    if (!byte_level && !byte_fallback)
      unsupported(path, "a BPE over characters without byte_fallback (or a byte-level one "
                        "without a ByteLevel pre-tokenizer)");
    std::vector<TextNormalizer::Step> steps;
    collect_normalizer(path, doc.value("normalizer", Json()), steps);
    if (byte_level && !decoder.is_null() && type_of(decoder) != "ByteLevel")
      unsupported(path, fmt::format("decoder {}", type_of(decoder)));

    // Pieces by id: the vocabulary, then the added tokens (which may extend it).
    std::vector<std::string> pieces;
    std::vector<bool> present;
    auto put = [&](const std::string& piece, int64_t id) {
      if (id < 0 || id >= INT32_MAX / 2)
        throw FileError(path, fmt::format("token '{}' has id {}, out of range", piece, id));
      const auto i = static_cast<size_t>(id);
      if (i >= pieces.size()) {
        pieces.resize(i + 1);
        present.resize(i + 1, false);
      }
      if (present[i] && pieces[i] != piece)
        throw FileError(path, fmt::format("id {} is both '{}' and '{}'", id, pieces[i], piece));
      pieces[i] = piece;
      present[i] = true;
    };
    for (const auto& [piece, id] : model.at("vocab").items()) put(piece, id.get<int64_t>());
    std::vector<std::pair<int32_t, bool>> added;  // id, special
    if (doc.contains("added_tokens"))
      for (const Json& t : doc["added_tokens"]) {
        put(t.at("content").get<std::string>(), t.at("id").get<int64_t>());
        added.emplace_back(t.at("id").get<int32_t>(), t.value("special", false));
      }
    for (size_t i = 0; i < present.size(); ++i)
      if (!present[i])
        throw FileError(path, fmt::format("no token has id {} (ids must run 0..{} without gaps)",
                                          i, pieces.size() - 1));
    std::vector<TokenType> types(pieces.size(), TokenType::Normal);
    for (const auto& [id, special] : added)
      types[static_cast<size_t>(id)] = special ? TokenType::Control : TokenType::UserDefined;

    std::vector<std::string> merges;
    for (const Json& m : model.at("merges")) {
      if (m.is_string())
        merges.push_back(m.get<std::string>());
      else
        merges.push_back(m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    }

    auto find_id = [&](const std::string& piece) -> int32_t {
      if (piece.empty()) return -1;
      for (size_t i = 0; i < pieces.size(); ++i)
        if (pieces[i] == piece) return static_cast<int32_t>(i);
      throw FileError(path, fmt::format("special token '{}' is not in the vocabulary", piece));
    };
    Json config;
    const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) config = read_json(config_path.string());
    const std::string bos_piece = template_bos(path, doc.value("post_processor", Json()));
    const int32_t bos = find_id(bos_piece.empty() ? config_token(config, "bos_token") : bos_piece);
    const int32_t eos = find_id(config_token(config, "eos_token"));

    const std::vector<std::string_view> merge_views(merges.begin(), merges.end());
    std::unique_ptr<TokenizerImpl> impl;
    if (byte_level) {
      std::vector<std::string> patterns;
      bool prefix_space = false, first = true;
      collect_patterns(path, pre_tokenizer, patterns, prefix_space, first);
      if (prefix_space) steps.push_back({TextNormalizer::Kind::PrefixSpace, "", ""});
      impl = make_byte_level_bpe_tokenizer(std::move(pieces), std::move(types), merge_views,
                                           regex_splitter_for(patterns),
                                           model.value("ignore_merges", false), bos, eos,
                                           /*add_bos=*/!bos_piece.empty(),
                                           TextNormalizer(std::move(steps)));
    } else {
      if (model.value("ignore_merges", false)) unsupported(path, "ignore_merges with byte_fallback");
      metaspace_steps(path, pre_tokenizer, steps);
      for (size_t id = 0; id < types.size(); ++id)
        if (types[id] == TokenType::Normal && byte_piece_value(pieces[id]) >= 0) types[id] = TokenType::Byte;
      const bool strips = check_spm_decoder(path, decoder);
      impl = make_char_bpe_tokenizer(std::move(pieces), std::move(types), merge_views,
                                     TextNormalizer(std::move(steps)), bos, eos,
                                     /*add_bos=*/!bos_piece.empty(), strips);
    }
    impl->pre_tokenizer = "tokenizer.json";
    return impl;
  } catch (const Json::exception& e) {
    throw FileError(path, fmt::format("tokenizer.json: unexpected structure: {}", json_error_text(e.what())));
  }
}

}  // namespace llmctl

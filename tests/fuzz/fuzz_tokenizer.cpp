// libFuzzer target for Tokenizer::encode with parse_special on random bytes, over two small
// vocabularies built in memory (no test data needed): a sentencepiece-style ("llama") one with
// byte fallback and a byte-level BPE ("gpt2") one, each with CONTROL and USER_DEFINED tokens
// whose texts overlap ("<|im_start|>", "<|im", "[INST]").
//
// A third is a SentencePiece-style tokenizer.json (BPE over characters with byte fallback,
// normalizer NFC + Prepend("▁") + Replace(" ", "▁"), decoder with Strip), written to a
// temporary file at start.
//
// Input: byte 0 = flags (bit 0: gpt2 vocabulary, bit 3: the tokenizer.json one, bit 1:
// add_bos, bit 2: parse_special), the rest is the text. Properties checked: encode never
// throws; every id is in range; decode of the ids never throws and is valid UTF-8; for gpt2
// without parse_special, decode(encode(x)) equals x with invalid bytes as U+FFFD (every byte has
// a token), and for the tokenizer.json one it equals NFC(x) so repaired, when x holds no "▁";
// a text without any special token's text encodes the same with and without parse_special.
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/text_normalizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

namespace gv = llmctl::gguf_value;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: property violated: %s\n", what);
  std::abort();
}

const std::vector<std::string> kSpecialTexts = {
    "<|im_start|>", "<|im_end|>", "<|im", "[INST]", "<s>", "</s>", "<unk>", "<|endoftext|>"};

llmctl::Tokenizer from_builder(const llmctl::GgufBuilder& b, const char* name) {
  auto image = std::make_shared<const std::vector<uint8_t>>(b.build());
  return llmctl::Tokenizer::from_gguf(llmctl::GgufFile::from_memory(image, name));
}

llmctl::Tokenizer make_spm() {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    tokens.emplace_back(piece);
    scores.push_back(0);
    types.push_back(6);
  }
  const std::vector<std::pair<std::string, int32_t>> extra = {{"\xE2\x96\x81the", 1},
                                                              {"\xE2\x96\x81", 1},
                                                              {"he", 1},
                                                              {"ll", 1},
                                                              {"o", 1},
                                                              {"\xE2\x96\x81H", 1},
                                                              {"ello", 1},
                                                              {"<|im_start|>", 3},
                                                              {"<|im_end|>", 3},
                                                              {"<|im", 4},
                                                              {"[INST]", 4}};
  float score = -1;
  for (const auto& [piece, type] : extra) {
    tokens.push_back(piece);
    scores.push_back(score -= 1);
    types.push_back(type);
  }
  llmctl::GgufBuilder g;
  g.set("tokenizer.ggml.model", gv::string("llama"));
  g.set("tokenizer.ggml.tokens", gv::string_array(tokens));
  g.set("tokenizer.ggml.scores", gv::f32_array(scores));
  g.set("tokenizer.ggml.token_type", gv::i32_array(types));
  return from_builder(g, "fuzz-spm");
}

llmctl::Tokenizer make_gpt2() {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(llmctl::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  const std::vector<std::string> merges = {"h e", "l l", "\xC4\xA0 t", "\xC4\xA0t he", "he ll"};
  for (const char* t : {"he", "ll", "\xC4\xA0t", "\xC4\xA0the", "hell"}) {
    tokens.emplace_back(t);
    types.push_back(1);
  }
  for (const auto& [piece, type] : std::vector<std::pair<std::string, int32_t>>{
           {"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<|im", 4}}) {
    tokens.push_back(piece);
    types.push_back(type);
  }
  llmctl::GgufBuilder g;
  g.set("tokenizer.ggml.model", gv::string("gpt2"));
  g.set("tokenizer.ggml.pre", gv::string("llama-bpe"));
  g.set("tokenizer.ggml.tokens", gv::string_array(tokens));
  g.set("tokenizer.ggml.token_type", gv::i32_array(types));
  g.set("tokenizer.ggml.merges", gv::string_array(merges));
  return from_builder(g, "fuzz-gpt2");
}

llmctl::Tokenizer make_char_bpe_json() {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  for (int b = 0; b < 256; ++b) vocab += fmt::format(R"(, "<0x{:02X}>": {})", b, 3 + b);
  int id = 259;
  for (const char* t : {"\u2581", "h", "e", "l", "o", "t", "he", "ll", "\u2581t", "\u2581the", "hell",
                        "\u00e9", "\u2581h", "\u2581hell", "<|im"})
    vocab += fmt::format(R"(, "{}": {})", t, id++);
  const std::string json = R"({"added_tokens": [
      {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
      {"id": 2, "content": "</s>", "special": true}, {"id": )" + std::to_string(id) +
      R"(, "content": "<|im_start|>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"},
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
      {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}},
    "model": {"type": "BPE", "byte_fallback": true, "vocab": {)" + vocab + R"(},
      "merges": ["h e", "l l", "▁ t", "▁t he", "he ll", "▁ h", "▁h ell"]}})";
  char dir[] = "/tmp/fuzz_tokenizer_XXXXXX";
  if (mkdtemp(dir) == nullptr) finding("mkdtemp failed");
  const std::string path = std::string(dir) + "/tokenizer.json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(json.data(), 1, json.size(), f) != json.size()) finding("write failed");
  std::fclose(f);
  return llmctl::Tokenizer::from_hf_tokenizer_json(path);
}

bool has_special_text(const std::string& text) {
  for (const std::string& s : kSpecialTexts)
    if (text.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const llmctl::Tokenizer spm = make_spm();
  static const llmctl::Tokenizer gpt2 = make_gpt2();
  static const llmctl::Tokenizer char_bpe = make_char_bpe_json();
  if (size == 0) return 0;
  const bool use_gpt2 = (data[0] & 1) != 0;
  const bool use_char_bpe = !use_gpt2 && (data[0] & 8) != 0;
  const bool add_bos = (data[0] & 2) != 0;
  const bool parse_special = (data[0] & 4) != 0;
  const llmctl::Tokenizer& tok = use_gpt2 ? gpt2 : use_char_bpe ? char_bpe : spm;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text, add_bos, parse_special);
  } catch (const llmctl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    finding("encode threw");
  }
  for (const int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) finding("id out of range");
  const std::string back = tok.decode(ids);
  if (!llmctl::utf8_is_valid(back)) finding("decode gave invalid UTF-8");
  if (use_gpt2 && !parse_special && !add_bos && back != llmctl::utf8_sanitize(text))
    finding("gpt2 round trip");
  if (use_char_bpe && !parse_special && !add_bos && text.find("\xE2\x96\x81") == std::string::npos &&
      back != llmctl::utf8_sanitize(llmctl::unicode_normalize(text, llmctl::TextNormalizer::Kind::Nfc)))
    finding("tokenizer.json round trip");
  if (parse_special && !has_special_text(text) && ids != tok.encode(text, add_bos, false)) {
    // sentencepiece itself matches USER_DEFINED pieces, so only a text without any special
    // text must encode identically.
    finding("parse_special changed a text without special tokens");
  }
  return 0;
}

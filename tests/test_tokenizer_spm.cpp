// sentencepiece-family tokenizers: a .model through libsentencepiece and a GGUF llama
// vocabulary turned into an in-memory ModelProto. Reference data: llama.cpp's tokenizer
// vectors (vocab/ggml-vocab-llama-spm.gguf.*), the Llama 2 tokenizer.model, and a llama.cpp
// greedy run of stories260K.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/sp_model_proto.h"
#include "tokenizer/tokenizer.h"

using llmctl::Error;
using llmctl::GgufBuilder;
namespace gv = llmctl::gguf_value;
using llmctl::FileError;
using llmctl::Tokenizer;
using llmctl::TokenType;
using llmctl::test::escape_for_message;
using llmctl::test::load_vocab_cases;
using llmctl::test::require_test_file;

namespace {

const char* const kLlamaGguf = "vocab/ggml-vocab-llama-spm.gguf";
const char* const kLlamaModel = "models/llama2-tokenizer.model";

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = llmctl::test::temp_dir() + "/" + name;
  llmctl::test::write_file(path, bytes);
  return path;
}

std::string write_temp(const std::string& name, const GgufBuilder& gguf) {
  const std::string path = llmctl::test::temp_dir() + "/" + name;
  gguf.write(path);
  return path;
}

// A small llama-style vocabulary: <unk>, <s>, </s>, 256 byte pieces, then `extra` pieces.
struct SmallVocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  explicit SmallVocab(bool bytes = true) {
    if (!bytes) return;
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(fmt::format("<0x{:02X}>", b));
      scores.push_back(0);
      types.push_back(6);
    }
  }
  void add(const std::string& piece, float score, int32_t type = 1) {
    tokens.push_back(piece);
    scores.push_back(score);
    types.push_back(type);
  }
  GgufBuilder gguf(const std::string& model = "llama") const {
    GgufBuilder g;
    g.set("general.architecture", gv::string("llama")).set("tokenizer.ggml.model", gv::string(model));
    g.set("tokenizer.ggml.tokens", gv::string_array(tokens));
    g.set("tokenizer.ggml.scores", gv::f32_array(scores));
    g.set("tokenizer.ggml.token_type", gv::i32_array(types));
    return g;
  }
};

}  // namespace

// ---------------------------------------------------------------------------
// Reference vectors
// ---------------------------------------------------------------------------

TEST_CASE("llama-spm GGUF encodes every llama.cpp test vector exactly", "[cpu][golden]") {
  const auto cases = load_vocab_cases(kLlamaGguf);
  REQUIRE(cases.size() == 46);  // 46 separators in .inp, 46 lines in .out
  const Tokenizer tok = Tokenizer::from_file(require_test_file(kLlamaGguf));
  CHECK(tok.kind() == "llama");
  CHECK(tok.n_vocab() == 32000);
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.add_bos_default());
  int passed = 0;
  for (const auto& c : cases) {
    INFO("input " << escape_for_message(c.text));
    CHECK(tok.encode(c.text, false) == c.ids);
    passed += tok.encode(c.text, false) == c.ids ? 1 : 0;
  }
  CHECK(passed == 46);
}

TEST_CASE("llama2 tokenizer.model gives the same ids as the GGUF vocabulary", "[cpu][golden]") {
  const auto cases = load_vocab_cases(kLlamaGguf);
  const Tokenizer model = Tokenizer::from_file(require_test_file(kLlamaModel));
  const Tokenizer gguf = Tokenizer::from_file(require_test_file(kLlamaGguf));
  CHECK(model.kind() == "sentencepiece");
  CHECK(model.n_vocab() == gguf.n_vocab());
  CHECK(model.bos_id() == 1);
  CHECK(model.eos_id() == 2);
  for (const auto& c : cases) {
    INFO("input " << escape_for_message(c.text));
    CHECK(model.encode(c.text, false) == c.ids);
    CHECK(model.encode(c.text, true) == gguf.encode(c.text, true));
  }
  // The vocabularies agree piece by piece.
  int mismatches = 0;
  for (int32_t id = 0; id < model.n_vocab(); ++id) {
    if (model.piece(id) != gguf.piece(id) || model.token_type(id) != gguf.token_type(id) ||
        model.token_bytes(id) != gguf.token_bytes(id))
      ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("stories260K encodes the golden prompt and decodes the golden continuation", "[cpu][golden]") {
  const std::string golden = llmctl::test::read_file(require_test_file("golden/stories260K-greedy.jsonl"));
  const auto j = nlohmann::json::parse(golden.substr(0, golden.find('\n')));
  const Tokenizer tok = Tokenizer::from_file(require_test_file("models/stories260K.gguf"));
  CHECK(tok.kind() == "llama");
  CHECK(tok.n_vocab() == 512);
  CHECK(tok.add_bos_default());
  const auto prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  CHECK(prompt_ids == std::vector<int32_t>{1, 403, 407, 261, 378});
  CHECK(tok.encode(j.at("prompt").get<std::string>(), true) == prompt_ids);
  const auto generated = j.at("generated_ids").get<std::vector<int32_t>>();
  CHECK(tok.decode(generated) == j.at("generated_text").get<std::string>());
  CHECK(tok.decode(prompt_ids) == "Once upon a time");
}

TEST_CASE("decode(encode(s)) == s on every test input", "[cpu][golden]") {
  const auto cases = load_vocab_cases(kLlamaGguf);
  for (const char* rel : {kLlamaGguf, kLlamaModel, "models/stories260K.gguf"}) {
    const Tokenizer tok = Tokenizer::from_file(require_test_file(rel));
    for (const auto& c : cases) {
      INFO(rel << " input " << escape_for_message(c.text));
      CHECK(tok.decode(tok.encode(c.text, true)) == c.text);
      CHECK(tok.decode(tok.encode(c.text, false)) == c.text);
    }
  }
}

TEST_CASE("decode agrees with libsentencepiece", "[cpu][golden]") {
  const std::string path = require_test_file(kLlamaModel);
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(path).ok());
  const Tokenizer tok = Tokenizer::from_file(path);
  for (const auto& c : load_vocab_cases(kLlamaGguf)) {
    const auto ids = tok.encode(c.text, true);
    INFO("input " << escape_for_message(c.text));
    CHECK(tok.decode(ids) == sp.DecodeIds(std::vector<int>(ids.begin(), ids.end())));
  }
  // Random sequences: byte pieces (valid and invalid UTF-8), controls, <unk>, and the
  // space pieces that meet the dummy-prefix rule ("▁", "▁▁", "▁Hello").
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any(0, tok.n_vocab() - 1), low(0, 300);
  const int32_t edge[] = {0, 1, 2, 29871, 259, 15043, 3 + 0x20, 3 + 0xE4};
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int32_t> ids(static_cast<size_t>(trial % 12));
    for (auto& id : ids) {
      const auto r = rng() % 3;
      id = r == 0 ? any(rng) : r == 1 ? low(rng) : edge[rng() % 8];
    }
    INFO("trial " << trial);
    CHECK(tok.decode(ids) == sp.DecodeIds(std::vector<int>(ids.begin(), ids.end())));
  }
  // The lone "▁" that carries the dummy prefix, then a word: one space survives.
  CHECK(tok.decode({29871, 15043}) == sp.DecodeIds({29871, 15043}));
}

TEST_CASE("leading space, byte fallback and special pieces decode as sentencepiece does", "[cpu]") {
  const Tokenizer tok = Tokenizer::from_file(require_test_file(kLlamaGguf));
  CHECK(tok.encode("", true) == std::vector<int32_t>{1});
  CHECK(tok.encode("", false).empty());
  CHECK(tok.encode(" Hello", false) == std::vector<int32_t>{29871, 15043});
  CHECK(tok.decode({29871, 15043}) == " Hello");       // the lone "▁" carries the dummy prefix
  CHECK(tok.decode({1, 15043}) == "Hello");            // BOS does not count as output
  CHECK(tok.decode({15043, 15043}) == "Hello Hello");
  CHECK(tok.decode({1, 2}).empty());
  CHECK(tok.decode({0}) == " \xE2\x81\x87 ");          // <unk>
  CHECK(tok.piece(13) == "<0x0A>");
  CHECK(tok.token_type(13) == TokenType::Byte);
  CHECK(tok.token_bytes(13) == "\n");
  CHECK(tok.token_bytes(1).empty());
  CHECK(tok.token_bytes(15043) == " Hello");
  CHECK(tok.decode({35, 15043}) == "  Hello");         // byte <0x20> first: nothing stripped after it
  CHECK(tok.decode({3 + 0xE4, 3 + 0xBD}) == "\xEF\xBF\xBD\xEF\xBF\xBD");  // incomplete: U+FFFD per byte
  // "<s>" in the text is plain text, not BOS.
  const auto ids = tok.encode("<s>", false);
  CHECK(std::find(ids.begin(), ids.end(), 1) == ids.end());
  CHECK(tok.decode(ids) == "<s>");
}

TEST_CASE("an id out of range is an error naming the id and the vocabulary size", "[cpu]") {
  const Tokenizer tok = Tokenizer::from_file(require_test_file("models/stories260K.gguf"));
  for (const int32_t bad : {512, -1, 1 << 30}) {
    INFO(bad);
    try {
      (void)tok.decode({1, bad});
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(std::to_string(bad)) != std::string::npos);
      CHECK(std::string(e.what()).find("512") != std::string::npos);
    }
    CHECK_THROWS_AS(tok.piece(bad), Error);
    CHECK_THROWS_AS(tok.token_bytes(bad), Error);
    CHECK_THROWS_AS(tok.token_type(bad), Error);
  }
}

// ---------------------------------------------------------------------------
// File detection and metadata handling
// ---------------------------------------------------------------------------

TEST_CASE("from_file tells files apart by content and names the path in errors", "[cpu]") {
  const auto expect_file_error = [](const std::string& path, const std::string& fragment) {
    try {
      (void)Tokenizer::from_file(path);
      FAIL("no error for " << path);
    } catch (const FileError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).rfind(path + ": ", 0) == 0);
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
  };
  expect_file_error(llmctl::test::temp_dir() + "/does-not-exist.model", "cannot open");
  expect_file_error(write_temp("empty.model", ""), "empty file");
  expect_file_error(llmctl::test::temp_dir(), "is a directory");
  expect_file_error(write_temp("text.model", "hello world\n"), "not a GGUF file or a sentencepiece");
  // A .model cut short is rejected by the parser, not accepted half-read.
  const std::string model = llmctl::test::read_file(require_test_file(kLlamaModel));
  expect_file_error(write_temp("cut.model", model.substr(0, 1000)), "");
  // The name does not matter: a .model called .gguf is still read.
  const Tokenizer renamed = Tokenizer::from_file(write_temp("tokenizer.gguf", model));
  CHECK(renamed.kind() == "sentencepiece");

  SmallVocab v;
  expect_file_error(write_temp("bert.gguf", v.gguf("bert")), "'bert' is not supported (supported: llama, gpt2)");
  GgufBuilder no_tokenizer;
  no_tokenizer.set("general.architecture", gv::string("llama"));
  expect_file_error(write_temp("none.gguf", no_tokenizer), "tokenizer.ggml.model");
  GgufBuilder no_tokens;
  no_tokens.set("tokenizer.ggml.model", gv::string("llama"));
  expect_file_error(write_temp("notokens.gguf", no_tokens), "tokenizer.ggml.tokens");
  GgufBuilder bad_bos = v.gguf();
  bad_bos.set("tokenizer.ggml.bos_token_id", gv::u32(100000));
  expect_file_error(write_temp("badbos.gguf", bad_bos), "out of range");
  GgufBuilder short_scores = v.gguf();
  short_scores.set("tokenizer.ggml.scores", gv::f32_array({0.0f}));
  expect_file_error(write_temp("scores.gguf", short_scores), "tokenizer.ggml.scores has 1 entries");
  SmallVocab no_unk(false);
  no_unk.types[0] = 1;
  expect_file_error(write_temp("nounk.gguf", no_unk.gguf()), "no unknown token");
}

TEST_CASE("GGUF metadata: add_bos, add_space_prefix, absent specials", "[cpu]") {
  SmallVocab v;
  v.add("\xE2\x96\x81" "a", -1);
  v.add("a", -2);
  v.add("\xE2\x96\x81", -3);
  const int32_t wa = 259, a = 260;
  {
    const Tokenizer tok = Tokenizer::from_file(write_temp("plain.gguf", v.gguf()));
    CHECK(tok.add_bos_default());  // llama.cpp's default when the key is absent
    CHECK(tok.bos_id() == 1);
    CHECK(tok.encode("a", true) == std::vector<int32_t>{1, wa});
    CHECK(tok.encode("a", false) == std::vector<int32_t>{wa});
  }
  {
    GgufBuilder g = v.gguf();
    g.set("tokenizer.ggml.add_space_prefix", gv::boolean(false));
    g.set("tokenizer.ggml.add_bos_token", gv::boolean(false));
    g.set("tokenizer.ggml.padding_token_id", gv::u32(0xFFFFFFFFu));
    const Tokenizer tok = Tokenizer::from_file(write_temp("noprefix.gguf", g));
    CHECK_FALSE(tok.add_bos_default());
    CHECK(tok.encode("a", false) == std::vector<int32_t>{a});
    CHECK(tok.decode({wa}) == " a");  // no dummy prefix to remove
  }
  {
    GgufBuilder g = v.gguf();
    g.set("tokenizer.ggml.bos_token_id", gv::u32(0xFFFFFFFFu));
    const Tokenizer tok = Tokenizer::from_file(write_temp("nobos.gguf", g));
    CHECK(tok.bos_id() == -1);
    CHECK(tok.encode("a", true) == std::vector<int32_t>{wa});
  }
}

TEST_CASE("vocabularies sentencepiece cannot hold as they are still load with ids kept", "[cpu]") {
  SmallVocab v;
  v.add("\xE2\x96\x81" "a", -1);
  v.add("", -2);                         // empty piece
  v.add("\xE2\x96\x81" "a", -3);        // duplicate
  v.add("b", -4, 0);                     // undefined type: a normal piece
  const Tokenizer tok = Tokenizer::from_file(write_temp("odd.gguf", v.gguf()));
  CHECK(tok.n_vocab() == 263);
  CHECK(tok.piece(260).empty());
  CHECK(tok.piece(261) == "\xE2\x96\x81" "a");
  CHECK(tok.encode("a", false) == std::vector<int32_t>{259});  // the first of the duplicates
  CHECK(tok.decode({259, 260, 261}) == "a a");
  CHECK(tok.encode("ab", false) == std::vector<int32_t>{259, 262});

  SmallVocab few(false);  // some byte pieces but not all 256: no byte fallback, bytes still decode
  few.add("<0x41>", 0, 6);
  few.add("\xE2\x96\x81", -1);
  const Tokenizer t2 = Tokenizer::from_file(write_temp("fewbytes.gguf", few.gguf()));
  CHECK(t2.token_type(3) == TokenType::Byte);
  CHECK(t2.decode({3}) == "A");
  CHECK(t2.encode("A", false) == std::vector<int32_t>{4, 0});  // "▁" then <unk>
}

TEST_CASE("the ModelProto writer and reader agree", "[cpu]") {
  llmctl::SpModelSpec spec;
  spec.pieces = {{"<unk>", 0.0f, TokenType::Unknown}, {"<s>", 0.0f, TokenType::Control},
                 {"\xE2\x96\x81x", -1.5f, TokenType::Normal}, {"y", -2.25f, TokenType::Undefined}};
  spec.add_dummy_prefix = false;
  const auto info = llmctl::parse_sp_model(llmctl::serialize_sp_model(spec));
  REQUIRE(info.pieces.size() == 4);
  CHECK(info.pieces[2].piece == "\xE2\x96\x81x");
  CHECK(info.pieces[2].score == -1.5f);
  CHECK(info.pieces[1].type == TokenType::Control);
  CHECK(info.pieces[3].type == TokenType::Normal);
  CHECK_FALSE(info.add_dummy_prefix);
  CHECK_FALSE(info.remove_extra_whitespaces);
  CHECK_THROWS_AS(llmctl::parse_sp_model("\x0a\x80"), Error);  // truncated varint
  CHECK_THROWS_AS(llmctl::parse_sp_model("\x0a\x05" "ab"), Error);  // length past the end
}

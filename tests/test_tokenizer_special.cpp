// encode(text, add_bos, parse_special): special-token text becomes the token, the text
// between is encoded normally (llama.cpp's tokenizer_st_partition + llama_tokenize_impl).
//
// Where the expected ids come from: a special token's id is looked up in the vocabulary's own
// token list (piece text + type, scanned here, not through the code under test); the text
// between the tokens goes through the 2-argument encode(), which is golden-tested against
// llama.cpp's vectors (test_tokenizer_spm.cpp, test_tokenizer_bpe.cpp). The partition itself
// (where the cuts are) is written out by hand in every case. A few Llama 2 ids are literal,
// from the published Llama 2 tokenizer ("[INST]" = ▁[ INST ] = 518 25580 29962).
#include <catch2/catch.hpp>
#include <memory>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

using llmctl::GgufBuilder;
using llmctl::GgufFile;
using llmctl::Tokenizer;
using llmctl::TokenType;
namespace gv = llmctl::gguf_value;
using Ids = std::vector<int32_t>;

namespace {

const char* const kSpmVocab = "vocab/ggml-vocab-llama-spm.gguf";
const char* const kGpt2Vocab = "vocab/ggml-vocab-gpt-2.gguf";

// The id of `piece` found by scanning the vocabulary; fails the test when absent.
int32_t id_of(const Tokenizer& tok, const std::string& piece, TokenType type) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.token_type(id) == type && tok.piece(id) == piece) return id;
  FAIL("no token '" << piece << "' of the expected type in " << tok.source());
  return -1;
}

// Concatenates special ids (int) and text runs (string, through the plain encode).
struct Expect {
  const Tokenizer& tok;
  Ids ids;
  Expect& id(int32_t v) {
    ids.push_back(v);
    return *this;
  }
  Expect& text(const std::string& t) {
    const Ids e = tok.encode(t, false);
    ids.insert(ids.end(), e.begin(), e.end());
    return *this;
  }
};

// The gpt-2 vocabulary with extra tokens appended (id = 50257 + index), kept in memory.
Tokenizer gpt2_with(const std::vector<std::pair<std::string, TokenType>>& extra) {
  const GgufFile base = GgufFile::open(llmctl::test::require_test_file(kGpt2Vocab));
  GgufBuilder b = GgufBuilder::from_file(base);
  std::vector<std::string> tokens = base.get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> types = base.get_i32_array("tokenizer.ggml.token_type");
  for (const auto& [piece, type] : extra) {
    tokens.push_back(piece);
    types.push_back(static_cast<int32_t>(type));
  }
  b.set("tokenizer.ggml.tokens", gv::string_array(tokens));
  b.set("tokenizer.ggml.token_type", gv::i32_array(types));
  auto image = std::make_shared<const std::vector<uint8_t>>(b.build());
  return Tokenizer::from_gguf(GgufFile::from_memory(image, "gpt2+extra"));
}

}  // namespace

TEST_CASE("SpecialTokenSplitter cuts longest tokens first, as llama.cpp", "[cpu][tokenizer]") {
  const llmctl::SpecialTokenSplitter s({{7, "xyz"}, {8, "wx"}, {9, ""}, {10, "<a>"}});
  auto show = [&](std::string_view text) {
    std::string out;
    for (const auto& f : s.split(text))
      out += f.id >= 0 ? "[" + std::to_string(f.id) + "]" : "'" + std::string(f.text) + "'";
    return out;
  };
  CHECK(show("") == "");
  CHECK(show("plain") == "'plain'");
  // "xyz" (longer) is cut first, so the earlier-starting "wx" no longer matches.
  CHECK(show("wxyz") == "'w'[7]");
  CHECK(show("wxwx") == "[8][8]");
  CHECK(show("<a><a>xyz") == "[10][10][7]");
  CHECK(show("a<a>b wx c") == "'a'[10]'b '[8]' c'");
  CHECK(show("<a") == "'<a'");
  CHECK(s.find("wx") == 8);
  CHECK(s.find("w") == -1);
  CHECK(s.find("") == -1);
  CHECK(s.size() == 3);  // the empty text is dropped
}

TEST_CASE("SpecialTokenSplitter fragments are views into the input, tokens included",
          "[cpu][tokenizer]") {
  // chat.cpp locates each fragment in the rendered prompt by its pointer.
  const llmctl::SpecialTokenSplitter s({{7, "xyz"}, {10, "<a>"}});
  const std::string text = "ab<a>cxyz<a>";
  size_t expected_offset = 0;
  for (const auto& f : s.split(text)) {
    CHECK(static_cast<size_t>(f.text.data() - text.data()) == expected_offset);
    expected_offset += f.text.size();
  }
  CHECK(expected_offset == text.size());
}

TEST_CASE("llama-spm: <s>, </s> and <unk> text parsed as tokens", "[cpu][tokenizer][golden]") {
  const Tokenizer tok = Tokenizer::from_file(llmctl::test::require_test_file(kSpmVocab));
  const int32_t bos = id_of(tok, "<s>", TokenType::Control);
  const int32_t eos = id_of(tok, "</s>", TokenType::Control);
  const int32_t unk = id_of(tok, "<unk>", TokenType::Unknown);

  SECTION("the Llama 2 chat prompt") {
    const std::string text = "<s>[INST] Hello [/INST]";
    const Ids got = tok.encode(text, false, true);
    CHECK(got == Expect{tok, {}}.id(bos).text("[INST] Hello [/INST]").ids);
    // Published Llama 2 ids: the run after <s> gets the dummy-prefix space (▁[).
    CHECK(got == Ids{1, 518, 25580, 29962, 15043, 518, 29914, 25580, 29962});
    CHECK(tok.piece(got[1]) == "\xE2\x96\x81[");
  }
  SECTION("every text run after a special token starts with the dummy prefix") {
    const Ids got = tok.encode("a</s>b", false, true);
    CHECK(got == Expect{tok, {}}.text("a").id(eos).text("b").ids);
    REQUIRE(got.size() >= 3);
    CHECK(tok.piece(got.back()) ==
          "\xE2\x96\x81"
          "b");
  }
  SECTION("adjacent, leading and trailing tokens; whitespace-only runs") {
    CHECK(tok.encode("</s></s>", false, true) == Ids{eos, eos});
    CHECK(tok.encode("<s> </s>", false, true) == Expect{tok, {}}.id(bos).text(" ").id(eos).ids);
    CHECK(tok.encode("x<unk>", false, true) == Expect{tok, {}}.text("x").id(unk).ids);
    CHECK(tok.encode("", false, true).empty());
    CHECK(tok.encode("", true, true) == Ids{bos});
  }
  SECTION("add_bos is not de-duplicated against a <s> in the text (llama.cpp neither)") {
    CHECK(tok.encode("<s>hi", true, true) == Expect{tok, {}}.id(bos).id(bos).text("hi").ids);
  }
  SECTION("without parse_special the text stays text") {
    const std::string text = "<s>[INST] x </s>";
    CHECK(tok.encode(text, false, false) == tok.encode(text, false));
    for (const int32_t id : tok.encode(text, false, false)) {
      CHECK(id != bos);
      CHECK(id != eos);
    }
  }
  SECTION("near misses are plain text") {
    CHECK(tok.encode("<s", false, true) == tok.encode("<s", false));
    CHECK(tok.encode("< s>", false, true) == tok.encode("< s>", false));
  }
  CHECK(tok.special_token_id("</s>") == eos);
  CHECK(tok.special_token_id("Hello") == -1);
}

TEST_CASE("gpt-2: <|endoftext|> parsed, the text between is byte-level BPE",
          "[cpu][tokenizer][golden]") {
  const Tokenizer tok = Tokenizer::from_file(llmctl::test::require_test_file(kGpt2Vocab));
  const int32_t eot = id_of(tok, "<|endoftext|>", TokenType::Control);
  CHECK(eot == 50256);
  CHECK(tok.encode("Hello<|endoftext|> world", false, true) ==
        Expect{tok, {}}.text("Hello").id(eot).text(" world").ids);
  // No prefix space for byte-level BPE: " world" keeps its own space, "x" gets none.
  CHECK(tok.encode("<|endoftext|>x", false, true) == Expect{tok, {}}.id(eot).text("x").ids);
  const Ids plain = tok.encode("Hello<|endoftext|>", false, false);
  CHECK(plain == tok.encode("Hello<|endoftext|>", false));
  CHECK(std::find(plain.begin(), plain.end(), eot) == plain.end());
}

TEST_CASE("ChatML and Llama 3 control tokens added to a byte-level vocabulary",
          "[cpu][tokenizer]") {
  const Tokenizer tok = gpt2_with({{"<|im_start|>", TokenType::Control},
                                   {"<|im_end|>", TokenType::Control},
                                   {"<|im", TokenType::UserDefined},
                                   {"<|start_header_id|>", TokenType::Control},
                                   {"<|end_header_id|>", TokenType::Control},
                                   {"<|eot_id|>", TokenType::Control}});
  const int32_t im_start = id_of(tok, "<|im_start|>", TokenType::Control);
  const int32_t im_end = id_of(tok, "<|im_end|>", TokenType::Control);
  const int32_t im = id_of(tok, "<|im", TokenType::UserDefined);
  const int32_t sh = id_of(tok, "<|start_header_id|>", TokenType::Control);
  const int32_t eh = id_of(tok, "<|end_header_id|>", TokenType::Control);
  const int32_t eot = id_of(tok, "<|eot_id|>", TokenType::Control);
  CHECK(im_start == 50257);

  CHECK(tok.encode("<|im_start|>user\nHi<|im_end|>\n", false, true) ==
        Expect{tok, {}}.id(im_start).text("user\nHi").id(im_end).text("\n").ids);
  // The longer control token wins over the user-defined prefix "<|im"; alone, "<|im" matches.
  CHECK(tok.encode("<|im<|im_end|>", false, true) == Ids{im, im_end});
  CHECK(tok.encode("a<|im b", false, true) == Expect{tok, {}}.text("a").id(im).text(" b").ids);
  CHECK(tok.encode("<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>", false,
                   true) ==
        Expect{tok, {}}.id(sh).text("system").id(eh).text("\n\nBe brief.").id(eot).ids);
  CHECK(tok.special_token_id("<|eot_id|>") == eot);
  CHECK(tok.special_token_id("<|endoftext|>") == 50256);
}

// Every regex list of the pre-tokenizer table against the Python `regex` module on 5,000
// seeded strings (mixed scripts, digits, contractions, whitespace and newline runs, CJK,
// emoji): tests/fixtures/pretokenizer_fuzz.json, from tools/gen_pretokenizer_fixture.py
// --fuzz. The fixture stores the strings and, per list, one FNV-1a 64 hash per block of
// strings over the piece boundaries (code point offsets); see the generator's docstring.

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/pretokenizer.h"

namespace {

uint64_t fnv1a64(uint64_t h, uint32_t v) {
  for (int k = 0; k < 4; ++k) {
    h ^= (v >> (8 * k)) & 0xFFu;
    h *= 0x100000001b3ull;
  }
  return h;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

const nlohmann::json& fixture() {
  static const nlohmann::json doc = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("pretokenizer_fuzz.json")));
  return doc;
}

}  // namespace

TEST_CASE("The fuzz fixture was made from the table's regex lists", "[cpu][tokenizer][golden]") {
  const auto& lists = fixture().at("lists");
  std::set<std::string> seen;
  for (const auto& spec : llmctl::pre_tokenizer_table()) {
    INFO("pre-tokenizer " << spec.name << " (list " << spec.list << ")");
    REQUIRE(lists.contains(spec.list));
    CHECK(lists.at(spec.list).get<std::vector<std::string>>() == spec.patterns);
    seen.insert(spec.list);
  }
  CHECK(seen.size() == lists.size());
}

TEST_CASE("Every regex list splits as the regex module does", "[cpu][tokenizer][golden]") {
  const auto& doc = fixture();
  const auto strings = doc.at("strings").get<std::vector<std::string>>();
  const size_t block = doc.at("block").get<size_t>();
  REQUIRE(strings.size() >= 5000);
  REQUIRE(block > 0);
  size_t lists_checked = 0;
  for (const auto& [list_id, hashes] : doc.at("hashes").items()) {
    const llmctl::PreTokenizerSpec* spec = nullptr;
    for (const auto& s : llmctl::pre_tokenizer_table())
      if (s.list == list_id) spec = &s;
    REQUIRE(spec != nullptr);
    const llmctl::RegexSplitter& splitter = llmctl::pre_tokenizer_splitter(*spec);
    size_t bad_blocks = 0;
    for (size_t b = 0; b * block < strings.size(); ++b) {
      uint64_t h = 0xcbf29ce484222325ull;
      for (size_t i = b * block; i < strings.size() && i < (b + 1) * block; ++i) {
        uint32_t pos = 0;
        for (std::string_view piece : splitter.split(strings[i])) {
          pos += static_cast<uint32_t>(code_points(piece));
          h = fnv1a64(h, pos);
        }
        h = fnv1a64(h, 0xFFFFFFFFu);
      }
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
      if (hashes.at(b).get<std::string>() != hex) {
        ++bad_blocks;
        UNSCOPED_INFO("list " << list_id << ": block " << b << " (strings " << b * block << ".."
                              << (b + 1) * block - 1 << ") splits differently");
      }
    }
    CHECK(bad_blocks == 0);
    ++lists_checked;
  }
  CHECK(lists_checked == doc.at("lists").size());
}

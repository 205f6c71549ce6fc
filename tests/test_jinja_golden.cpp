// Every real template in the shared data, rendered with the conversations of
// tests/fixtures/jinja_golden.json, must give Python jinja2's output byte for byte (or raise
// where it raised). The fixture comes from tools/gen_jinja_golden.py.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/jinja/jinja.h"

using llmctl::jinja::RaisedException;
using llmctl::jinja::Template;
using llmctl::jinja::TemplateError;
using Json = nlohmann::ordered_json;

namespace {

// FIPS 180-4 SHA-256, to notice a shared template that changed since the fixture was made.
std::string sha256_hex(const std::string& data) {
  static const uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::string msg = data;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  msg += static_cast<char>(0x80);
  while (msg.size() % 64 != 56) msg += '\0';
  for (int i = 7; i >= 0; --i) msg += static_cast<char>((bits >> (8 * i)) & 0xff);
  const auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[64];
    for (size_t i = 0; i < 16; ++i) {
      w[i] = 0;
      for (size_t b = 0; b < 4; ++b)
        w[i] = (w[i] << 8) | static_cast<unsigned char>(msg[off + 4 * i + b]);
    }
    for (size_t i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (size_t i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  std::string hex;
  static const char* digits = "0123456789abcdef";
  for (uint32_t x : h)
    for (int i = 7; i >= 0; --i) hex += digits[(x >> (4 * i)) & 0xf];
  return hex;
}

// One case's outcome as a line for the failure message: what differs, where.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  const auto quoted = [&](const std::string& s) {  // the cut may split a UTF-8 character
    return Json(s.substr(from, 120)).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  return "differs at byte " + std::to_string(i) + "\n  want: " + quoted(want) + "\n  got:  " + quoted(got);
}

}  // namespace

TEST_CASE("sha256 of a known string", "[cpu]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("every shared chat template renders as Python jinja2 does", "[golden]") {
  const Json fixture = Json::parse(llmctl::test::read_file(llmctl::test::fixture_path("jinja_golden.json")));
  llmctl::jinja::Options opt;
  opt.now = fixture.at("now").get<int64_t>();
  const Json& contexts = fixture.at("contexts");
  int passed = 0, total = 0;
  for (const Json& entry : fixture.at("templates")) {
    const std::string file = entry.at("file").get<std::string>();
    const std::string source = llmctl::test::read_file(llmctl::test::require_test_file("templates/" + file));
    INFO("template " << file);
    REQUIRE(sha256_hex(source) == entry.at("sha256").get<std::string>());  // else regenerate the fixture
    if (entry.contains("parse_error")) {
      ++total;
      CHECK_THROWS_AS(Template(source, opt), TemplateError);
      continue;
    }
    std::unique_ptr<Template> tmpl;
    try {
      tmpl = std::make_unique<Template>(source, opt);
    } catch (const TemplateError& e) {
      FAIL_CHECK("parse failed: " << e.what());
      total += static_cast<int>(entry.at("results").size());
      continue;
    }
    for (const auto& [name, want] : entry.at("results").items()) {
      ++total;
      INFO("case " << name);
      std::string got, outcome;
      Json ctx = contexts.at(name);
      if (entry.contains("extra_context"))
        for (const auto& [k, v] : entry["extra_context"].items()) ctx[k] = v;
      try {
        got = tmpl->render(ctx);
        outcome = "output";
      } catch (const RaisedException& e) {
        got = e.what();
        outcome = "raised";
      } catch (const TemplateError& e) {
        got = e.what();
        outcome = "error";
      }
      bool ok = false;
      if (want.contains("output")) {
        ok = outcome == "output" && got == want["output"].get<std::string>();
        if (!ok) FAIL_CHECK(outcome << ": " << (outcome == "output" ? first_difference(want["output"].get<std::string>(), got) : got));
      } else if (want.contains("raised")) {
        ok = outcome == "raised" && got == want["raised"].get<std::string>();
        if (!ok) FAIL_CHECK("expected raise_exception(" << want["raised"] << "), got " << outcome << ": " << got.substr(0, 200));
      } else {
        // "UndefinedError: 'x' is undefined": ours names the line, then Python's message.
        const std::string py = want["error"].get<std::string>();
        const std::string message = py.substr(py.find(": ") + 2);
        ok = outcome == "error" && got.find(message) != std::string::npos;
        if (!ok) FAIL_CHECK("expected an error like " << want["error"] << ", got " << outcome << ": " << got.substr(0, 200));
      }
      passed += ok ? 1 : 0;
    }
  }
  WARN("jinja golden: " << passed << " of " << total << " template x case results match Python jinja2");
  CHECK(passed == total);
  CHECK(total >= 450);
}

// StopMatcher (src/sampler/stop.h): text that belongs to a stop string is never returned, even
// when the stop string is split across pieces; everything else comes back, in order, intact.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampler/stop.h"

using llmctl::StopMatcher;
using llmctl::StopResult;

namespace {

struct Streamed {
  std::vector<std::string> printed;  // one entry per push, then the flush
  std::string all;                   // their concatenation
  bool stopped = false;
  std::string stop;
};

// Pushes the pieces until a stop string is hit, flushing at the end the way a generator would.
Streamed stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  Streamed s;
  for (const std::string& piece : pieces) {
    StopResult r = m.push(piece);
    s.printed.push_back(r.text);
    s.all += r.text;
    if (r.stopped) {
      s.stopped = true;
      s.stop = r.stop;
      break;
    }
  }
  const std::string tail = m.flush();
  s.printed.push_back(tail);
  s.all += tail;
  return s;
}

// Every way of cutting `text` into pieces of 1..3 bytes, chosen by a simple pattern, gives the
// same printed text as one push: splitting never changes the result.
std::vector<std::vector<std::string>> splits(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  out.push_back({text});
  for (size_t width = 1; width <= 3; ++width) {
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size(); i += width) pieces.push_back(text.substr(i, width));
    out.push_back(pieces);
  }
  return out;
}

}  // namespace

TEST_CASE("no stop strings: every piece comes back at once", "[cpu]") {
  StopMatcher m({});
  CHECK(m.push("Hello").text == "Hello");
  CHECK(m.push(", world").text == ", world");
  CHECK(m.flush().empty());
}

TEST_CASE("a stop string in one piece: text before it is returned, the rest is dropped", "[cpu]") {
  StopMatcher m({"</s>"});
  StopResult r = m.push("one two</s>three");
  CHECK(r.stopped);
  CHECK(r.text == "one two");
  CHECK(r.stop == "</s>");
  CHECK(m.stopped());
  // After a stop nothing more comes out.
  CHECK(m.push("more").text.empty());
  CHECK_FALSE(m.push("more").stopped);
  CHECK(m.flush().empty());
}

TEST_CASE("a stop string split across pushes is never printed", "[cpu]") {
  StopMatcher m({"\nUser:"});
  CHECK(m.push("Sure.").text == "Sure.");
  // "\nUs" could be the start of the stop string: held back.
  StopResult r = m.push("\nUs");
  CHECK(r.text.empty());
  CHECK_FALSE(r.stopped);
  r = m.push("er: hi");
  CHECK(r.stopped);
  CHECK(r.text.empty());
  CHECK(m.flush().empty());

  // Same start, but it turns out not to be the stop string: the held text is released.
  StopMatcher m2({"\nUser:"});
  CHECK(m2.push("a\nUs").text == "a");
  r = m2.push("ually");
  CHECK_FALSE(r.stopped);
  CHECK(r.text == "\nUsually");

  // One byte per push, for each split of the whole text.
  for (const auto& pieces : splits("Answer: 42\nUser: next")) {
    StopMatcher m3({"\nUser:"});
    const Streamed s = stream(m3, pieces);
    CHECK(s.stopped);
    CHECK(s.all == "Answer: 42");
  }
}

TEST_CASE("overlapping prefixes: stop 'ab' in 'aab'", "[cpu]") {
  StopMatcher m({"ab"});
  CHECK(m.push("a").text.empty());  // could start "ab"
  // "aa": the first 'a' cannot start "ab" any more, the second still can.
  StopResult r = m.push("a");
  CHECK(r.text == "a");
  CHECK_FALSE(r.stopped);
  r = m.push("b");
  CHECK(r.stopped);
  CHECK(r.text.empty());

  for (const auto& pieces : splits("xaab")) {
    StopMatcher m2({"ab"});
    const Streamed s = stream(m2, pieces);
    CHECK(s.stopped);
    CHECK(s.all == "xa");
  }
  // A self-overlapping stop string: "aab" in "aaab" starts at byte 1.
  for (const auto& pieces : splits("aaab!")) {
    StopMatcher m3({"aab"});
    const Streamed s = stream(m3, pieces);
    CHECK(s.stopped);
    CHECK(s.all == "a");
  }
}

TEST_CASE("multiple stop strings: the earliest in the text wins", "[cpu]") {
  for (const auto& pieces : splits("abc STOP def END")) {
    StopMatcher m({"END", "STOP"});
    const Streamed s = stream(m, pieces);
    CHECK(s.stopped);
    CHECK(s.stop == "STOP");
    CHECK(s.all == "abc ");
  }
  // One stop string a prefix of another: the shorter, found first, ends the text.
  StopMatcher m({"###", "##"});
  StopResult r = m.push("x##");
  CHECK(r.stopped);
  CHECK(r.text == "x");
  // A held tail that is a prefix of the longer stop string only.
  StopMatcher m2({"<|im_end|>", "\n\n"});
  CHECK(m2.push("hi <|im").text == "hi ");
  r = m2.push("_start|>");
  CHECK_FALSE(r.stopped);
  CHECK(r.text == "<|im_start|>");
}

TEST_CASE("no stop string hit: flush returns what was held back", "[cpu]") {
  StopMatcher m({"<|eot_id|>"});
  CHECK(m.push("done <|eot").text == "done ");
  CHECK(m.flush() == "<|eot");
  CHECK(m.flush().empty());

  for (const auto& pieces : splits("no stop here <")) {
    StopMatcher m2({"<|eot_id|>", "\n\n"});
    const Streamed s = stream(m2, pieces);
    CHECK_FALSE(s.stopped);
    CHECK(s.all == "no stop here <");
  }
}

TEST_CASE("UTF-8 multi-byte text stays intact and is only cut between characters", "[cpu]") {
  // "→" is E2 86 92 and "€" is E2 82 AC: they share their first byte.
  const std::string arrow = "\xE2\x86\x92";
  const std::string euro = "\xE2\x82\xAC";
  const std::string text = "Grüße " + euro + " 日本語 " + arrow + " rest";
  StopMatcher m({arrow});
  CHECK(m.push("Grüße ").text == "Grüße ");
  CHECK(m.push(euro).text == euro);  // shares a byte with the stop string, but is not it
  CHECK(m.push(" 日本語 ").text == " 日本語 ");
  StopResult r = m.push(arrow + " rest");
  CHECK(r.stopped);
  CHECK(r.text.empty());

  for (const auto& pieces : splits(text)) {
    StopMatcher m2({arrow, "語x"});
    const Streamed s = stream(m2, pieces);
    CHECK(s.stopped);
    CHECK(s.all == "Grüße " + euro + " 日本語 ");
  }
  // Whole characters in, whole characters out: a held prefix of a multi-byte stop string
  // ("日本" of "日本人") is a whole number of characters.
  StopMatcher m3({"日本人"});
  CHECK(m3.push("x日").text == "x");
  CHECK(m3.push("本").text.empty());
  r = m3.push("語");
  CHECK(r.text == "日本語");
  CHECK(m3.flush().empty());
}

TEST_CASE("an empty stop string is an error", "[cpu]") {
  CHECK_THROWS_WITH(StopMatcher({"ok", ""}), "stop string 2 is empty");
}

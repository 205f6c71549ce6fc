#pragma once
// Stop strings over streamed text. Text arrives in pieces (one per token, from the tokenizer's
// StreamDecoder, which never splits a character); a stop string can be split across pieces
// ("\n\nUs" + "er:"), so a piece cannot always be printed when it arrives. StopMatcher holds
// back the shortest tail that could still be the start of a stop string and releases it once
// it cannot be, so text that belongs to a stop string is never printed.
//
//   StopMatcher stop({"\nUser:"});
//   for each token:
//     StopResult r = stop.push(decoder.push(token));
//     print(r.text);
//     if (r.stopped) break;
//   print(stop.flush());  // at EOS or -n: whatever was held back
//
// Matching is on bytes. When both the text and the stop strings are valid UTF-8, a match can
// only begin at the first byte of a character, so text is only ever cut between characters and
// every piece returned is valid UTF-8 as well.

#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

struct StopResult {
  std::string text;      // safe to print now; when stopped, all the text before the stop string
  bool stopped = false;  // a stop string was found; later pushes return nothing
  std::string stop;      // the stop string that was found (empty when !stopped)
};

class StopMatcher {
 public:
  // An empty stop string is an Error (it would match before any text). No stop strings at all
  // is fine: push() then returns every piece unchanged.
  explicit StopMatcher(std::vector<std::string> stops);

  StopResult push(std::string_view piece);
  // The held-back text, at the end of generation (no stop string was hit); empty once stopped.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet returned
  bool stopped_ = false;
};

}  // namespace llmctl

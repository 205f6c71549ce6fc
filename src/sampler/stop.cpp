// StopMatcher: search the held-back text plus the new piece; return what cannot be part of a
// stop string.
#include "sampler/stop.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace llmctl {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (size_t i = 0; i < stops_.size(); ++i)
    if (stops_[i].empty()) throw Error(fmt::format("stop string {} is empty", i + 1));
}

StopResult StopMatcher::push(std::string_view piece) {
  StopResult r;
  if (stopped_) return r;
  pending_.append(piece);

  // The earliest match wins (it ends the text soonest); at equal starts, the first listed.
  size_t best_pos = std::string::npos;
  size_t best_i = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      best_i = i;
    }
  }
  if (best_pos != std::string::npos) {
    r.text = pending_.substr(0, best_pos);
    r.stopped = true;
    r.stop = stops_[best_i];
    pending_.clear();
    stopped_ = true;
    return r;
  }

  // No full match: hold back the longest tail that is a proper prefix of some stop string.
  // pending_ holds at most (longest stop - 1) bytes plus one piece, so this stays cheap.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t release = pending_.size() - hold;
  r.text = pending_.substr(0, release);
  pending_.erase(0, release);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace llmctl

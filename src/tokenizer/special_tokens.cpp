// Special-token partitioning (see special_tokens.h for the rules and where they come from).
#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace llmctl {

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<std::pair<int32_t, std::string>> specials) {
  for (auto& s : specials)
    if (!s.second.empty()) specials_.push_back(std::move(s));
  std::stable_sort(specials_.begin(), specials_.end(), [](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
    return a.first < b.first;
  });
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text) const {
  std::vector<TextFragment> cur;
  if (text.empty()) return cur;
  cur.push_back({-1, text});
  std::vector<TextFragment> next;
  for (const auto& [id, special] : specials_) {
    next.clear();
    bool changed = false;
    for (const TextFragment& f : cur) {
      if (f.id >= 0 || f.text.size() < special.size()) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t hit = rest.find(special); hit != std::string_view::npos;
           hit = rest.find(special)) {
        if (hit > 0) next.push_back({-1, rest.substr(0, hit)});
        next.push_back({id, rest.substr(hit, special.size())});  // a view into the input
        rest.remove_prefix(hit + special.size());
        changed = true;
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (changed) cur.swap(next);
  }
  return cur;
}

int32_t SpecialTokenSplitter::find(std::string_view text) const {
  for (const auto& [id, special] : specials_)
    if (special == text) return id;
  return -1;
}

}  // namespace llmctl

#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "core/edit_distance.h"
#include "core/error.h"

namespace llmctl {


const PreTokenizerSpec& find_pre_tokenizer(std::string_view name) {
  const std::vector<PreTokenizerSpec>& table = pre_tokenizer_table();
  for (const PreTokenizerSpec& s : table)
    if (s.name == name) return s;
  std::vector<std::pair<size_t, const std::string*>> ranked;
  for (const PreTokenizerSpec& s : table) ranked.emplace_back(edit_distance(name, s.name), &s.name);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string closest;
  for (size_t i = 0; i < ranked.size() && i < 5; ++i) {
    if (i > 0) closest += ", ";
    closest += *ranked[i].second;
  }
  throw Error(fmt::format("unknown pre-tokenizer '{}'; closest known: {} "
                          "(llmctl knows {} names, those llama.cpp accepts)",
                          name, closest, table.size()));
}

PreTokenizerChoice choose_pre_tokenizer(const std::string* file_value,
                                        std::string_view override_name) {
  if (!override_name.empty()) return {&find_pre_tokenizer(override_name), false};
  if (file_value == nullptr || file_value->empty()) return {&find_pre_tokenizer("default"), true};
  return {&find_pre_tokenizer(*file_value), false};
}

std::vector<std::string> known_pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const PreTokenizerSpec& s : pre_tokenizer_table()) out.push_back(s.name);
  return out;
}

const RegexSplitter& regex_splitter_for(const std::vector<std::string>& patterns) {
  // One compiled splitter per distinct list; entries are never removed, so references stay
  // valid for the process.
  static std::mutex mutex;
  static std::map<std::vector<std::string>, std::unique_ptr<RegexSplitter>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(patterns);
  if (it == cache.end()) it = cache.emplace(patterns, std::make_unique<RegexSplitter>(patterns)).first;
  return *it->second;
}

const RegexSplitter& pre_tokenizer_splitter(const PreTokenizerSpec& spec) {
  return regex_splitter_for(spec.patterns);
}

std::vector<std::string_view> pre_tokenize(const PreTokenizerSpec& spec, std::string_view text) {
  return pre_tokenizer_splitter(spec).split(text);
}

}  // namespace llmctl

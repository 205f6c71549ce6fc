// Prints the pre-tokenizer table's regex lists as JSON ({"list id": [pattern, ...]}), the
// input of tools/gen_pretokenizer_fixture.py --fuzz, so the Python reference runs exactly
// the patterns the C++ table holds (the fuzz test checks that they are still the same).
//
//   build/tools/pre_tokenizer_lists > /tmp/pre_tokenizer_lists.json

#include <iostream>
#include <nlohmann/json.hpp>

#include "tokenizer/pre_tokenizer_table.h"

int main() {
  nlohmann::ordered_json lists = nlohmann::ordered_json::object();
  for (const auto& spec : llmctl::pre_tokenizer_table()) lists[spec.list] = spec.patterns;
  std::cout << lists.dump(1) << "\n";
  return 0;
}

#include "tokenizer/pretokenizer.h"

#include <array>
#include <cstdint>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace llmctl {

namespace {

struct NameMapping {
  const char* name;
  PreTokenizer kind;
};
constexpr std::array<NameMapping, 6> kNames = {{
    {"default", PreTokenizer::Gpt2},
    {"gpt-2", PreTokenizer::Gpt2},
    {"gpt2", PreTokenizer::Gpt2},
    {"llama3", PreTokenizer::Llama3},
    {"llama-bpe", PreTokenizer::Llama3},
    {"llama-v3", PreTokenizer::Llama3},
}};

// The text as code points with their byte offsets; matchers work on unit indices and the
// pieces are cut at the offsets, so invalid bytes pass through untouched.
class Units {
 public:
  explicit Units(std::string_view text) {
    cps_.reserve(text.size());
    classes_.reserve(text.size());
    offsets_.reserve(text.size() + 1);
    size_t pos = 0;
    while (pos < text.size()) {
      const Utf8Unit u = decode_utf8(text, pos);
      cps_.push_back(u.cp);
      classes_.push_back(u.valid ? classify(u.cp) : CodePointClass::Other);
      offsets_.push_back(pos);
      pos += u.size;
    }
    offsets_.push_back(text.size());
  }

  size_t size() const { return cps_.size(); }
  size_t offset(size_t i) const { return offsets_[i]; }
  // Out-of-range indices read as a code point/class that matches nothing in the patterns.
  char32_t cp(size_t i) const { return i < cps_.size() ? cps_[i] : 0; }
  bool is(size_t i, CodePointClass c) const { return i < classes_.size() && classes_[i] == c; }
  bool is_cr_or_lf(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

  // End of the run of class c that starts at i (i itself when cp(i) is not of class c).
  size_t run_end(size_t i, CodePointClass c) const {
    while (is(i, c)) ++i;
    return i;
  }

 private:
  std::vector<char32_t> cps_;
  std::vector<CodePointClass> classes_;
  std::vector<size_t> offsets_;
};

char32_t ascii_lower(char32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 0x20 : cp; }

// 's|'t|'re|'ve|'m|'ll|'d at i, or (?i:...) of it. Returns the end, or i when none matches.
size_t match_contraction(const Units& u, size_t i, bool ignore_case) {
  if (u.cp(i) != '\'') return i;
  auto at = [&](size_t k) -> char32_t {
    const char32_t cp = u.cp(k);
    if (!ignore_case) return cp;
    // Simple case folding of the pattern's letters: only 's' has a non-ASCII variant,
    // U+017F LATIN SMALL LETTER LONG S.
    return cp == 0x17F ? char32_t{'s'} : ascii_lower(cp);
  };
  const char32_t c1 = at(i + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
  const char32_t c2 = at(i + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
    return i + 3;
  return i;
}

// \s+(?!\S)|\s+ at i (a space unit): the whole run when it ends the text; otherwise the
// run less its last unit, which then prefixes the next word; a single unit before a
// non-space matches \s+ alone.
size_t match_space_run(const Units& u, size_t i) {
  const size_t end = u.run_end(i, CodePointClass::Space);
  if (end == u.size() || end - i < 2) return end;
  return end - 1;
}

size_t match_gpt2(const Units& u, size_t i) {
  if (size_t end = match_contraction(u, i, false); end != i) return end;
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the unit after an optional ' ' picks the
  // alternative, since exactly one class holds for it.
  const size_t k = (u.cp(i) == ' ' && i + 1 < u.size()) ? i + 1 : i;
  for (CodePointClass c : {CodePointClass::Letter, CodePointClass::Number, CodePointClass::Other})
    if (u.is(k, c)) return u.run_end(k, c);
  return match_space_run(u, i);
}

size_t match_llama3(const Units& u, size_t i) {
  if (size_t end = match_contraction(u, i, true); end != i) return end;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (u.is(i, CodePointClass::Letter)) return u.run_end(i, CodePointClass::Letter);
  if (!u.is(i, CodePointClass::Number) && !u.is_cr_or_lf(i) && u.is(i + 1, CodePointClass::Letter))
    return u.run_end(i + 1, CodePointClass::Letter);
  // \p{N}{1,3}
  if (u.is(i, CodePointClass::Number)) {
    const size_t end = u.run_end(i, CodePointClass::Number);
    return end - i > 3 ? i + 3 : end;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t k = (u.cp(i) == ' ' && i + 1 < u.size()) ? i + 1 : i;
  if (u.is(k, CodePointClass::Other)) {
    size_t end = u.run_end(k, CodePointClass::Other);
    while (u.is_cr_or_lf(end)) ++end;
    return end;
  }
  // \s*[\r\n]+: backtracking leaves \s* ending just before the run's last CR/LF, and
  // [\r\n]+ takes that one (the next unit, if any, is not CR/LF).
  const size_t end = u.run_end(i, CodePointClass::Space);
  for (size_t j = end; j > i; --j)
    if (u.is_cr_or_lf(j - 1)) return j;
  return match_space_run(u, i);
}

}  // namespace

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  if (name.empty()) return PreTokenizer::Gpt2;  // llama.cpp's fallback for a missing key
  for (const NameMapping& m : kNames)
    if (name == m.name) return m.kind;
  throw Error(fmt::format("unsupported tokenizer.ggml.pre '{}' (supported: {})", name,
                          supported_pre_tokenizer_names()));
}

const char* pre_tokenizer_name(PreTokenizer kind) {
  return kind == PreTokenizer::Gpt2 ? "gpt2" : "llama3";
}

std::string supported_pre_tokenizer_names() {
  std::string out;
  for (const NameMapping& m : kNames) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const Units units(text);
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < units.size()) {
    const size_t end = kind == PreTokenizer::Gpt2 ? match_gpt2(units, i) : match_llama3(units, i);
    LLMCTL_ASSERT(end > i && end <= units.size());
    pieces.push_back(text.substr(units.offset(i), units.offset(end) - units.offset(i)));
    i = end;
  }
  return pieces;
}

}  // namespace llmctl

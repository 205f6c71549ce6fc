// TextNormalizer (text_normalizer.h). Unicode normalization is utf8proc's (Debian
// libutf8proc), the library Julia and PostgreSQL use, rather than tables of our own.
#include "tokenizer/text_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace llmctl {

namespace {

int utf8proc_options(TextNormalizer::Kind form) {
  switch (form) {
    case TextNormalizer::Kind::Nfc: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case TextNormalizer::Kind::Nfd: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case TextNormalizer::Kind::Nfkc: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case TextNormalizer::Kind::Nfkd: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    case TextNormalizer::Kind::Prepend: case TextNormalizer::Kind::Replace:
    case TextNormalizer::Kind::PrefixSpace: break;
  }
  LLMCTL_ASSERT(false && "not a normalization form");
  return 0;
}

// Appends the normalization of `valid` (valid UTF-8) to out.
void normalize_valid(std::string_view valid, int options, std::string& out) {
  if (valid.empty()) return;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                   static_cast<utf8proc_ssize_t>(valid.size()), &mapped,
                   static_cast<utf8proc_option_t>(options));
  const std::unique_ptr<utf8proc_uint8_t, void (*)(void*)> owned(mapped, std::free);
  if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos; pos = hit + from.size())
    out.append(text.substr(pos, hit - pos)).append(to);
  out.append(text.substr(pos));
  return out;
}

}  // namespace

std::string unicode_normalize(std::string_view text, TextNormalizer::Kind form) {
  const int options = utf8proc_options(form);
  std::string out;
  out.reserve(text.size());
  // Runs of valid characters are normalized; an invalid byte ends a run and is copied.
  size_t run = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8_valid_char_len(text, pos);
    if (len > 0) {
      pos += len;
      continue;
    }
    normalize_valid(text.substr(run, pos - run), options, out);
    out.push_back(text[pos]);
    run = ++pos;
  }
  normalize_valid(text.substr(run), options, out);
  return out;
}

std::string TextNormalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::Nfc: case Kind::Nfd: case Kind::Nfkc: case Kind::Nfkd:
        s = unicode_normalize(s, step.kind);
        break;
      case Kind::Prepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case Kind::Replace:
        s = replace_all(s, step.text, step.replacement);
        break;
      case Kind::PrefixSpace:
        if (!s.empty() && s.front() != ' ') s.insert(0, " ");
        break;
    }
  }
  return s;
}

}  // namespace llmctl

// RegexSplitter (regex_split.h) on PCRE2.

#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <utility>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace llmctl {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(reinterpret_cast<const char*>(buf));
}

// Per-thread match state: the JIT stack grows past PCRE2's 32 KiB default, which long runs
// of backtracking patterns (\s+(?!\S) over a page of spaces) would exceed.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || jit_stack == nullptr)
      throw Error("PCRE2: out of memory creating the pre-tokenizer's match state");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

// The text as PCRE2 may see it (valid UTF-8) and, when it had to be changed, the original
// offset of every byte offset in the copy that starts a character (and of its end).
struct Subject {
  std::string_view text;
  std::string copy;
  std::vector<uint32_t> to_original;  // empty when `text` is used as is

  explicit Subject(std::string_view original) : text(original) {
    if (utf8_is_valid(original)) return;
    copy.reserve(original.size() + 8);
    to_original.reserve(original.size() + 8);
    for (size_t pos = 0; pos < original.size();) {
      const size_t len = utf8_valid_char_len(original, pos);
      if (len == 0) {
        for (size_t k = 0; k < kUtf8Replacement.size(); ++k)
          to_original.push_back(static_cast<uint32_t>(pos));
        copy.append(kUtf8Replacement);
        pos += 1;
      } else {
        for (size_t k = 0; k < len; ++k) to_original.push_back(static_cast<uint32_t>(pos));
        copy.append(original.substr(pos, len));
        pos += len;
      }
    }
    to_original.push_back(static_cast<uint32_t>(original.size()));
    text = copy;
  }

  size_t original_offset(size_t offset) const {
    return to_original.empty() ? offset : to_original[offset];
  }
};

size_t next_char(std::string_view s, size_t pos) {
  ++pos;
  while (pos < s.size() && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {
  for (const std::string& p : patterns_) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (c->code == nullptr)
      throw Error(fmt::format("pre-tokenizer regex /{}/ does not compile: {} at offset {}", p,
                              pcre2_message(err), err_offset));
    // Without a JIT (unsupported CPU) pcre2_match interprets the pattern: slower, same result.
    (void)pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  const Subject subject(text);
  const std::string_view s = subject.text;
  ThreadMatchState& state = thread_match_state();

  // Pieces as [begin, end) byte ranges of the subject.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!s.empty()) pieces.emplace_back(0, s.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& c : compiled_) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      const auto* base = reinterpret_cast<PCRE2_SPTR>(s.data() + begin);
      const size_t len = end - begin;
      size_t last = 0;  // end of the previous match, relative to begin
      size_t pos = 0;
      uint32_t options = 0;
      while (pos <= len) {
        const int rc = pcre2_match(c->code, base, len, pos, options | PCRE2_NO_UTF_CHECK,
                                   state.data, state.context);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (options == 0 || pos >= len) break;
          // No non-empty match here after an empty one: step one character, as Python does.
          pos = next_char(std::string_view(s.data() + begin, len), pos);
          options = 0;
          continue;
        }
        if (rc < 0)
          throw Error(fmt::format("pre-tokenizer regex /{}/ failed on a piece of {} bytes: {}",
                                  patterns_[static_cast<size_t>(&c - compiled_.data())], len,
                                  pcre2_message(rc)));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_begin > last) next.emplace_back(begin + last, begin + m_begin);
        if (m_end > m_begin) next.emplace_back(begin + m_begin, begin + m_end);
        last = m_end;
        pos = m_end;
        // After an empty match, look for a non-empty one at the same place first.
        options = m_end == m_begin ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
        if (pos == len && m_end > m_begin) break;
      }
      if (last < len) next.emplace_back(begin + last, end);
    }
    pieces.swap(next);
  }

  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) {
    const size_t b = subject.original_offset(begin), e = subject.original_offset(end);
    out.push_back(text.substr(b, e - b));
  }
  return out;
}

}  // namespace llmctl

// Jinja's tokenizer (jinja2/lexer.py): text runs, tags, and the tokens inside tags.
#include "tokenizer/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace llmctl::jinja {

void syntax_error(int line, int column, const std::string& what) {
  throw TemplateError(fmt::format("line {}, column {}: {}", line, column, what));
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string_view src, const Options& opt) : opt_(opt) {
    // Jinja normalizes \r\n and \r to \n and drops one trailing newline of the template
    // (keep_trailing_newline=False).
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        owned_ += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        owned_ += src[i];
      }
    }
    if (!owned_.empty() && owned_.back() == '\n') owned_.pop_back();
    src_ = owned_;
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      std::string text(src_.substr(pos_, start - pos_));
      if (start == src_.size()) {
        emit_text(std::move(text), pos_);
        break;
      }
      const char kind = src_[start + 1];  // '{', '%', '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), is_space))
          text.resize(l_pos);
      }
      emit_text(std::move(text), pos_);
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        lex_comment(start);
      } else {
        push(kind == '{' ? Token::VarBegin : Token::BlockBegin, "", start);
        lex_tag(kind == '{' ? '}' : '%', start);
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    push(Token::End, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  void position(size_t offset, int& line, int& col) const {
    line = 1 + static_cast<int>(std::count(src_.begin(), src_.begin() + static_cast<long>(offset), '\n'));
    const size_t nl = offset == 0 ? std::string_view::npos : src_.rfind('\n', offset - 1);
    col = static_cast<int>(offset - (nl == std::string_view::npos ? 0 : nl + 1)) + 1;
  }

  void push(Token::Kind k, std::string text, size_t offset) {
    Token t;
    t.kind = k;
    t.text = std::move(text);
    position(offset, t.line, t.column);
    tokens_.push_back(std::move(t));
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) push(Token::Text, std::move(text), offset);
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    int line = 0, col = 0;
    position(offset, line, col);
    syntax_error(line, col, what);
  }

  // After a tag's closing delimiter: '-' eats all whitespace, trim_blocks one newline.
  void after_close(bool minus, bool plus, bool block_like) {
    if (minus) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (block_like && opt_.trim_blocks && !plus) {
      if (pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
    }
  }

  void lex_comment(size_t start) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) fail(start, "unexpected end of template: missing '#}'");
    const bool minus = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    after_close(minus, plus, true);
  }

  void lex_tag(char closer, size_t start) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) fail(start, closer == '}' ? "unexpected end of template: missing '}}'"
                                                          : "unexpected end of template: missing '%}'");
      const char c = src_[pos_];
      const auto closes_at = [&](size_t p) {
        return p + 1 < src_.size() && src_[p] == closer && src_[p + 1] == '}';
      };
      if (depth == 0 && (closes_at(pos_) || ((c == '-' || c == '+') && closes_at(pos_ + 1)))) {
        const bool minus = c == '-', plus = c == '+';
        push(closer == '}' ? Token::VarEnd : Token::BlockEnd, "", pos_);
        pos_ += (minus || plus) ? 3 : 2;
        after_close(minus, plus, closer == '%');
        return;
      }
      const size_t tok_start = pos_;
      if (is_name_start(c)) {
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        push(Token::Name, std::string(src_.substr(tok_start, pos_ - tok_start)), tok_start);
      } else if (is_digit(c)) {
        lex_number(tok_start);
      } else if (c == '\'' || c == '"') {
        push(Token::String, lex_string(tok_start), tok_start);
      } else {
        static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : two)
          if (src_.substr(pos_, 2) == t) op = t;
        if (op.size() == 1 && !std::strchr("+-*/%~<>=()[]{},.:|", c))
          fail(pos_, fmt::format("unexpected char '{}'", c));
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        pos_ += op.size();
        push(Token::Op, op, tok_start);
      }
    }
  }

  void lex_number(size_t start) {
    bool is_float = false;
    const auto digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        pos_ = p;
        digits();
      }
    }
    std::string text(src_.substr(start, pos_ - start));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    push(is_float ? Token::Float : Token::Int, text, start);
  }

  // A Python string literal's value: \n \t \r \\ \' \" \xHH \uXXXX \UXXXXXXXX; others stay.
  std::string lex_string(size_t start) {
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unexpected end of string literal");
      const char c = src_[pos_++];
      if (c == quote) return out;
      if (c != '\\' || pos_ >= src_.size()) {
        out += c;
        continue;
      }
      const char e = src_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': case '\'': case '"': out += e; break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) fail(pos_ - 2, "truncated \\x, \\u or \\U escape");
          const std::string hex(src_.substr(pos_, n));
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(pos_ - 2, "bad \\x, \\u or \\U escape");
          append_utf8(out, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
          pos_ += n;
          break;
        }
        default: out += '\\'; out += e;
      }
    }
  }

  std::string owned_;
  std::string_view src_;
  const Options& opt_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const Options& opt) { return Lexer(source, opt).run(); }

}  // namespace llmctl::jinja

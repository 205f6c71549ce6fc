// How llmctl's command line reads (cli_style.h): help layout, number checks, parse errors in
// our words, other tools' spellings.
#include "cli/cli_style.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

#include "core/edit_distance.h"

namespace llmctl::cli {

namespace {

// What a value placeholder says for CLI11's type names.
std::string placeholder(const std::string& type) {
  if (type == "INT" || type == "UINT") return "N";
  if (type == "FLOAT") return "X";
  return type;
}

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }

  // "N=0", "{on,off}=on", "FILE ...", "TEXT (required)"; never validator descriptions, Needs
  // or Excludes (the descriptions say what matters in words).
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    if (opt->get_type_size() == 0) return "";  // a flag
    // get_type_name() is the type and each validator's description, ':'-separated; a set of
    // choices ("{on,off}") is the best placeholder, else the type alone.
    const std::string full = opt->get_type_name();
    std::string shown = placeholder(full.substr(0, full.find(':')));
    for (size_t at = full.find(':'); at != std::string::npos; at = full.find(':', at + 1))
      if (full.compare(at + 1, 1, "{") == 0) shown = full.substr(at + 1, full.find('}', at) - at);
    std::string out = " " + shown;
    if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " (required)";
    return out;
  }
};

// "-n/--n-predict" for an option of `app` or of a subcommand it parsed; `name` as given when
// none has it.
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  if (name.empty()) return nullptr;
  for (const CLI::App* sub : app.get_subcommands())
    if (const CLI::Option* o = find_option(*sub, name)) return o;
  return app.get_option_no_throw(name);
}

std::string display_name(const CLI::Option* o, const std::string& name) {
  if (!o || o->get_positional()) return name;
  std::string s;
  if (!o->get_snames().empty()) s = "-" + o->get_snames().front();
  if (!o->get_lnames().empty()) s += (s.empty() ? "--" : "/--") + o->get_lnames().front();
  return s.empty() ? name : s;
}

// The deepest subcommand parsed: where an unexpected argument was met.
const CLI::App* deepest(const CLI::App& app) {
  const std::vector<CLI::App*> subs = app.get_subcommands();
  return subs.empty() ? &app : deepest(*subs.front());
}

// "unknown option '--ctxx'; did you mean '--ctx'?" for each unexpected argument.
std::string unexpected_text(const CLI::App& app, const std::string& args) {
  const CLI::App* at = deepest(app);
  std::vector<std::string> words;
  for (size_t b = 0, e = 0; b < args.size(); b = e + 1) {
    e = args.find(' ', b);
    if (e == std::string::npos) e = args.size();
    if (e > b) words.push_back(args.substr(b, e - b));
  }
  std::reverse(words.begin(), words.end());  // CLI11 lists them last to first
  std::string out;
  bool after_unknown = false;
  for (const std::string& w : words) {
    const bool option = w.size() >= 2 && w[0] == '-';
    // A word right after an unknown option is most likely its value: one error, not two.
    if (!option && std::exchange(after_unknown, false)) continue;
    if (!out.empty()) out += "; ";
    if (!option) {
      out += fmt::format("unexpected argument '{}'", w);
      continue;
    }
    after_unknown = true;
    const std::string key = w.substr(0, w.find('='));
    std::string best;
    size_t best_d = 3;
    for (const CLI::Option* o : at->get_options())
      for (const std::string& l : o->get_lnames())
        if (const size_t d = edit_distance(key, "--" + l); d < best_d) {
          best_d = d;
          best = "--" + l;
        }
    out += fmt::format("unknown option '{}'", key);
    if (!best.empty()) out += fmt::format("; did you mean '{}'?", best);
  }
  return out;
}

std::string after(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0 ? s.substr(prefix.size()) : std::string();
}

}  // namespace

std::shared_ptr<CLI::Formatter> make_help_formatter() { return std::make_shared<HelpFormatter>(); }

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string wants =
      hi == std::numeric_limits<int64_t>::max() ? fmt::format("wants an integer >= {}", lo)
                                                : fmt::format("wants an integer from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, wants](std::string& v) -> std::string {
        int64_t x = 0;
        const char* end = v.data() + v.size();
        const auto [p, ec] = std::from_chars(v.data(), end, x);
        if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == end && (x < lo || x > hi)))
          return fmt::format("{}, got {}", wants, v);
        if (ec != std::errc() || p != end) return fmt::format("{}, got '{}'", wants, v);
        return {};
      },
      "");
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  std::string wants = "wants a number";
  if (hi == std::numeric_limits<double>::max())
    wants += fmt::format(" {} {:g}", lo_open ? ">" : ">=", lo);
  else
    wants += fmt::format(" in {}{:g}, {:g}]", lo_open ? "(" : "[", lo, hi);
  return CLI::Validator(
      [lo, hi, lo_open, wants](std::string& v) -> std::string {
        double x = 0;
        size_t used = 0;
        try {
          x = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != v.size() || !std::isfinite(x))
          return fmt::format("{}, got '{}'", wants, v);
        if (x < lo || (lo_open && x == lo) || x > hi) return fmt::format("{}, got {}", wants, v);
        return {};
      },
      "");
}

CLI::Validator positive_number() {
  return number_in(0.0, std::numeric_limits<double>::max(), true);
}

CLI::Validator one_of(std::vector<std::string> names) {
  const std::string wants = fmt::format("wants one of {}", fmt::join(names, ", "));
  return CLI::Validator(
      [names, wants](std::string& v) -> std::string {
        for (const std::string& n : names)
          if (v == n) return {};
        return fmt::format("{}, got '{}'", wants, v);
      },
      fmt::format("{{{}}}", fmt::join(names, ",")));
}

std::string usage_error_text(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  // ConversionError: "Could not convert: --temp = abc".
  if (const std::string rest = after(what, "Could not convert: "); !rest.empty()) {
    const size_t eq = rest.find(" = ");
    const std::string name = rest.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : rest.substr(eq + 3);
    const CLI::Option* o = find_option(app, name);
    const std::string type = o ? o->get_type_name() : "";
    const char* wants = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 ? "an integer"
                        : type.rfind("FLOAT", 0) == 0                          ? "a number"
                                                                                : "another value";
    return fmt::format("{} wants {}, got '{}'", display_name(o, name), wants, value);
  }
  for (const char* prefix :
       {"The following argument was not expected: ", "The following arguments were not expected: "})
    if (const std::string rest = after(what, prefix); !rest.empty()) return unexpected_text(app, rest);
  // "--csv excludes --json"
  if (const size_t at = what.find(" excludes "); at != std::string::npos && what.find(' ') == at) {
    const std::string a = what.substr(0, at), b = what.substr(at + 10);
    return fmt::format("{} and {} cannot be combined", display_name(find_option(app, a), a),
                       display_name(find_option(app, b), b));
  }
  // "NAME: TEXT": ValidationError, ArgumentMismatch ("--model: 1 required TEXT missing").
  if (const size_t colon = what.find(": "); colon != std::string::npos && what.find(' ') > colon) {
    const std::string name = what.substr(0, colon), text = what.substr(colon + 2);
    const CLI::Option* o = find_option(app, name);
    const std::string shown = display_name(o, name);
    if (text.find(" required ") != std::string::npos && text.find(" missing") != std::string::npos)
      return fmt::format("{} needs a value", shown);
    if (text.rfind("wants ", 0) == 0) return fmt::format("{} {}", shown, text);
    // Our own checks often name the option in their text already.
    if (text.find(name) != std::string::npos || text.find(shown) != std::string::npos) return text;
    if (o) return fmt::format("{}: {}", shown, text);
  }
  // "--model is required"
  if (const size_t at = what.find(" is required"); at != std::string::npos && what.find(' ') == at) {
    const std::string name = what.substr(0, at);
    return fmt::format("{} is required", display_name(find_option(app, name), name));
  }
  return what;
}

std::vector<std::string> with_long_spellings(std::vector<std::string> args) {
  // llama.cpp's (and vLLM's -tp) multi-letter single-dash names, which CLI11 cannot declare.
  static constexpr std::pair<std::string_view, std::string_view> kSpellings[] = {
      {"-np", "--parallel"},       {"-sys", "--system-prompt"}, {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"}, {"-dev", "--device"},        {"-tp", "--tensor-parallel-size"}};
  for (std::string& a : args) {
    if (a == "--") break;
    const std::string_view key = std::string_view(a).substr(0, a.find('='));
    for (const auto& [typed, meant] : kSpellings)
      if (key == typed) {
        a = std::string(meant) + a.substr(key.size());
        break;
      }
  }
  return args;
}

}  // namespace llmctl::cli

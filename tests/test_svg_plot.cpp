// diag/svg_plot: the documents are well-formed XML (checked by a small tag-balancing parser
// written here, independent of the writer), text is escaped, and points an axis cannot show
// (non-finite; non-positive on a log axis) are skipped.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "diag/svg_plot.h"

using namespace llmctl;

namespace {

// Well-formedness, as far as these documents need: one root element, every start tag closed
// in order, attribute values quoted, no raw '<' or bare '&' in text or attribute values.
// Returns "" when well-formed, else what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = 0, roots = 0;
  auto check_text = [](const std::string& t) -> std::string {
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == '<') return "raw '<' in text";
      if (t[k] == '&') {
        size_t semi = t.find(';', k);
        if (semi == std::string::npos) return "bare '&'";
        std::string ent = t.substr(k + 1, semi - k - 1);
        if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos")
          return "unknown entity &" + ent + ";";
      }
    }
    return "";
  };
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    size_t lt = s.find('<', i);
    std::string text = s.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (std::string p = check_text(text); !p.empty()) return p;
    if (lt == std::string::npos) break;
    if (stack.empty() && text.find_first_not_of(" \n\t") != std::string::npos)
      return "text outside the root";
    // Find the tag's end, skipping '>' inside quoted attribute values.
    size_t k = lt + 1;
    char quote = 0;
    std::string attr_value;
    for (; k < s.size(); ++k) {
      char c = s[k];
      if (quote) {
        if (c == quote) {
          if (std::string p = check_text(attr_value); !p.empty()) return "attribute: " + p;
          attr_value.clear();
          quote = 0;
        } else {
          attr_value += c;
        }
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    if (k >= s.size()) return "unterminated tag";
    std::string tag = s.substr(lt + 1, k - lt - 1);
    i = k + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
      stack.pop_back();
      continue;
    }
    bool self_closing = tag.back() == '/';
    std::string name = tag.substr(0, tag.find_first_of(" \n\t/"));
    if (stack.empty() && ++roots > 1) return "more than one root";
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the checker itself rejects broken XML", "[cpu]") {
  CHECK(xml_problem("<svg><g></svg>") != "");
  CHECK(xml_problem("<svg>a < b</svg>") != "");
  CHECK(xml_problem("<svg>a & b</svg>") != "");
  CHECK(xml_problem("<svg a=\"x<y\"/>") != "");
  CHECK(xml_problem("<svg/><svg/>") != "");
  CHECK(xml_problem("<svg a=\"1 &gt; 0\"><g/>t &amp; u</svg>") == "");
}

TEST_CASE("svg: a line chart is well-formed and escapes its text", "[cpu]") {
  SvgPlot p;
  p.title = "spectrum <of> \"W\" & 'E'";
  p.x_label = "index & rank";
  p.y_label = "sigma";
  p.series.push_back({"s<1>", {1, 2, 3, 4}, {4, 3, 2, 1}, false});
  p.series.push_back({"b&c", {1, 2, 3}, {1, 2, 3}, true});
  std::string svg = render_svg(p);
  INFO(svg);
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("spectrum &lt;of&gt; &quot;W&quot; &amp; &apos;E&apos;") != std::string::npos);
  CHECK(svg.find("index &amp; rank") != std::string::npos);
  // Legend entries, escaped.
  CHECK(svg.find(">s&lt;1&gt;</text>") != std::string::npos);
  CHECK(svg.find(">b&amp;c</text>") != std::string::npos);
  CHECK(count(svg, "<polyline") == 1);
  CHECK(count(svg, "<circle") == 3);
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
}

TEST_CASE("svg: a log axis skips non-positive values and labels decades", "[cpu]") {
  SvgPlot p;
  p.log_y = true;
  p.series.push_back({"", {1, 2, 3, 4, 5, 6}, {-1, 0, 1, 10, 100, 1000}, true});
  std::string svg = render_svg(p);
  INFO(svg);
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<circle") == 4);  // -1 and 0 cannot be drawn
  for (const char* label : {">1<", ">10<", ">100<", ">1000<"})
    CHECK(svg.find(label) != std::string::npos);
  CHECK(svg.find("class=\"legend\"") == std::string::npos);  // no labelled series
  // Every drawn point lies inside the plot rectangle (no -inf from log10(0)).
  CHECK(svg.find("inf") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
}

TEST_CASE("svg: non-finite points are skipped and split a line", "[cpu]") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  SvgPlot p;
  p.series.push_back({"l", {0, 1, 2, 3, 4, 5}, {1, 2, nan, 3, inf, 4}, false});
  std::string svg = render_svg(p);
  INFO(svg);
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<polyline") == 3);  // [0,1], [3], [5]
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("svg: empty and constant data still give a valid chart", "[cpu]") {
  SvgPlot empty;
  empty.title = "nothing";
  std::string svg = render_svg(empty);
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("no data") != std::string::npos);

  SvgPlot flat;
  flat.log_x = true;
  flat.series.push_back({"c", {10, 10}, {5, 5}, false});
  svg = render_svg(flat);
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("nan") == std::string::npos);
}

TEST_CASE("svg: linear ticks are round numbers covering the data", "[cpu]") {
  SvgPlot p;
  p.series.push_back({"", {0, 512}, {0.13, 0.97}, false});
  std::string svg = render_svg(p);
  INFO(svg);
  CHECK(xml_problem(svg) == "");
  for (const char* label : {">0<", ">200<", ">400<", ">600<", ">0.2<", ">1<"})
    CHECK(svg.find(label) != std::string::npos);
}

TEST_CASE("write_svg writes the document and reports unwritable paths", "[cpu]") {
  SvgPlot p;
  p.series.push_back({"a", {1, 2}, {1, 2}, false});
  std::string path = "test_svg_plot_out.svg";
  write_svg(path, p);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(ss.str() == render_svg(p));
  std::remove(path.c_str());
  CHECK_THROWS_AS(write_svg("/nonexistent-dir/x.svg", p), FileError);
}

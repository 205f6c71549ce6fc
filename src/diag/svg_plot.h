#pragma once
// Small self-contained SVG charts for the diagnostics' --svg outputs (rope-probe,
// svd-embed, ...): line or point series on linear or log axes, with ticks, axis labels, a
// title and a legend. No dependencies; the output opens in any browser.

#include <string>
#include <vector>

namespace llmctl {

struct SvgSeries {
  std::string label;        // legend entry ("" for none)
  std::vector<double> x;    // same length as y; non-finite points are skipped
  std::vector<double> y;
  bool points = false;      // markers instead of a polyline
};

struct SvgPlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // log10 axes; non-positive values are skipped
  bool log_y = false;
  std::vector<SvgSeries> series;
  int width = 800;  // pixels
  int height = 480;
};

// The chart as an SVG document (text is XML-escaped).
std::string render_svg(const SvgPlot& plot);
// Writes render_svg(plot) to `path`. Throws FileError.
void write_svg(const std::string& path, const SvgPlot& plot);

}  // namespace llmctl

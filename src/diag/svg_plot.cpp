// SVG charts for the diagnostics' --svg outputs. The chart is laid out as a plot rectangle
// with margins for tick labels and axis labels; data coordinates map linearly (or through
// log10) onto it. Points the axis cannot show (non-finite, or non-positive on a log axis)
// are skipped and split a polyline, so a gap in the data stays a gap in the picture.

#include "diag/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/output_file.h"

namespace llmctl {
namespace {

// ---------------------------------------------------------------------------
// Text and numbers
// ---------------------------------------------------------------------------

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Shortest readable tick label: 0.001, 250, 1e+06.
std::string tick_label(double v) {
  if (std::fabs(v) < 1e-300) return "0";
  return fmt::format("{:.6g}", v);
}

// ---------------------------------------------------------------------------
// Axes: data range, ticks and the data -> pixel map
// ---------------------------------------------------------------------------

struct Axis {
  bool log = false;
  double lo = 0, hi = 1;      // in axis units (log10 of the value when log)
  std::vector<double> ticks;  // in axis units

  // Whether a data value can be drawn on this axis.
  bool shows(double v) const { return std::isfinite(v) && (!log || v > 0); }
  double to_axis(double v) const { return log ? std::log10(v) : v; }
};

// A "nice" step (1, 2 or 5 times a power of ten) giving about `target` intervals.
double nice_step(double span, int target) {
  double raw = span / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag;
  double nice = f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10;
  return nice * mag;
}

// Range and ticks from the values the axis shows (`vals` are already in axis units).
Axis make_axis(bool log, const std::vector<double>& vals) {
  Axis a;
  a.log = log;
  if (vals.empty()) {
    a.lo = 0;
    a.hi = 1;
  } else {
    a.lo = *std::min_element(vals.begin(), vals.end());
    a.hi = *std::max_element(vals.begin(), vals.end());
  }
  if (!(a.hi > a.lo)) {  // one distinct value: give it room
    double pad = log ? 0.5 : (std::fabs(a.lo) > 0 ? std::fabs(a.lo) * 0.1 : 1.0);
    a.lo -= pad;
    a.hi += pad;
  }
  if (log) {
    // Whole decades, at most ~8 labelled ones.
    a.lo = std::floor(a.lo);
    a.hi = std::ceil(a.hi);
    double every = std::max(1.0, std::ceil((a.hi - a.lo) / 8));
    for (double t = a.lo; t <= a.hi + 1e-9; t += every) a.ticks.push_back(t);
    return a;
  }
  double step = nice_step(a.hi - a.lo, 5);
  a.lo = std::floor(a.lo / step) * step;
  a.hi = std::ceil(a.hi / step) * step;
  for (double t = a.lo; t <= a.hi + step * 1e-6; t += step) {
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

std::string axis_tick_label(const Axis& a, double t) {
  return a.log ? tick_label(std::pow(10.0, t)) : tick_label(t);
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr size_t kNumColors = sizeof(kColors) / sizeof(kColors[0]);

struct Frame {
  double left, top, right, bottom;  // plot rectangle in pixels
  Axis x, y;
  double px(double xv) const {
    return left + (x.to_axis(xv) - x.lo) / (x.hi - x.lo) * (right - left);
  }
  double py(double yv) const {
    return bottom - (y.to_axis(yv) - y.lo) / (y.hi - y.lo) * (bottom - top);
  }
  double px_axis(double t) const { return left + (t - x.lo) / (x.hi - x.lo) * (right - left); }
  double py_axis(double t) const { return bottom - (t - y.lo) / (y.hi - y.lo) * (bottom - top); }
};

void draw_axes(std::string& out, const Frame& f, const SvgPlot& plot) {
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#333\"/>\n",
      f.left, f.top, f.right - f.left, f.bottom - f.top);
  out += "<g font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\">\n";
  for (double t : f.x.ticks) {
    double x = f.px_axis(t);
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n", x,
        f.top, f.bottom);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                       f.bottom + 15, xml_escape(axis_tick_label(f.x, t)));
  }
  for (double t : f.y.ticks) {
    double y = f.py_axis(t);
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n",
        f.left, y, f.right);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       f.left - 5, y + 4, xml_escape(axis_tick_label(f.y, t)));
  }
  out += "</g>\n";
  double cx = (f.left + f.right) / 2, cy = (f.top + f.bottom) / 2;
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-family=\"sans-serif\" "
      "font-size=\"13\">{}</text>\n",
      cx, f.bottom + 36, xml_escape(plot.x_label + (plot.log_x ? " (log)" : "")));
  out += fmt::format(
      "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" font-family=\"sans-serif\" "
      "font-size=\"13\" transform=\"rotate(-90 {0:.1f} {1:.1f})\">{2}</text>\n",
      16.0, cy, xml_escape(plot.y_label + (plot.log_y ? " (log)" : "")));
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"22\" text-anchor=\"middle\" font-family=\"sans-serif\" "
      "font-size=\"15\" font-weight=\"bold\">{}</text>\n",
      static_cast<double>(plot.width) / 2, xml_escape(plot.title));
}

void flush_polyline(std::string& out, std::string& pts, const char* color) {
  if (pts.empty()) return;
  out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     color, pts);
  pts.clear();
}

void draw_series(std::string& out, const Frame& f, const SvgSeries& s, const char* color) {
  size_t n = std::min(s.x.size(), s.y.size());
  out += fmt::format("<g class=\"series\" data-label=\"{}\">\n", xml_escape(s.label));
  std::string pts;
  for (size_t i = 0; i < n; ++i) {
    if (!f.x.shows(s.x[i]) || !f.y.shows(s.y[i])) {
      flush_polyline(out, pts, color);  // a gap splits the line
      continue;
    }
    double x = f.px(s.x[i]), y = f.py(s.y[i]);
    if (s.points) {
      out +=
          fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2\" fill=\"{}\"/>\n", x, y, color);
    } else {
      if (!pts.empty()) pts += ' ';
      pts += fmt::format("{:.2f},{:.2f}", x, y);
    }
  }
  flush_polyline(out, pts, color);
  out += "</g>\n";
}

void draw_legend(std::string& out, const Frame& f, const SvgPlot& plot) {
  std::vector<size_t> shown;
  size_t longest = 0;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    if (plot.series[i].label.empty()) continue;
    shown.push_back(i);
    longest = std::max(longest, plot.series[i].label.size());
  }
  if (shown.empty()) return;
  double w = 30 + 6.5 * static_cast<double>(longest),
         h = 8 + 16 * static_cast<double>(shown.size());
  double x0 = f.right - w - 8, y0 = f.top + 8;
  out += "<g class=\"legend\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"white\" "
      "fill-opacity=\"0.85\" stroke=\"#999\"/>\n",
      x0, y0, w, h);
  for (size_t k = 0; k < shown.size(); ++k) {
    size_t i = shown[k];
    const char* color = kColors[i % kNumColors];
    double y = y0 + 14 + 16 * static_cast<double>(k);
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"3\"/>\n",
        x0 + 5, y - 4, x0 + 22, y - 4, color);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x0 + 26, y,
                       xml_escape(plot.series[i].label));
  }
  out += "</g>\n";
}

}  // namespace

std::string render_svg(const SvgPlot& plot) {
  int width = std::max(plot.width, 200), height = std::max(plot.height, 150);
  std::vector<double> xs, ys;
  Frame f{};
  f.x.log = plot.log_x;
  f.y.log = plot.log_y;
  for (const SvgSeries& s : plot.series) {
    size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!f.x.shows(s.x[i]) || !f.y.shows(s.y[i])) continue;
      xs.push_back(f.x.to_axis(s.x[i]));
      ys.push_back(f.y.to_axis(s.y[i]));
    }
  }
  f.x = make_axis(plot.log_x, xs);
  f.y = make_axis(plot.log_y, ys);
  f.left = 78;
  f.top = 36;
  f.right = width - 20;
  f.bottom = height - 50;

  SvgPlot sized = plot;
  sized.width = width;
  sized.height = height;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  draw_axes(out, f, sized);
  // Data outside the rectangle cannot occur (the axes span every shown point), but the
  // clip keeps rounding at the edges from drawing over the tick labels.
  out += fmt::format(
      "<clipPath id=\"plot-area\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{:.1f}\"/></clipPath>\n<g clip-path=\"url(#plot-area)\">\n",
      f.left - 3, f.top - 3, f.right - f.left + 6, f.bottom - f.top + 6);
  for (size_t i = 0; i < plot.series.size(); ++i) {
    draw_series(out, f, plot.series[i], kColors[i % kNumColors]);
  }
  out += "</g>\n";
  if (xs.empty()) {
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-family=\"sans-serif\" "
        "fill=\"#999\">no data</text>\n",
        (f.left + f.right) / 2, (f.top + f.bottom) / 2);
  }
  draw_legend(out, f, plot);
  out += "</svg>\n";
  return out;
}

void write_svg(const std::string& path, const SvgPlot& plot) {
  write_output_file(path, render_svg(plot));
}

}  // namespace llmctl

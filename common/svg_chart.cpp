// DLH — charts as plain inline SVG (see svg_chart.hpp).
#include "common/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace dlh::svg {
namespace {

// Colours a reader tells apart, in the order series take them.
const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
constexpr double kLeft = 70, kRight = 20, kBottom = 46;  // margins, pixels
constexpr double kLegendRow = 14;  // a legend row's height; the plot starts below the last
// More rules than this are drawn without their text (checkpoints every 100 steps would
// bury the plot); their tooltips still name them.
constexpr size_t kMaxRuleLabels = 12;

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char text[128];
  std::snprintf(text, sizeof text, format, a, b, c, d);
  return text;
}

// One axis: data values to pixels, linear or log10.
struct Axis {
  double lo = 0, hi = 1;      // in axis units (log10 of the value on a log axis)
  double pixel_lo, pixel_hi;  // pixels of lo and hi
  bool log = false;
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
  double unit(double v) const { return log ? std::log10(v) : v; }
  double pixel(double v) const {
    const double u = std::clamp(unit(v), lo, hi);
    return pixel_lo + (u - lo) / (hi - lo) * (pixel_hi - pixel_lo);
  }
};

// Ticks at 1, 2 or 5 times a power of ten, about `count` of them over [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

// The axis range over `values` (already in axis units), widened a little so no point sits
// on the frame, and to a unit when all values are equal.
void FitRange(Axis* axis, const std::vector<double>& values, double fixed_lo, double fixed_hi,
              bool include_zero) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (include_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = axis->log ? 0.5 : std::max(std::abs(hi) * 0.1, 0.5);
    lo -= pad, hi += pad;
  } else {
    const double pad = 0.04 * (hi - lo);
    if (!(include_zero && lo == 0)) lo -= pad;
    hi += pad;
  }
  if (std::isfinite(fixed_lo) && axis->usable(fixed_lo)) lo = axis->unit(fixed_lo);
  if (std::isfinite(fixed_hi) && axis->usable(fixed_hi)) hi = axis->unit(fixed_hi);
  if (!(hi > lo)) hi = lo + 1;
  axis->lo = lo, axis->hi = hi;
}

}  // namespace

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "n/a" : (value > 0 ? "inf" : "-inf");
  const double a = std::abs(value);
  if (a != 0 && (a < 1e-3 || a >= 1e6)) return Fmt("%.3g", value);
  if (a >= 1000) return Fmt("%.0f", value);
  return Fmt("%.3g", value);
}

std::string Render(const Chart& chart) {
  const double width = chart.width, height = chart.height;
  Axis x{0, 1, kLeft, width - kRight, chart.log_x};
  // The legend wraps into as many rows as it needs; the plot starts below them.
  std::vector<std::pair<double, double>> legend_at;  // per named series: x, baseline y
  {
    double lx = kLeft, ly = 36;
    for (const Series& s : chart.series) {
      if (s.name.empty()) continue;
      const double item = 28 + 6.5 * double(s.name.size());
      if (lx > kLeft && lx + item > width - kRight) lx = kLeft, ly += kLegendRow;
      legend_at.emplace_back(lx, ly);
      lx += item;
    }
  }
  const double kTop = (legend_at.empty() ? 36 : legend_at.back().second) + 12;
  Axis y{0, 1, height - kBottom, kTop, chart.log_y};
  const bool categories = !chart.x_categories.empty();

  // Ranges over every usable point and rule.
  std::vector<double> xs, ys;
  bool bars = false;
  size_t points = 0;
  for (const Series& s : chart.series) {
    bars = bars || s.style == Style::Bars;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (x.usable(s.x[i]) && y.usable(s.y[i])) {
        xs.push_back(x.unit(s.x[i]));
        ys.push_back(y.unit(s.y[i]));
        ++points;
      }
  }
  for (const Rule& r : chart.x_rules)
    if (x.usable(r.at)) xs.push_back(x.unit(r.at));
  for (const Rule& r : chart.y_rules)
    if (y.usable(r.at)) ys.push_back(y.unit(r.at));
  if (categories) {
    x.lo = -0.5;
    x.hi = double(chart.x_categories.size()) - 0.5;
  } else {
    FitRange(&x, xs, chart.x_min, chart.x_max, false);
  }
  FitRange(&y, ys, chart.y_min, chart.y_max, bars && !chart.log_y);

  std::string out = "<svg class=\"dlh-chart\" data-points=\"" + std::to_string(points) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" " +
                    Fmt("width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", width,
                        height, width, height);
  out += "<title>" + Escape(chart.title) + "</title>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  out += Fmt("<text x=\"%.1f\" y=\"18\" font-size=\"15\" font-weight=\"bold\">", kLeft) +
         Escape(chart.title) + "</text>\n";

  // Grid, ticks and their labels.
  out += "<g font-size=\"11\" fill=\"#444\">\n";
  auto tick_values = [](const Axis& a, int count) {
    std::vector<double> t;
    if (a.log) {
      for (double e = std::ceil(a.lo); e <= a.hi + 1e-9; ++e) t.push_back(std::pow(10, e));
      if (t.size() < 2) {  // less than a decade: linear ticks in value space
        t.clear();
        for (double v : NiceTicks(std::pow(10, a.lo), std::pow(10, a.hi), count))
          if (v > 0) t.push_back(v);
      }
    } else {
      t = NiceTicks(a.lo, a.hi, count);
    }
    return t;
  };
  for (double v : tick_values(y, 5)) {
    const double py = y.pixel(v);
    out += Fmt("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>", kLeft,
               width - kRight, py, py);
    out += Fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", kLeft - 6, py + 4) + Number(v) +
           "</text>\n";
  }
  if (categories) {
    for (size_t i = 0; i < chart.x_categories.size(); ++i) {
      const double px = x.pixel(double(i));
      out += Fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", px, height - kBottom + 16) +
             Escape(chart.x_categories[i]) + "</text>\n";
    }
  } else {
    for (double v : tick_values(x, 6)) {
      const double px = x.pixel(v);
      out += Fmt("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>", px,
                 px, kTop, height - kBottom);
      out += Fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", px, height - kBottom + 16) +
             Number(v) + "</text>\n";
    }
  }
  out += "</g>\n";
  out +=
      Fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"#999\"/>\n",
          kLeft, kTop, width - kLeft - kRight, height - kTop - kBottom);
  out += Fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">",
             (kLeft + width - kRight) / 2, height - 8) +
         Escape(chart.x_label + (chart.log_x ? " (log scale)" : "")) + "</text>\n";
  out += Fmt("<text transform=\"translate(14 %.1f) rotate(-90)\" font-size=\"12\" "
             "text-anchor=\"middle\">",
             (kTop + height - kBottom) / 2) +
         Escape(chart.y_label + (chart.log_y ? " (log scale)" : "")) + "</text>\n";

  // Rules under the data.
  const bool rule_text = chart.x_rules.size() + chart.y_rules.size() <= kMaxRuleLabels;
  for (const Rule& r : chart.x_rules) {
    if (!x.usable(r.at)) continue;
    const std::string color = r.color.empty() ? "#888" : r.color;
    const double px = x.pixel(r.at);
    out += Fmt("<g><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" ", px, px, kTop,
               height - kBottom) +
           "stroke=\"" + color + "\" stroke-dasharray=\"4 3\"/><title>" + Escape(r.label) +
           "</title>";
    // Text on the side with room: right of a line in the left half, left of one beyond.
    const bool right_half = px > (kLeft + width - kRight) / 2;
    if (rule_text && !r.label.empty())
      out += Fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" ", right_half ? px - 3 : px + 3,
                 kTop + 11) +
             (right_half ? "text-anchor=\"end\" " : "") + "fill=\"" + color + "\">" +
             Escape(r.label) + "</text>";
    out += "</g>\n";
  }
  for (const Rule& r : chart.y_rules) {
    if (!y.usable(r.at)) continue;
    const std::string color = r.color.empty() ? "#888" : r.color;
    const double py = y.pixel(r.at);
    out += Fmt("<g><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" ", kLeft, width - kRight,
               py, py) +
           "stroke=\"" + color + "\" stroke-dasharray=\"4 3\"/><title>" + Escape(r.label) +
           "</title>";
    if (rule_text && !r.label.empty())
      out += Fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" fill=\"",
                 width - kRight - 4, py - 4) +
             color + "\">" + Escape(r.label) + "</text>";
    out += "</g>\n";
  }

  // The data, and the legend above the plot.
  size_t bar_series = 0, bar_index = 0;
  for (const Series& s : chart.series) bar_series += s.style == Style::Bars;
  size_t legend_item = 0;
  size_t palette = 0;
  for (const Series& s : chart.series) {
    const std::string color =
        s.color.empty() ? kPalette[palette++ % (sizeof kPalette / sizeof *kPalette)] : s.color;
    const size_t n = std::min(s.x.size(), s.y.size());
    auto tooltip = [&](size_t i) {
      std::string t = i < s.labels.size() ? s.labels[i]
                                          : (s.name.empty() ? "" : s.name + ": ") + Number(s.x[i]) +
                                                ", " + Number(s.y[i]);
      return "<title>" + Escape(t) + "</title>";
    };
    out += "<g>";
    if (s.style == Style::Line) {
      out += "<polyline class=\"d\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\"" +
             (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"";
      for (size_t i = 0; i < n; ++i)
        if (x.usable(s.x[i]) && y.usable(s.y[i]))
          out += Fmt("%.1f,%.1f ", x.pixel(s.x[i]), y.pixel(s.y[i]));
      out += "\"/>";
      // A lone point draws no line: show it as a dot.
      size_t usable = 0, last = 0;
      for (size_t i = 0; i < n; ++i)
        if (x.usable(s.x[i]) && y.usable(s.y[i])) ++usable, last = i;
      if (usable == 1)
        out += Fmt("<circle class=\"d\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"",
                   x.pixel(s.x[last]), y.pixel(s.y[last])) +
               color + "\">" + tooltip(last) + "</circle>";
    } else if (s.style == Style::Points) {
      for (size_t i = 0; i < n; ++i)
        if (x.usable(s.x[i]) && y.usable(s.y[i]))
          out += Fmt("<circle class=\"d\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"",
                     x.pixel(s.x[i]), y.pixel(s.y[i]), s.radius) +
                 color + "\" fill-opacity=\"0.8\">" + tooltip(i) + "</circle>";
    } else {
      // Bars at x share the slot (one x unit on a category axis) with the other bar series.
      double slot = categories ? std::abs(x.pixel(1) - x.pixel(0)) : 0;
      if (!categories) {
        std::vector<double> sorted;
        for (size_t i = 0; i < n; ++i)
          if (x.usable(s.x[i])) sorted.push_back(x.pixel(s.x[i]));
        std::sort(sorted.begin(), sorted.end());
        slot = (width - kLeft - kRight) / std::max<size_t>(1, sorted.size());
        for (size_t i = 1; i < sorted.size(); ++i)
          if (sorted[i] > sorted[i - 1]) slot = std::min(slot, sorted[i] - sorted[i - 1]);
      }
      const double bar = 0.8 * slot / double(std::max<size_t>(1, bar_series));
      const double base = y.pixel(chart.log_y ? std::pow(10, y.lo) : std::max(0.0, y.lo));
      for (size_t i = 0; i < n; ++i) {
        if (!x.usable(s.x[i]) || !y.usable(s.y[i])) continue;
        const double left = x.pixel(s.x[i]) - 0.4 * slot + double(bar_index) * bar;
        const double top = y.pixel(s.y[i]);
        out += Fmt("<rect class=\"d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"",
                   left, std::min(top, base), std::max(bar - 1, 1.0), std::abs(base - top)) +
               color + "\">" + tooltip(i) + "</rect>";
      }
      ++bar_index;
    }
    out += "</g>\n";
    if (!s.name.empty()) {
      const auto [lx, ly] = legend_at[legend_item++];
      out += Fmt("<g font-size=\"11\"><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"8\" "
                 "fill=\"",
                 lx, ly - 8) +
             color + Fmt("\"/><text x=\"%.1f\" y=\"%.1f\">", lx + 16, ly) + Escape(s.name) +
             "</text></g>\n";
    }
  }
  if (points == 0)
    out +=
        Fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#999\" "
            "text-anchor=\"middle\">no data</text>\n",
            (kLeft + width - kRight) / 2, (kTop + height - kBottom) / 2);
  return out + "</svg>\n";
}

}  // namespace dlh::svg

// DLH — charts as plain inline SVG, for the HTML pages DLH writes (dlh-report's run report,
// dlh-estimate recommend --html). No script and no fetched library: a page opened from a
// cluster's shared file system, offline, shows the same thing in every browser, and a
// report of a run years old still opens.
//
// Every chart is one <svg class="dlh-chart" data-points="N"> element, N the number of data
// points it plots (the browser test reads it: a chart without data is an error, not a blank
// box). Points carry a <title> tooltip; the legend names each series. Every mark of the
// data (line, dot, bar) has class "d", so a test can ask the browser for their size.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dlh::svg {

enum class Style {
  Line,    // a polyline through the points, in x order as given
  Points,  // one dot per point
  Bars,    // one bar per point, from 0 to y; several bar series at one x are side by side
};

struct Series {
  Series() = default;
  explicit Series(std::string series_name, Style series_style = Style::Line)
      : name(std::move(series_name)), style(series_style) {}

  std::string name;          // legend; empty: not in the legend
  std::vector<double> x, y;  // same length; non-finite points are skipped
  Style style = Style::Line;
  std::string color;                // CSS colour; empty: the next colour of the palette
  std::vector<std::string> labels;  // empty, or a tooltip per point (x and y are shown else)
  bool dashed = false;
  double radius = 3.5;  // Points: the dots' radius in pixels (larger: a point to stand out)
};

// A vertical line across the plot at x (an event on a time axis: a checkpoint, a resume),
// or a horizontal one at y (a deadline, a target).
struct Rule {
  double at = 0;
  std::string label;  // its tooltip, and written beside the line when the chart has at most
                      // 12 rules (more would bury the data)
  std::string color;  // empty: grey
};

struct Chart {
  Chart() = default;
  Chart(std::string chart_title, std::string x_axis, std::string y_axis)
      : title(std::move(chart_title)), x_label(std::move(x_axis)), y_label(std::move(y_axis)) {}

  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Rule> x_rules;          // vertical lines at these x
  std::vector<Rule> y_rules;          // horizontal lines at these y
  bool log_x = false, log_y = false;  // log10 axes (non-positive values are skipped); the
                                      // axis label says "log scale"
  // Axis range; NaN: from the data (and the rules), with a little room. Bars always
  // include 0.
  double x_min = kAuto, x_max = kAuto, y_min = kAuto, y_max = kAuto;
  // x tick labels instead of numbers, for bar charts over categories (ranks, GPU types):
  // tick i is at x = i.
  std::vector<std::string> x_categories;
  int width = 760, height = 300;  // pixels

  static constexpr double kAuto = __builtin_nan("");
};

// The chart as one <svg> element. A chart with no finite point renders its frame and
// "no data" (data-points="0").
std::string Render(const Chart& chart);

// Text made safe for HTML and SVG content and attribute values.
std::string Escape(const std::string& text);

// A number as a person reads it: 3 significant digits, no exponent between 1e-3 and 1e6
// ("0.0123", "45.6", "1.23e+07").
std::string Number(double value);

}  // namespace dlh::svg

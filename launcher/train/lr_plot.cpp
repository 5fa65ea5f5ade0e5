// DLH — the SVG of a learning-rate range test (see lr_plot.hpp).
#include "launcher/train/lr_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace dlh {
namespace {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;  // margins, pixels

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Formats up to two numbers into a short piece of SVG (every caller's text fits in 256).
std::string Fmt(const char* format, double a, double b = 0) {
  char text[256];
  std::snprintf(text, sizeof text, format, a, b);
  return text;
}

// Data coordinates (log10 lr, loss) to pixels.
struct Axes {
  double x0, x1, y0, y1;
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); }
  double py(double y) const {
    y = std::clamp(y, y0, y1);
    return kHeight - kBottom - (y - y0) / (y1 - y0) * (kHeight - kTop - kBottom);
  }
};

std::string Polyline(const std::vector<std::pair<double, double>>& xy, const Axes& a,
                     const char* style) {
  std::string s = "<polyline fill=\"none\" " + std::string(style) + " points=\"";
  for (const auto& [x, y] : xy) s += Fmt("%.1f,%.1f ", a.px(x), a.py(y));
  return s + "\"/>\n";
}

}  // namespace

std::string LrPlotSvg(const std::vector<LrPoint>& points, const LrSuggestion& sug,
                      const std::string& title) {
  std::vector<std::pair<double, double>> raw, smooth, fit;
  double best = std::numeric_limits<double>::infinity(), low = best, high = -best;
  for (const LrPoint& p : points) {
    if (!std::isfinite(p.loss) || !(p.lr > 0)) continue;
    raw.emplace_back(std::log10(p.lr), p.loss);
    if (std::isfinite(p.smoothed)) {
      smooth.emplace_back(std::log10(p.lr), p.smoothed);
      best = std::min(best, p.smoothed);
    }
    low = std::min(low, p.loss);
    high = std::max(high, p.loss);
  }
  Axes a{-1, 1, 0, 1};
  if (!raw.empty()) {
    a.x0 = raw.front().first;
    a.x1 = std::max(raw.back().first, a.x0 + 1e-6);
    a.y0 = std::max(0.0, low - 0.05 * (high - low));
    a.y1 = std::isfinite(best) ? std::min(high, 4 * best) : high;
    if (!(a.y1 > a.y0)) a.y1 = a.y0 + 1;
  }
  if (sug.points_fitted > 0 && !sug.poly.coef.empty()) {
    const double fx1 = raw[size_t(sug.points_fitted) - 1].first;
    for (int i = 0; i <= 200; ++i) {
      const double x = a.x0 + (fx1 - a.x0) * i / 200.0;
      fit.emplace_back(x, sug.poly.value(x));
    }
  }

  std::string s = Fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" ",
                      kWidth, kHeight) +
                  "font-family=\"sans-serif\" font-size=\"12\">\n" +
                  "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
                  Fmt("<text x=\"%.0f\" y=\"24\" font-size=\"14\">", kLeft) + Escape(title) +
                  "</text>\n";
  if (sug.status == LrSuggestion::Status::kOk) {
    s +=
        Fmt("<rect x=\"%.1f\" y=\"%.0f\" ", a.px(std::log10(sug.lr_low)), kTop) +
        Fmt("width=\"%.1f\" height=\"%.0f\" fill=\"#2ca02c\" fill-opacity=\"0.12\"/>\n",
            a.px(std::log10(sug.lr_high)) - a.px(std::log10(sug.lr_low)), kHeight - kTop - kBottom);
    s += Fmt("<line x1=\"%.1f\" x2=\"%.1f\" ", a.px(std::log10(sug.lr)), a.px(std::log10(sug.lr))) +
         Fmt("y1=\"%.0f\" y2=\"%.0f\" stroke=\"#2ca02c\" stroke-width=\"2\"/>\n", kTop,
             kHeight - kBottom);
  }
  // Axes with a tick per decade and three loss ticks.
  s += Fmt("<path fill=\"none\" stroke=\"black\" d=\"M%.0f %.0f ", kLeft, kTop) +
       Fmt("V%.0f H%.0f\"/>\n", kHeight - kBottom, kWidth - kRight);
  for (int d = int(std::ceil(a.x0)); d <= int(std::floor(a.x1)); ++d)
    s += Fmt("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", a.px(d),
             kHeight - kBottom + 16) +
         Fmt("1e%.0f</text>\n", d);
  for (int k = 0; k <= 2; ++k) {
    const double y = a.y0 + (a.y1 - a.y0) * k / 2;
    s += Fmt("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", kLeft - 6, a.py(y) + 4) +
         Fmt("%.3g</text>\n", y);
  }
  s += Fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">learning rate (log scale)</text>\n",
           (kLeft + kWidth - kRight) / 2, kHeight - 12);
  s +=
      Fmt("<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">"
          "training loss</text>\n",
          kHeight / 2, kHeight / 2);
  s += Polyline(raw, a, "stroke=\"#bbbbbb\" stroke-width=\"1\"");
  s += Polyline(smooth, a, "stroke=\"#1f77b4\" stroke-width=\"2\"");
  if (!fit.empty()) s += Polyline(fit, a, "stroke=\"#ff7f0e\" stroke-width=\"2\"");
  s += Fmt("<text x=\"%.0f\" y=\"%.0f\" fill=\"#1f77b4\">smoothed</text>", kWidth - 190, kTop + 14);
  s += Fmt("<text x=\"%.0f\" y=\"%.0f\" fill=\"#ff7f0e\">", kWidth - 190, kTop + 30) +
       Fmt("fit (degree %.0f)</text>", double(sug.poly.coef.size()) - 1);
  s += Fmt("<text x=\"%.0f\" y=\"%.0f\" fill=\"#2ca02c\">suggested rate</text>\n", kWidth - 190,
           kTop + 46);
  return s + "</svg>\n";
}

}  // namespace dlh

// DLH — tests of the SVG charts and the HTML page frame every DLH page is built from.
#include "common/svg_chart.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/html_page.hpp"

namespace dlh::svg {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChart, CountsOnlyTheFinitePointsItDraws) {
  Chart c("Loss", "step", "loss");
  Series s("train");
  s.x = {1, 2, 3, 4};
  s.y = {1.0, NAN, 0.5, INFINITY};
  c.series.push_back(s);
  const std::string svg = Render(c);
  EXPECT_NE(svg.find("class=\"dlh-chart\" data-points=\"2\""), std::string::npos) << svg;
  EXPECT_EQ(Count(svg, "<polyline class=\"d\""), 1);
  EXPECT_NE(svg.find(">train</text>"), std::string::npos);  // the legend
  EXPECT_EQ(svg.find("nan"), std::string::npos);            // no NaN coordinate written
}

TEST(SvgChart, SaysNoDataInsteadOfDrawingNothing) {
  Chart c("Empty", "x", "y");
  c.series.push_back(Series("none"));
  const std::string svg = Render(c);
  EXPECT_NE(svg.find("data-points=\"0\""), std::string::npos);
  EXPECT_NE(svg.find(">no data</text>"), std::string::npos);
}

TEST(SvgChart, LogAxesSkipNonPositiveValues) {
  Chart c("Rates", "lr", "loss");
  c.log_x = true;
  Series s("sweep", Style::Points);
  s.x = {0, 1e-4, 1e-2, 1};
  s.y = {1, 1, 1, 1};
  c.series.push_back(s);
  const std::string svg = Render(c);
  EXPECT_NE(svg.find("data-points=\"3\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<circle class=\"d\""), 3);
  EXPECT_NE(svg.find(">0.0001</text>"), std::string::npos);  // a decade tick
}

TEST(SvgChart, BarsOnCategoriesAndRules) {
  Chart c("Ranks", "rank", "s");
  c.x_categories = {"0", "1", "2"};
  Series a("compute", Style::Bars), b("allreduce", Style::Bars);
  a.x = b.x = {0, 1, 2};
  a.y = {1, 2, 3};
  b.y = {3, 2, 1};
  c.series = {a, b};
  c.y_rules.push_back({2.5, "deadline <2h>", "#d00"});
  const std::string svg = Render(c);
  EXPECT_EQ(Count(svg, "<rect class=\"d\""), 6);
  EXPECT_NE(svg.find("deadline &lt;2h&gt;"), std::string::npos);  // escaped
  // Every bar stands on 0: its bottom edge is the same pixel row. (sscanf, not std::regex:
  // libstdc++ 12's regex trips -Wmaybe-uninitialized in the sanitized build.)
  double bottom = -1;
  for (size_t at = svg.find("<rect class=\"d\""); at != std::string::npos;
       at = svg.find("<rect class=\"d\"", at + 1)) {
    double x = 0, y = 0, w = 0, h = 0;
    ASSERT_EQ(std::sscanf(svg.c_str() + at,
                          "<rect class=\"d\" x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &x,
                          &y, &w, &h),
              4);
    if (bottom < 0) bottom = y + h;
    EXPECT_NEAR(y + h, bottom, 0.15);
  }
}

TEST(SvgChart, ManyRulesKeepOnlyTheirTooltips) {
  Chart c("Timeline", "min", "step");
  Series s("steps");
  s.x = {0, 10};
  s.y = {0, 100};
  c.series.push_back(s);
  for (int i = 0; i < 30; ++i)
    c.x_rules.push_back({double(i) / 3, "ckpt " + std::to_string(i), ""});
  const std::string svg = Render(c);
  EXPECT_EQ(Count(svg, "<title>ckpt "), 30);
  EXPECT_EQ(Count(svg, ">ckpt "), 30);  // the tooltips only: no text beside the lines
}

TEST(SvgChart, NumbersReadAsAPersonWritesThem) {
  EXPECT_EQ(Number(0.0123), "0.0123");
  EXPECT_EQ(Number(45.67), "45.7");
  EXPECT_EQ(Number(1234.4), "1234");
  EXPECT_EQ(Number(1.234e7), "1.23e+07");
  EXPECT_EQ(Number(0), "0");
  EXPECT_EQ(Number(NAN), "n/a");
}

TEST(HtmlPage, EscapesTextAndKeepsMarkup) {
  HtmlPage page("Run <a>");
  page.refresh_every(10);
  page.heading("H & h");
  page.facts({{"state", "<running>"}});
  page.table({{"a", "b"}, {"1", "\"2\""}});
  page.raw("<svg class=\"dlh-chart\"></svg>");
  const std::string html = page.render();
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<title>Run &lt;a&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<meta http-equiv=\"refresh\" content=\"10\">"), std::string::npos);
  EXPECT_NE(html.find("<h2>H &amp; h</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>&lt;running&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>&quot;2&quot;</td>"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"dlh-chart\"></svg>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace dlh::svg

// DLH — one self-contained HTML page (inline CSS and SVG, no script, nothing fetched),
// the frame of every page DLH writes: dlh-report's run report and dlh-estimate recommend
// --html. Sections are added in reading order; text is escaped here, markup (charts from
// svg_chart.hpp, tables) is added as is.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dlh {

class HtmlPage {
 public:
  explicit HtmlPage(std::string title) : title_(std::move(title)) {}

  // The page reloads itself every `seconds` (a report of a running job); 0: never.
  void refresh_every(int seconds) { refresh_s_ = seconds; }

  void heading(const std::string& text);    // <h2>, a section
  void paragraph(const std::string& text);  // <p>, escaped
  void note(const std::string& text);       // a warning box (partial input, a run in progress)
  // A table: the first row is the header. Cells are escaped.
  void table(const std::vector<std::vector<std::string>>& rows);
  // Two columns, name and value (a run's headline figures). Cells are escaped.
  void facts(const std::vector<std::pair<std::string, std::string>>& rows);
  void raw(const std::string& html);  // markup as is: an SVG chart, a <pre>

  std::string render() const;

 private:
  std::string title_;
  int refresh_s_ = 0;
  std::string body_;
};

}  // namespace dlh

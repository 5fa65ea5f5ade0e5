// DLH — one self-contained HTML page (see html_page.hpp).
#include "common/html_page.hpp"

#include "common/svg_chart.hpp"

namespace dlh {
namespace {

// Readable on a laptop and in a screenshot; charts keep their pixel size and wrap.
const char kStyle[] = R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;
margin:24px auto;max-width:1600px;padding:0 16px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
p{margin:6px 0;max-width:110ch;line-height:1.4}
.note{background:#fff6db;border:1px solid #e8c95a;padding:8px 12px;margin:10px 0;max-width:110ch}
table{border-collapse:collapse;font-size:13px;margin:6px 0;background:#fff}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}table.facts td:first-child{color:#555}
svg.dlh-chart{margin:4px 8px 8px 0;border:1px solid #e3e3e3;vertical-align:top}
pre{background:#fff;border:1px solid #ddd;padding:8px;overflow-x:auto;font-size:12px}
footer{margin-top:30px;color:#777;font-size:12px})";

}  // namespace

void HtmlPage::heading(const std::string& text) { body_ += "<h2>" + svg::Escape(text) + "</h2>\n"; }

void HtmlPage::paragraph(const std::string& text) { body_ += "<p>" + svg::Escape(text) + "</p>\n"; }

void HtmlPage::note(const std::string& text) {
  body_ += "<div class=\"note\">" + svg::Escape(text) + "</div>\n";
}

void HtmlPage::table(const std::vector<std::vector<std::string>>& rows) {
  body_ += "<table>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    body_ += "<tr>";
    for (const std::string& cell : rows[r])
      body_ += (r == 0 ? "<th>" : "<td>") + svg::Escape(cell) + (r == 0 ? "</th>" : "</td>");
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

void HtmlPage::facts(const std::vector<std::pair<std::string, std::string>>& rows) {
  body_ += "<table class=\"facts\">\n";
  for (const auto& [name, value] : rows)
    body_ += "<tr><td>" + svg::Escape(name) + "</td><td>" + svg::Escape(value) + "</td></tr>\n";
  body_ += "</table>\n";
}

void HtmlPage::raw(const std::string& html) { body_ += html; }

std::string HtmlPage::render() const {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  if (refresh_s_ > 0)
    out += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(refresh_s_) + "\">\n";
  out += "<title>" + svg::Escape(title_) + "</title>\n<style>" + kStyle + "</style>\n</head>\n";
  out += "<body>\n<h1>" + svg::Escape(title_) + "</h1>\n" + body_;
  out += "<footer>Written by DLH, the Deep Learning Harness.</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace dlh

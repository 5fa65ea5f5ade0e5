// DLH — the run report's "Results" section, from results.json (launcher/predict/results.hpp,
// written by `dlh-launch predict --results`, which train.sbatch runs after training).
#include "launcher/report/report_results.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/svg_chart.hpp"

namespace dlh::report {
namespace {

// The fields of a file another program may have written: run_data.hpp's readers, which
// give the fallback for a missing or mistyped field.
double Num(const nlohmann::json& j, const char* key) { return NumberField(j, key, std::nan("")); }
std::string Text(const nlohmann::json& j, const char* key) { return TextField(j, key, ""); }

std::string Percent(double v) { return std::isfinite(v) ? svg::Number(100 * v) + "%" : "—"; }

// Per-class F1 and recall as bars: the classes the model serves worst stand out.
void PerClassChart(const nlohmann::json& per_class, HtmlPage* page) {
  svg::Chart c{"Per class: F1 and recall on the test split", "class", "score"};
  svg::Series f1{"F1", svg::Style::Bars}, recall{"recall", svg::Style::Bars};
  f1.color = "#1f77b4", recall.color = "#9ecae1";
  for (size_t i = 0; i < per_class.size(); ++i) {
    c.x_categories.push_back(Text(per_class[i], "name"));
    f1.x.push_back(double(i)), f1.y.push_back(Num(per_class[i], "f1"));
    recall.x.push_back(double(i)), recall.y.push_back(Num(per_class[i], "recall"));
  }
  c.series = {f1, recall};
  c.y_min = 0, c.y_max = 1;
  c.height = 260;
  page->raw(svg::Render(c));
}

// The confusion matrix as a table whose cells shade with their share of the true class's row.
std::string ConfusionTable(const nlohmann::json& confusion, const nlohmann::json& names) {
  std::string h = "<table class=\"dlh-confusion\"><tr><th>true \\ predicted</th>";
  for (const nlohmann::json& n : names) h += "<th>" + svg::Escape(n.get<std::string>()) + "</th>";
  h += "</tr>";
  for (size_t t = 0; t < confusion.size(); ++t) {
    double row = 0;
    for (const nlohmann::json& v : confusion[t]) row += v.get<double>();
    h += "<tr><th>" + svg::Escape(names[t].get<std::string>()) + "</th>";
    for (size_t q = 0; q < confusion[t].size(); ++q) {
      const double v = confusion[t][q].get<double>(), share = row > 0 ? v / row : 0;
      // Right answers in blue, mistakes in red, deeper with the share of the row.
      const int alpha = int(std::lround(std::min(1.0, t == q ? share : 4 * share) * 85));
      const char* rgb = t == q ? "31,119,180" : "214,39,40";
      h += "<td style=\"text-align:right;background:rgba(" + std::string(rgb) + "," +
           svg::Number(alpha / 100.0) + ")\" title=\"" + svg::Escape(svg::Number(100 * share)) +
           "% of the true class\">" + std::to_string(int64_t(v)) + "</td>";
    }
    h += "</tr>";
  }
  return h + "</table>";
}

// The surest mistakes, drawn: each image with "true → predicted (confidence)".
std::string MisclassifiedGrid(const nlohmann::json& wrong, const nlohmann::json& names) {
  std::string h = "<div class=\"dlh-grid\" style=\"display:flex;flex-wrap:wrap;gap:10px\">";
  auto name = [&](const nlohmann::json& c) {
    return c.is_number_unsigned() && c.get<size_t>() < names.size()
               ? names[c.get<size_t>()].get<std::string>()
               : std::string("?");
  };
  for (const nlohmann::json& m : wrong) {
    // Not base64: left out (LoadRun says so once); escaped all the same.
    const std::string image = Text(m, "image_bmp_base64");
    if (image.empty() || !IsBase64Text(image) || !m.contains("index") ||
        !m["index"].is_number_integer())
      continue;
    const std::string caption = name(m.value("true", nlohmann::json())) + " → " +
                                name(m.value("predicted", nlohmann::json())) + " (" +
                                Percent(Num(m, "confidence")) + ")";
    h += "<figure style=\"margin:0;text-align:center;font-size:12px\"><img class=\"dlh-sample\" "
         "width=\"84\" height=\"84\" style=\"image-rendering:pixelated\" alt=\"test sample " +
         std::to_string(m["index"].get<int64_t>()) + "\" src=\"data:image/bmp;base64," +
         svg::Escape(image) + "\"><figcaption>#" + std::to_string(m["index"].get<int64_t>()) +
         "<br>" + svg::Escape(caption) + "</figcaption></figure>";
  }
  return h + "</div>";
}

bool Valid(const nlohmann::json& r) {
  if (!r.is_object() || !r.contains("confusion") || !r["confusion"].is_array() ||
      !r.contains("class_names") || !r["class_names"].is_array() || !r.contains("per_class") ||
      !r["per_class"].is_array())
    return false;
  const size_t k = r["class_names"].size();
  if (k == 0 || r["confusion"].size() != k || r["per_class"].size() != k) return false;
  for (const nlohmann::json& n : r["class_names"])
    if (!n.is_string()) return false;
  for (const nlohmann::json& row : r["confusion"]) {
    if (!row.is_array() || row.size() != k) return false;
    for (const nlohmann::json& v : row)
      if (!v.is_number() || v.get<double>() < 0) return false;
  }
  return true;
}

// The best and the last of the run's evaluations (metrics.jsonl's eval events), and whether
// the checkpoint of the best one's step is still in the run folder: the model to keep may
// not be the last one.
void BestAndFinal(const RunData& run, HtmlPage* page) {
  const EventRecord *best = nullptr, *last = nullptr;
  for (const EventRecord* e : run.events_named("eval")) {
    const double a = Num(e->data, "test_accuracy");
    if (!std::isfinite(a)) continue;
    if (!best || a > NumberField(best->data, "test_accuracy", 0)) best = e;
    last = e;
  }
  if (!best) return;
  char name[32];  // the checkpoint folder's names (launcher/storage/checkpoint_dir.cpp)
  std::snprintf(name, sizeof name, "ckpt-%09lld.h5", (long long)best->step);
  const bool kept =
      std::find(run.checkpoints.begin(), run.checkpoints.end(), name) != run.checkpoints.end();
  auto text = [](const EventRecord* e) {
    return "epoch " + svg::Number(Num(e->data, "epoch")) + ", step " + std::to_string(e->step) +
           ": test accuracy " + Percent(Num(e->data, "test_accuracy"));
  };
  page->table({{"evaluation", "when and how good", "its checkpoint"},
               {"best", text(best), std::string(name) + (kept ? " (kept)" : " (no longer kept)")},
               {"last", text(last), ""}});
}

}  // namespace

void Results(const RunData& run, HtmlPage* page) {
  const nlohmann::json& r = run.results;
  if (r.is_null()) return;  // no results.json: a program's run, or one not analysed yet
  page->heading("Results on the " + (Text(r, "split").empty() ? "test" : Text(r, "split")) +
                " split");
  if (!Valid(r)) {
    page->note(
        "results.json: not the results of a classifier DLH can show (confusion, "
        "class_names and per_class must agree): not used.");
    return;
  }
  page->facts(
      {{"model",
        Text(r, "checkpoint") + " (step " + (r.contains("step") ? r["step"].dump() : "?") + ")"},
       {"samples", r.contains("samples") ? r["samples"].dump() : "?"},
       {"accuracy", Percent(Num(r, "accuracy"))},
       {"macro F1", std::isfinite(Num(r, "macro_f1")) ? svg::Number(Num(r, "macro_f1")) : "—"}});
  BestAndFinal(run, page);
  PerClassChart(r["per_class"], page);
  std::vector<std::vector<std::string>> rows = {{"class", "samples", "precision", "recall", "F1"}};
  for (const nlohmann::json& c : r["per_class"])
    rows.push_back({Text(c, "name"), c.contains("support") ? c["support"].dump() : "",
                    Percent(Num(c, "precision")), Percent(Num(c, "recall")),
                    std::isfinite(Num(c, "f1")) ? svg::Number(Num(c, "f1")) : "—"});
  page->table(rows);
  page->paragraph(
      "Confusion matrix: each row is a true class, each column what the model "
      "predicted; the diagonal is right.");
  page->raw(ConfusionTable(r["confusion"], r["class_names"]));
  if (r.contains("most_confused") && r["most_confused"].is_array() && !r["most_confused"].empty()) {
    std::vector<std::vector<std::string>> confused = {
        {"true class", "taken for", "samples", "of the true class"}};
    for (const nlohmann::json& m : r["most_confused"])
      confused.push_back({Text(m, "true_name"), Text(m, "predicted_name"),
                          m.contains("count") ? m["count"].dump() : "",
                          Percent(Num(m, "share_of_true"))});
    page->paragraph("The classes most often confused:");
    page->table(confused);
  }
  if (r.contains("misclassified") && r["misclassified"].is_array() && !r["misclassified"].empty()) {
    page->paragraph(
        "The misclassified test samples the model was surest of (true class → "
        "predicted, with the model's probability for it):");
    page->raw(MisclassifiedGrid(r["misclassified"], r["class_names"]));
  }
}

}  // namespace dlh::report

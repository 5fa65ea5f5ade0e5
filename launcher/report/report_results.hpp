// DLH — the run report's "Results" section (report_results.cpp): a classifier's accuracy,
// per-class precision/recall/F1, confusion matrix, the classes most confused and its surest
// mistakes drawn, from the run folder's results.json.
#pragma once

#include "common/html_page.hpp"
#include "launcher/report/run_data.hpp"

namespace dlh::report {

// Nothing without results.json; a note when it is not a classifier's results DLH can show.
void Results(const RunData& run, HtmlPage* page);

}  // namespace dlh::report

// DLH fuzz target — dlh-report's reading of a run folder (launcher/report/run_data.hpp) and
// the page and headline built from it. The input is split at its first three NUL bytes into
// metrics.jsonl, summary.json, one heartbeat and results.json (dlh-launch predict's, which
// the report's Results section draws), written to a scratch run folder. Whatever
// they hold, LoadRun must not throw (the folder holds a run), and the report and headline
// must be built: a damaged file is a note on the page, never an exception.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/report/headline.hpp"
#include "launcher/report/report_html.hpp"
#include "launcher/report/run_data.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

struct NothingIsRefused {};  // no exception type is a documented refusal here

const std::string& Folder() {
  static const dlh::fuzz::ScratchFolder dir("dlh-fuzz-run");
  [[maybe_unused]] static const bool made =
      std::filesystem::create_directories(dir.path() + "/heartbeat");
  return dir.path();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t a = input.find('\0');
  const size_t b = a == std::string::npos ? a : input.find('\0', a + 1);
  const size_t c = b == std::string::npos ? b : input.find('\0', b + 1);
  const std::string& dir = Folder();
  Write(dir + "/metrics.jsonl", input.substr(0, a));
  std::filesystem::remove(dir + "/summary.json");
  std::filesystem::remove(dir + "/heartbeat/rank-0.json");
  std::filesystem::remove(dir + "/results.json");
  if (a != std::string::npos) Write(dir + "/summary.json", input.substr(a + 1, b - a - 1));
  if (b != std::string::npos) Write(dir + "/heartbeat/rank-0.json", input.substr(b + 1, c - b - 1));
  if (c != std::string::npos) Write(dir + "/results.json", input.substr(c + 1));
  dlh::fuzz::RefusesOnlyWith<NothingIsRefused>("LoadRun and ReportHtml", [&] {
    const dlh::report::RunData run = dlh::report::LoadRun(dir);
    dlh::report::ReportOptions options;
    options.now = 1.7e9;
    options.max_points = 50;
    dlh::report::ReportHtml(run, options);
    dlh::report::HeadlineRows(dlh::report::HeadlineOf(run, options.now));
  });
  return 0;
}

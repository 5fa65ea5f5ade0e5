// DLH — `dlh-estimate refit` (see observations_cmd.hpp): a calibration's fit rebuilt with the
// jobs the observation store has seen on its device as extra rows.
//
// Which records count, and the GPU layer model refitted beside the linear one:
// estimator/calibrate/refit.hpp.
#include <boost/program_options.hpp>
#include <cstdio>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "estimator/calibrate/refit.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cli/observations_cmd.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/observe/store_reader.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

void PrintFit(const char* which, const TimeModel& m) {
  std::printf("%s fit: %d samples, R2 %.4f, MAPE %.1f%%, %d-fold cross-validated MAPE %.1f%%\n",
              which, m.quality.samples, m.quality.r2, m.quality.mape, m.quality.folds,
              m.quality.cv_mape);
}

}  // namespace

int RefitCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate refit CALIBRATION: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("store", po::value<std::string>()->required(), "the observation store (a folder)")
    ("out", po::value<std::string>()->required(), "write the refitted calibration here")
    ("gpu", po::value<std::string>(), "only records of this GPU type (the cluster's name)")
    ("all", "every record with features, whatever its device, ranks and threads")
    ("folds", po::value<int>()->default_value(5), "cross-validation folds");
  // clang-format on
  po::variables_map vm;
  if (!cli::Parse("refit", args, d, {"CALIBRATION"}, vm)) return kExitOk;
  CheckOutputFolder(cli::Str(vm, "out"), "--out");
  const std::string path = cli::Str(vm, "CALIBRATION");
  RefitOptions o;
  o.all = vm.count("all") > 0;
  o.gpu = vm.count("gpu") ? cli::Str(vm, "gpu") : "";
  o.folds = vm["folds"].as<int>();
  const Calibration cal = LoadCalibration(path);
  const StoreContents s = ReadStore(cli::Str(vm, "store"));
  if (s.check.state != StoreState::kOk) throw UsageError(s.check.message);
  for (const std::string& p : s.problems)
    std::fprintf(stderr, "dlh-estimate: warning: %s: skipped\n", p.c_str());
  std::vector<Observation> records;
  for (const StoredObservation& so : s.records) records.push_back(so.record);
  RefitReport report;
  const Calibration refit =
      RefitCalibration(cal, records, o, path + " with " + cli::Str(vm, "store"), &report);
  for (const std::string& p : report.problems)
    std::fprintf(stderr, "dlh-estimate: warning: %s: skipped\n", p.c_str());
  std::printf(
      "%s: %d observed rows added (%d records skipped: no features, or another device, "
      "type or shape%s)\n",
      path.c_str(), report.added, report.skipped, o.all ? "" : "; --all takes them");
  PrintFit("old", cal.model);
  PrintFit("new", refit.model);
  const LayerRefit& l = report.layers;
  if (l.done) {
    std::printf(
        "GPU layer model (what plans this type): old fit: %d samples, cross-validated MAPE "
        "%.1f%%; on the %d observed rows with layers MAPE %.1f%%\n",
        cal.gpu_layer_model.samples, l.old_cv_mape, l.observed_rows, l.old_observed_mape);
    std::printf(
        "GPU layer model new fit: %d samples (%d of the sweep, %d observed), MAPE %.1f%%, "
        "%d-fold cross-validated MAPE %.1f%%; on the observed rows MAPE %.1f%%\n",
        l.fit.samples, l.sweep_rows, l.observed_rows, l.fit.mape, l.fit.folds, l.fit.cv_mape,
        l.new_observed_mape);
    if (l.observed_without > 0)
      std::printf("  %d observed rows without a spec this build reads: the linear model's only\n",
                  l.observed_without);
  } else if (!l.why_not.empty()) {
    std::printf("GPU layer model kept as it was: %s\n", l.why_not.c_str());
  }
  SaveCalibration(cli::Str(vm, "out"), refit);
  std::printf("wrote %s\n", cli::Str(vm, "out").c_str());
  return kExitOk;
}

}  // namespace dlh

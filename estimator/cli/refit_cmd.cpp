// DLH — `dlh-estimate refit` (see observations_cmd.hpp): a calibration's fit rebuilt with the
// jobs the observation store has seen on its device as extra rows.
//
// Which records count: those with features (a record of a user's program has none), of the
// calibration's device (the same device description, e.g. "cpu" or "cuda:0 (NVIDIA H100
// ...)"; --all: any), of --gpu TYPE when given, and, on a CPU, of one rank per node with the
// calibration's threads (ranks sharing cores run slower than the calibration measures; --all
// takes them as they are). Each is one row: its features, its per-rank batch and its median
// step less the allreduce its plan predicted.
#include <boost/program_options.hpp>
#include <cstdio>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/spec.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cli/observations_cmd.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/optimizer_cost.hpp"
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

double OptimizerExtraOfRecord(const Calibration& cal, const Observation& r) {
  if (cal.optimizer_update.empty() || !r.spec.is_object()) return 0;
  try {
    const TrainSpec spec = ParseSpec(r.spec.dump(), "observation", "");
    return OptimizerExtraSeconds(cal.optimizer_update, spec.optimizer,
                                 ComputeFeatures(spec).params);
  } catch (const std::exception&) {  // a spec this build cannot read: taken as it is
    return 0;
  }
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
  const std::string path = cli::Str(vm, "CALIBRATION");
  const bool all = vm.count("all") > 0;
  const std::string gpu = vm.count("gpu") ? cli::Str(vm, "gpu") : "";
  Calibration cal = LoadCalibration(path);
  const StoreContents s = ReadStore(cli::Str(vm, "store"));
  if (s.check.state != StoreState::kOk) throw UsageError(s.check.message);
  for (const std::string& p : s.problems)
    std::fprintf(stderr, "dlh-estimate: warning: %s: skipped\n", p.c_str());

  // The rows go in through the calibration reader, which checks every feature as it checks
  // the calibration's own.
  nlohmann::json j = CalibrationToJson(cal);
  const int threads = CalibrationThreads(cal);
  int added = 0, skipped = 0;
  for (const StoredObservation& so : s.records) {
    const Observation& r = so.record;
    const bool cpu = cal.device == "cpu";
    const bool fits = all || (r.device == cal.device && (gpu.empty() || r.gpu_type == gpu) &&
                              (!cpu || (r.ranks_per_node == 1 && r.threads_per_rank == threads)));
    // A row is a step of the sweep's optimizer (optimizer_cost.hpp): another's update, less
    // or more than that one's, is taken out where the record's spec says which it was.
    const double seconds =
        r.step_s - (r.has_prediction ? r.predicted_comm_s : 0) - OptimizerExtraOfRecord(cal, r);
    if (!r.features.is_object() || !fits || !(seconds > 0)) {
      ++skipped;
      continue;
    }
    j["samples"].push_back({{"model", "observed " + r.model_name},
                            {"batch", r.per_rank_batch},
                            {"seconds", seconds},
                            {"joules", nullptr},
                            {"features", r.features}});
    ++added;
  }
  Calibration refit = CalibrationFromJson(j, path + " with " + cli::Str(vm, "store"));
  refit.model = FitTimeModel(cal.device, refit.samples, vm["folds"].as<int>());
  std::printf(
      "%s: %d observed rows added (%d records skipped: no features, or another device, "
      "type or shape%s)\n",
      path.c_str(), added, skipped, all ? "" : "; --all takes them");
  PrintFit("old", cal.model);
  PrintFit("new", refit.model);
  SaveCalibration(cli::Str(vm, "out"), refit);
  std::printf("wrote %s\n", cli::Str(vm, "out").c_str());
  return kExitOk;
}

}  // namespace dlh

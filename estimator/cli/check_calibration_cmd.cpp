// DLH — `dlh-estimate check-calibration` (declared in calibrate_cmd.hpp) and `dlh-estimate
// probe`: whether a calibration describes this machine and this build, measured rather than
// read off a host string (calibrate_transfer.hpp).
//
// Exit codes, so that a script (share/examples/demo.sh) can act on each:
//   0  matches: use it as it is
//   2  transfers: usable with the printed ratios and added uncertainty (--transfer-out
//      writes the transferred calibration)
//   1  refused (another engine, no probe recorded, another OpenBLAS core type, ratios out of
//      range), or a damaged calibration or probe, or a probe that cannot run: one line
// 2 is dlh-estimate's usual code for bad input; here bad input is 1, so that 2 means only
// "transfers".
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "estimator/calibrate/calibrate_transfer.hpp"
#include "estimator/cli/calibrate_cmd.hpp"
#include "estimator/cli/command_line.hpp"
#include "launcher/probe/host_probe.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

constexpr int kExitTransfers = 2;

nlohmann::json ReadProbeFile(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, size_t(1) << 20, &text, &why))
    throw EstimateError("--probe: " + path + ": cannot read: " + why);
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem))
    throw EstimateError("--probe: " + path + ": " +
                        (problem.path.empty() ? "" : problem.path + ": ") + problem.message);
  return j;
}

int Check(const po::variables_map& vm) {
  const std::string path = cli::Str(vm, "CALIBRATION");
  const Calibration c = LoadCalibration(path);
  nlohmann::json here;
  // The engine is compared before the host is measured: a stale calibration needs no probe.
  const std::string stale = CalibrationStaleness(c);
  if (stale.empty() && !c.probe.is_null()) {
    if (vm.count("probe")) {
      here = ReadProbeFile(cli::Str(vm, "probe"));
    } else {
      ProbeOptions o;
      o.threads = vm["threads"].as<int>();
      o.budget_s = vm["seconds"].as<double>();
      here = ProbeDevice(c.device == "cpu" ? "cpu" : "cuda", o);
    }
  }
  const std::string probe_name =
      vm.count("probe") ? cli::Str(vm, "probe") + ":" : std::string("this host's probe");
  CalibrationCheck check = CheckCalibrationAgainst(c, path, here, ProbeTolerance{}, probe_name);
  if (check.fit == CalibrationFit::kTransfers && !vm.count("probe")) {
    // A host that reads slower or faster than the calibration's is probed once more, and the
    // faster of the two readings taken, before anything is transferred (FasterOfProbes).
    ProbeOptions o;
    o.threads = vm["threads"].as<int>();
    o.budget_s = vm["seconds"].as<double>();
    here = FasterOfProbes(here, ProbeDevice(c.device == "cpu" ? "cpu" : "cuda", o));
    check = CheckCalibrationAgainst(c, path, here, ProbeTolerance{},
                                    "this host's probe (the faster of 2)");
  }
  switch (check.fit) {
    case CalibrationFit::kMatches:
      std::printf("%s: matches this machine and build (engine %s, %s; %s)\n", path.c_str(),
                  c.engine.c_str(), c.host.c_str(), check.why.c_str());
      return kExitOk;
    case CalibrationFit::kTransfers: {
      std::printf("%s: transfers to this machine: %s; %s\n", path.c_str(),
                  TransferText(check).c_str(), check.why.c_str());
      if (vm.count("transfer-out")) {
        const std::string fixed = cli::Str(vm, "fixed-terms");
        if (fixed != "scale" && fixed != "keep")
          throw UsageError("--fixed-terms: must be scale or keep, got '" + fixed + "'");
        const std::string out = cli::Str(vm, "transfer-out");
        SaveCalibration(out, TransferCalibration(c, check, here, path, fixed == "scale"));
        std::printf("wrote %s\n", out.c_str());
      }
      return kExitTransfers;
    }
    case CalibrationFit::kRefused:
      break;
  }
  // CalibrationStaleness's reason already ends with the remedy.
  const bool remedy = check.why.find("dlh-estimate calibrate") != std::string::npos;
  std::printf("%s: does not match: %s%s\n", path.c_str(), check.why.c_str(),
              remedy ? "" : "; recalibrate: dlh-estimate calibrate");
  return kExitFailure;
}

}  // namespace

int CheckCalibrationCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate check-calibration CALIBRATION: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("transfer-out", po::value<std::string>(),
        "when it transfers (exit 2): write the transferred calibration here")
    ("probe", po::value<std::string>(),
        "compare with this probe (`dlh-estimate probe`'s output) instead of probing this host")
    ("threads", po::value<int>()->default_value(0),
        "CPU probe: threads up to (0: the cores of the affinity mask)")
    ("seconds", po::value<double>()->default_value(3), "how long the probe runs")
    ("fixed-terms", po::value<std::string>()->default_value(
        kTransferScalesFixedTerms ? "scale" : "keep"),
        "CPU transfer: scale the per-step and per-layer overheads by the sgemm ratio, or keep "
        "them (for measuring the transfer)");
  // clang-format on
  po::variables_map vm;
  if (!cli::Parse("check-calibration", args, d, {"CALIBRATION"}, vm)) return kExitOk;
  try {
    return Check(vm);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a damaged file, a probe that cannot run: one line, exit 1
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return kExitFailure;
  }
}

}  // namespace dlh

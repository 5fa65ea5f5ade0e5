// DLH — `dlh-estimate check-calibration` (declared in calibrate_cmd.hpp) and `dlh-estimate
// probe`: whether a calibration describes this machine and this build, measured rather than
// read off a host string (calibrate_transfer.hpp). Given a folder (share/calibration, which
// holds a CPU calibration for each OpenBLAS kernel family the project's hosts run), it checks
// each calibration of the device in it against one probe and chooses the one that fits best.
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
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "common/cli.hpp"
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

// The calibrations CALIBRATION names: the file, or every calibration of `device` (cpu or cuda)
// in the folder (share/calibration holds one CPU calibration per OpenBLAS kernel family).
std::vector<std::pair<std::string, Calibration>> Candidates(const std::string& path,
                                                            const std::string& device) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {{path, LoadCalibration(path)}};
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path, ec))
    if (e.path().extension() == ".json" && e.is_regular_file(ec)) files.push_back(e.path());
  if (ec) throw EstimateError(path + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, Calibration>> out;
  for (const std::string& f : files) {
    Calibration c = LoadCalibration(f);
    if ((device == "cpu") == CpuEngineDevice(c.device)) out.emplace_back(f, std::move(c));
  }
  if (out.empty()) throw EstimateError(path + ": holds no " + device + " calibration");
  return out;
}

// Which of the checks to use: a match before a transfer, of two transfers the one made with
// this host's own OpenBLAS kernels (the other core type of a family shares only sgemm's
// micro-kernel: 0.92x the step time, 0.81-1.02, where the probes' sgemm moved 1.05-1.08x;
// calibrate_transfer.cpp), and of two alike the nearer machine.
size_t Best(const std::vector<CalibrationCheck>& checks) {
  auto rank = [](const CalibrationCheck& c) {
    const int fit = c.fit == CalibrationFit::kMatches     ? 0
                    : c.fit == CalibrationFit::kTransfers ? 1
                                                          : 2;
    const double reach =
        c.fit == CalibrationFit::kRefused
            ? 0
            : std::max(std::fabs(std::log(c.ratio.flops)), std::fabs(std::log(c.ratio.bandwidth)));
    return std::make_tuple(fit, c.fit == CalibrationFit::kTransfers && c.other_kernels, reach);
  };
  size_t best = 0;
  for (size_t i = 1; i < checks.size(); ++i)
    if (rank(checks[i]) < rank(checks[best])) best = i;
  return best;
}

int Check(const po::variables_map& vm) {
  const std::string device = cli::Str(vm, "device");
  if (device != "cpu" && device != "cuda")
    throw UsageError("--device: must be cpu or cuda, got '" + device + "'");
  const std::vector<std::pair<std::string, Calibration>> candidates =
      Candidates(cli::Str(vm, "CALIBRATION"), device);
  ProbeOptions o;
  o.threads = vm["threads"].as<int>();
  o.budget_s = vm["seconds"].as<double>();
  const std::string kind = CpuEngineDevice(candidates.front().second.device) ? "cpu" : "cuda";
  // The engine is compared before the host is measured: a stale calibration needs no probe.
  const bool needs_probe = std::any_of(candidates.begin(), candidates.end(), [](const auto& c) {
    return CalibrationStaleness(c.second).empty() && !c.second.probe.is_null();
  });
  nlohmann::json here;
  if (needs_probe)
    here = vm.count("probe") ? ReadProbeFile(cli::Str(vm, "probe")) : ProbeDevice(kind, o);
  std::string probe_name =
      vm.count("probe") ? cli::Str(vm, "probe") + ":" : std::string("this host's probe");
  auto check_all = [&] {
    std::vector<CalibrationCheck> checks;
    for (const auto& [path, c] : candidates)
      checks.push_back(CheckCalibrationAgainst(c, path, here, ProbeTolerance{}, probe_name));
    return checks;
  };
  std::vector<CalibrationCheck> checks = check_all();
  if (checks[Best(checks)].fit == CalibrationFit::kTransfers && !vm.count("probe")) {
    // A host that reads slower or faster than the calibration's is probed once more, and the
    // faster of the two readings taken, before anything is transferred (FasterOfProbes).
    here = FasterOfProbes(here, ProbeDevice(kind, o));
    probe_name = "this host's probe (the faster of 2)";
    checks = check_all();
  }
  const size_t best = Best(checks);
  const std::string& path = candidates[best].first;
  const Calibration& c = candidates[best].second;
  const CalibrationCheck& check = checks[best];
  int rc = kExitFailure;
  switch (check.fit) {
    case CalibrationFit::kMatches:
      std::printf("%s: matches this machine and build (engine %s, %s; %s)\n", path.c_str(),
                  c.engine.c_str(), c.host.c_str(), check.why.c_str());
      if (vm.count("chosen-out")) {
        SaveCalibration(cli::Str(vm, "chosen-out"), c);
        std::printf("wrote %s\n", cli::Str(vm, "chosen-out").c_str());
      }
      rc = kExitOk;
      break;
    case CalibrationFit::kTransfers: {
      std::printf("%s: transfers to this machine: %s; %s\n", path.c_str(),
                  TransferText(check).c_str(), check.why.c_str());
      const std::string fixed = cli::Str(vm, "fixed-terms");
      if (fixed != "scale" && fixed != "keep")
        throw UsageError("--fixed-terms: must be scale or keep, got '" + fixed + "'");
      for (const char* option : {"transfer-out", "chosen-out"})
        if (vm.count(option)) {
          const std::string out = cli::Str(vm, option);
          SaveCalibration(out, TransferCalibration(c, check, here, path, fixed == "scale"));
          std::printf("wrote %s\n", out.c_str());
        }
      rc = kExitTransfers;
      break;
    }
    case CalibrationFit::kRefused: {
      // CalibrationStaleness's reason already ends with the remedy.
      const bool remedy = check.why.find("dlh-estimate calibrate") != std::string::npos;
      std::printf("%s: does not match: %s%s\n", path.c_str(), check.why.c_str(),
                  remedy ? "" : "; recalibrate: dlh-estimate calibrate");
      break;
    }
  }
  // The others of a folder, one line each, so that a refusal names every reason.
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i == best) continue;
    const CalibrationCheck& other = checks[i];
    std::string why = other.why;
    if (other.fit == CalibrationFit::kMatches) why = "matches too (farther)";
    if (other.fit == CalibrationFit::kTransfers)
      why = "transfers: " + TransferText(other) +
            (other.other_kernels ? ", made with the other core type's kernels" : "");
    std::printf("  not chosen: %s: %s\n", candidates[i].first.c_str(), why.c_str());
  }
  return rc;
}

}  // namespace

int CheckCalibrationCommand(const std::vector<std::string>& args) {
  po::options_description d(
      "dlh-estimate check-calibration CALIBRATION (a file, or a folder of calibrations: the one "
      "that fits this host best is chosen): options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("transfer-out", po::value<std::string>(),
        "when it transfers (exit 2): write the transferred calibration here")
    ("chosen-out", po::value<std::string>(),
        "write the calibration to plan with here: the one that matches as it is (exit 0), or "
        "the one that transfers, transferred (exit 2)")
    ("device", po::value<std::string>()->default_value("cpu"),
        "with a folder: check its calibrations of this device, cpu or cuda")
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
  for (const char* option : {"transfer-out", "chosen-out"})
    if (vm.count(option)) CheckOutputFolder(cli::Str(vm, option), std::string("--") + option);
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

// DLH — `dlh-estimate profile --device cuda[:N]` (see profile_gpu_cmd.hpp).
#include "estimator/cli/profile_gpu_cmd.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/time_steps_file.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/calibrate_launch.hpp"
#include "estimator/cli/command_line.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

// The models of --set: a validation set by name, or the GPU calibration's sweep.
std::vector<SweepEntry> ModelsOf(const std::string& set) {
  if (set == "sweep") return GpuCalibrationSweep(false);
  if (set == "quick-sweep") return GpuCalibrationSweep(true);
  if (set != "term" && set != "judged" && set != "all")
    throw UsageError("profile: --set: must be term, judged, all, sweep or quick-sweep, got '" +
                     set + "'");
  return ValidationSet(set, true);
}

std::string Mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
  return text;
}

void PrintProfile(const TimeStepsSample& s) {
  if (s.seconds < 0) {
    std::printf("%s b%lld: not profiled: %s\n\n", s.model.c_str(), (long long)s.batch,
                s.error.c_str());
    return;
  }
  std::printf("%s, batch %lld: step %.3f ms timed whole%s\n", s.model.c_str(), (long long)s.batch,
              s.seconds * 1e3,
              s.layers_held ? ""
                            : "; its steps could not be held until issued (a call waits for the "
                              "stream): the passes' device times hold the host's gaps");
  if (s.layers.empty()) {
    std::printf("  no passes timed (a result of time-steps without --profile)\n\n");
    return;
  }
  std::printf("  %5s %-16s %-16s %10s %9s  %-40s %-11s %s\n", "layer", "kind", "pass", "device ms",
              "host ms", "algorithm", "math", "workspace");
  double device = 0, host = 0;
  for (const LayerPassTime& p : s.layers) {
    const std::string layer = p.layer < 0 ? "-" : std::to_string(p.layer);
    std::printf("  %5s %-16s %-16s %10.4f %9.4f  %-40s %-11s %s\n", layer.c_str(), p.kind.c_str(),
                p.pass.c_str(), p.device_s * 1e3, p.host_s * 1e3,
                p.algorithm.empty() ? "-" : p.algorithm.c_str(),
                p.math.empty() ? "-" : p.math.c_str(),
                p.algorithm.empty() ? "-" : Mib(p.workspace_bytes).c_str());
    device += p.device_s;
    host += p.host_s;
  }
  std::printf(
      "  the passes: device %.3f ms, host %.3f ms to issue them; the step timed whole: %.3f "
      "ms\n\n",
      device * 1e3, host * 1e3, s.seconds * 1e3);
}

void Print(const TimeStepsResult& r, bool json) {
  if (json) {
    std::cout << TimeStepsResultText(r);
    return;
  }
  const std::string on =
      r.device.value("kind", "") == "cuda" ? GpuHostLine(r.device) : r.device.value("kind", "?");
  const int steps = r.options.value("profile_steps", 0);
  std::printf(
      "on %s; each pass the median of %d profiled steps, timed between CUDA events with the "
      "stream held until the step was issued (device: the GPU's own time; host: the time to "
      "issue the pass's calls)\n\n",
      on.c_str(), steps);
  for (const TimeStepsSample& s : r.samples) PrintProfile(s);
}

}  // namespace

bool IsGpuProfile(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--device" || a.rfind("--device=", 0) == 0 || a == "--measured" ||
        a.rfind("--measured=", 0) == 0)
      return true;
  }
  return false;
}

int ProfileGpuCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate profile --device cuda[:N]: options");
  std::string device, set, out, measured;
  TimingOptions timing;
  timing.profile_steps = 10;
  int batch = 0;
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("device", po::value(&device), "cuda (GPU 0) or cuda:N: the GPU whose steps are profiled "
        "(the CPU engine: dlh-estimate profile SPEC)")
    ("set", po::value(&set), "instead of SPEC: term, judged or all (the GPU validation models), "
        "sweep or quick-sweep (the GPU calibration's)")
    ("batch", po::value(&batch)->default_value(0), "with SPEC: the batch (0: the spec's)")
    ("steps", po::value(&timing.profile_steps)->default_value(timing.profile_steps),
        "profiled steps per model; each pass's figures are their median")
    ("repeats", po::value(&timing.repeats)->default_value(timing.repeats),
        "timed blocks of the whole step, apart from the profiled ones")
    ("out", po::value(&out), "keep the result here (for --measured and gpu-layers --profile)")
    ("measured", po::value(&measured), "instead: print a result kept with --out")
    ("json", "print the result as JSON (the --out file's format)");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.positional.push_back({"SPEC", ""});
  syntax.prefix = "profile: ";
  syntax.suffix = " (see dlh-estimate profile --device cuda --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const bool json = vm.count("json") > 0;
  const bool has_spec = vm.count("SPEC") > 0;
  if (!measured.empty()) {
    if (!device.empty() || has_spec || !set.empty() || !out.empty())
      throw UsageError(
          "profile: --measured prints a kept result: no --device, SPEC, --set or "
          "--out with it");
    Print(ReadTimeStepsResult(measured), json);
    return kExitOk;
  }
  if (device == "cpu")
    throw UsageError(
        "profile: --device cpu: the CPU engine is profiled in this process: "
        "dlh-estimate profile SPEC [--threads N]");
  if (device != "cuda" && device.rfind("cuda:", 0) != 0)
    throw UsageError("profile: --device: must be cuda or cuda:N, got '" + device + "'");
  if (has_spec == !set.empty()) throw UsageError("profile: give SPEC or --set NAME (one of them)");
  if (timing.profile_steps < 1 || timing.profile_steps > 1000)
    throw UsageError("profile: --steps: must be 1 to 1000");
  if (timing.repeats < 1 || timing.repeats > 1000)
    throw UsageError("profile: --repeats: must be 1 to 1000");
  if (batch < 0) throw UsageError("profile: --batch: must not be negative");
  if (!set.empty() && batch != 0)
    throw UsageError("profile: --batch goes with SPEC; each model of --set has its own");

  std::vector<SweepEntry> entries;
  if (has_spec) {
    SweepEntry e;
    e.spec = LoadSpec(vm["SPEC"].as<std::string>());
    e.batch = batch > 0 ? batch : e.spec.batch_size;
    entries.push_back(std::move(e));
  } else {
    entries = ModelsOf(set);
  }
  if (!out.empty()) {  // an unwritable --out fails before the GPU, and nothing is replaced
    const std::filesystem::path folder = std::filesystem::path(out).parent_path();
    const std::string where = folder.empty() ? "." : folder.string();
    if (access(where.c_str(), W_OK | X_OK) != 0)
      throw UsageError("profile: --out " + out + ": cannot write in " + where + ": " +
                       std::strerror(errno));
  }

  const LaunchedTiming t = TimeThroughLaunch(
      entries, device, timing, [&](size_t done, size_t total, const std::string& line) {
        if (done == 0)
          std::fprintf(stderr, "dlh-estimate: profiling %zu models on %s\n", total, line.c_str());
        else
          std::fprintf(stderr, "dlh-estimate: %s\n", line.c_str());
      });
  for (const std::string& f : t.failures)
    std::fprintf(stderr, "dlh-estimate: warning: not profiled: %s\n", f.c_str());
  TimeStepsResult r;
  r.device = t.device;
  r.options = t.options;
  r.samples = t.results;
  r.complete = r.samples.size() == entries.size();
  if (!out.empty()) WriteFileAtomically(out, TimeStepsResultText(r));
  Print(r, json);
  return kExitOk;
}

}  // namespace dlh

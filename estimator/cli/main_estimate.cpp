// DLH — dlh-estimate: the estimator's command line.
//   dlh-estimate features SPEC            what a model costs per sample
//   dlh-estimate calibrate --device cpu   run the benchmark sweep, fit, write a calibration
//                          --device cuda[:N]  the GPU sweep, timed by `dlh-launch time-steps`
//   dlh-estimate fit CALIBRATION          refit a calibration file and report its quality
//   dlh-estimate validate --calibration F predicted vs measured on models outside the sweep
//   dlh-estimate gpu-layers --calibration F --peaks SPEC  the GPU layer model, offline
//   dlh-estimate rates [--threads N]      sgemm FLOP/s and memory-copy bandwidth here
//   dlh-estimate probe [--device D]       the device probe a calibration records, as JSON
//   dlh-estimate check-calibration F      does F describe this machine (probed) and build?
//   dlh-estimate predict SPEC --calibration F [--batch B]
//   dlh-estimate comm BENCH.json          fit the allreduce alpha-beta models to measurements
//   dlh-estimate scaling SPEC             on paper: the GPU allreduce algorithms at 1-64 GPUs
//   dlh-estimate recommend SPEC --samples N --deadline 3h [...]
//   dlh-estimate recommend --profile FILE --deadline 3h [...]
//   dlh-estimate suggest --data FILE --deadline 10m [--objective accuracy|energy]
//   dlh-estimate observations list|summary|check|prune --store DIR
//   dlh-estimate refit CALIBRATION --store DIR --out F
// Each command group has its own file in estimator/cli/ (features_cmd, calibrate_cmd,
// comm_cmd, recommend_cmd, cluster_cmd, calibrate_slurm_cmd, slurm_plan_cmd, observations_cmd,
// refit_cmd; rates and profile
// are in estimator/calibrate/); this file only dispatches.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "estimator/calibrate/calibrate_profile.hpp"
#include "estimator/calibrate/calibrate_rates.hpp"
#include "estimator/cli/calibrate_cmd.hpp"
#include "estimator/cli/cluster_cmd.hpp"
#include "estimator/cli/comm_cmd.hpp"
#include "estimator/cli/features_cmd.hpp"
#include "estimator/cli/gpu_layers_cmd.hpp"
#include "estimator/cli/observations_cmd.hpp"
#include "estimator/cli/profile_gpu_cmd.hpp"
#include "estimator/cli/profile_slurm_cmd.hpp"
#include "estimator/cli/recommend_cmd.hpp"
#include "estimator/cli/replay_cmd.hpp"
#include "estimator/cli/scaling_cmd.hpp"
#include "estimator/cli/slurm_plan_cmd.hpp"
#include "estimator/cli/suggest_cmd.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "launcher/probe/blas_kernels.hpp"
#include "launcher/probe/probe_cli.hpp"

namespace dlh {
namespace {

constexpr const char* kUsage =
    "usage: dlh-estimate COMMAND [options]\n"
    "  features SPEC [--batch B]                   FLOPs, parameters, memory of a model\n"
    "  calibrate --device cpu|cuda[:N] [--out F]   benchmark sweep + fit -> calibration file\n"
    "  calibrate --slurm [--cluster FILE]          calibrate every GPU type in Slurm jobs\n"
    "  fit CALIBRATION [--folds K]                 refit a calibration, report R2 and MAPE\n"
    "  validate --calibration FILE [--device D]    predicted vs measured, models not in the sweep\n"
    "  gpu-layers --calibration F --peaks SPEC     the GPU layer model: fit, validate, transfer\n"
    "  predict SPEC --calibration FILE [--batch B] predicted seconds per step\n"
    "  check-calibration CALIBRATION               does it describe this machine and build?\n"
    "                                              (0 matches, 2 transfers, 1 refused)\n"
    "  probe [--device D] [--threads N]            this machine's device, measured, as JSON\n"
    "  rates [--threads N]                         this machine's sgemm FLOP/s and copy GB/s\n"
    "  profile SPEC [--threads N]                  where a CPU step goes, layer by layer\n"
    "  profile --slurm [--out FILE] -- CMD ARGS    a program profiled on every GPU type, in "
    "Slurm jobs\n"
    "  comm BENCH.json [--json]                    fit the allreduce models to measurements\n"
    "  scaling SPEC --node-type NAME               on paper: flat NCCL and the hybrid allreduce, "
    "1-64 GPUs\n"
    "  recommend SPEC --samples N --deadline T     choose the allocation for a deadline\n"
    "  recommend --profile FILE --deadline T       the same for a program profiled by dlh-launch\n"
    "  suggest --data FILE --deadline T            a spec for a data set, sized to the deadline\n"
    "  replay --trace F.csv | --generate N         a job trace through DLH's planning, per policy\n"
    "  cluster --from-slurm [--out FILE]           draft a cluster description from sinfo\n"
    "  observations list|summary|check|prune --store DIR   what earlier jobs measured\n"
    "  refit CALIBRATION --store DIR --out F       refit a calibration with observed jobs\n"
    "  slurm-plan --dlh-auto VALUE --options JSON  plan an sbatch job "
    "(share/slurm/cli_filter.lua)\n"
    "'dlh-estimate COMMAND --help' documents each command's options.\n";

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitBadInput;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args[0] == "--version") {
    // The engines' fingerprints too: which calibrations this build takes as its own.
    std::printf("dlh-estimate " DLH_VERSION " (engine fingerprints: cpu %s, cuda %s)\n",
                EngineFingerprint("cpu").c_str(), EngineFingerprint("cuda").c_str());
    return kExitOk;
  }
  const std::string command = args[0];
  // The commands that time or probe the CPU: OpenBLAS's kernels for it, where it took generic
  // ones, as dlh-launch's training runs them (a calibration must time the kernels that train).
  if (command == "calibrate" || command == "validate" || command == "check-calibration" ||
      command == "probe" || command == "rates" || command == "profile")
    UseBlasKernelsTheCpuSupports(argv);
  args.erase(args.begin());
  if (command == "features") return FeaturesCommand(args);
  if (command == "calibrate") return CalibrateCommand(args);
  if (command == "fit") return FitCommand(args);
  if (command == "predict") return PredictCommand(args);
  if (command == "check-calibration") return CheckCalibrationCommand(args);
  if (command == "validate") return ValidateCommand(args);
  if (command == "gpu-layers") return GpuLayersCommand(args);
  if (command == "probe") return ProbeCommand(args, "dlh-estimate");
  if (command == "rates") return RatesCommand(args);
  if (command == "profile")
    return IsSlurmProfile(args) ? ProfileSlurmCommand(args)
           : IsGpuProfile(args) ? ProfileGpuCommand(args)
                                : ProfileCommand(args);
  if (command == "comm") return CommCommand(args);
  if (command == "scaling") return ScalingCommand(args);
  if (command == "recommend") return RecommendCommand(args);
  if (command == "suggest") return SuggestCommand(args);
  if (command == "replay") return ReplayCommand(args);
  if (command == "cluster") return ClusterCommand(args);
  if (command == "slurm-plan") return SlurmPlanCommand(args);
  if (command == "observations") return ObservationsCommand(args);
  if (command == "refit") return RefitCommand(args);
  throw UsageError("unknown command '" + command + "' (see dlh-estimate --help)");
}

}  // namespace
}  // namespace dlh

int main(int argc, char** argv) {
  try {
    return dlh::Main(argc, argv);
  } catch (const dlh::UsageError& e) {
    std::fprintf(stderr, "dlh-estimate: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const dlh::SpecError& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const dlh::EstimateError& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlh-estimate: error: %s\n", e.what());
    return dlh::kExitFailure;
  }
}

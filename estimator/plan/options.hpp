// DLH planning core — pure parsing of the plugstack.conf arguments and of the --dlh-auto
// value. No Slurm headers: unit-tested with plain strings (tests/unit/plugin_options_test.cpp).
//
//   plugstack.conf:  required /usr/local/lib/dlh/spank_dlh.so cluster=/etc/dlh/cluster.json
//                    [margin=0.1] [max-gpus=N] [default-deadline=3h] [startup=30]
//   sbatch --dlh-auto[=deadline=3h,spec=train.json,samples=60000,eval-samples=10000,epochs=8,
//                     objective=energy,max-gpus=8,types=a100:h100,mixed,per-gpu-batch=64,
//                     lr=find,dry-run] job.sh
//   sbatch --dlh-auto=deadline=1h,profile=train.profile.json job.sh   (a program's profile,
//                     dlh-launch run --profile, instead of a spec)
//
// Items of --dlh-auto are separated by ','; inside `types` the GPU types are separated by
// ':' or '+' (a ',' would start the next item). `mixed` and `dry-run` are flags (also
// `=yes|no|true|false|1|0`). Empty items are ignored. Unknown keys, missing values and bad
// values are UsageErrors with one line naming the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlh::plan {

// The site's settings, from the plugin's line in plugstack.conf.
struct PluginConfig {
  std::string cluster;            // cluster description (absolute path), required
  double margin = 0.10;           // safety margin on predicted time, in [0, 10)
  int max_gpus = 0;               // at most this many GPUs per job (0: no site limit)
  double default_deadline_s = 0;  // deadline when the job names none, seconds (0: none)
  std::string default_deadline;   // as written in plugstack.conf ("" when none)
  double startup_s = -1;  // job start to first step, seconds; < 0: the cluster description's
                          // runtime.startup_s (startup= overrides it for every job)
  // `register-only`: only register --dlh-auto and leave the request alone;
  // share/slurm/cli_filter.lua plans (`dlh-estimate slurm-plan`, in sbatch as the user) and
  // hands the plan to the plugin.
  bool register_only = false;
};

// Throws UsageError("plugstack.conf: ..."): unknown or repeated keys, a missing or relative
// cluster= (not needed with register-only), bad numbers.
PluginConfig ParsePluginArgs(const std::vector<std::string>& args);

// The keys one or more --dlh-auto values gave; std::nullopt: not given.
struct AutoOptions {
  bool requested = false;                         // --dlh-auto was given (with or without a value)
  std::optional<std::string> deadline;            // as written ("3h"), validated
  double deadline_s = 0;                          // its seconds when `deadline` is set
  std::optional<std::string> spec;                // training spec path as written; "suggest":
                                                  // dlh-estimate suggest's for `data`
  std::optional<std::string> data;                // data set path as written (spec=suggest)
  std::optional<std::string> profile;             // program profile path as written
  std::optional<int64_t> samples;                 // > 0
  std::optional<int64_t> eval_samples;            // >= 0: test samples evaluated per epoch
  std::optional<int> epochs;                      // > 0
  std::optional<std::string> objective;           // energy, time or gpu-hours
  std::optional<int> max_gpus;                    // > 0
  std::optional<std::vector<std::string>> types;  // GPU (GRES) types
  std::optional<bool> mixed;
  std::optional<int64_t> per_gpu_batch;  // > 0
  // "find": the job finds its rate with the range test (the plan says "lr_source": "find");
  // "linear" (the default): the spec's rate scaled linearly with the batch.
  std::optional<std::string> lr;
  std::optional<bool> dry_run;
};

// True for what Slurm passes when the option has no argument: NULL, "" and "(null)" (srun
// inside a job re-applies the inherited option with the string "(null)").
bool IsNoArgument(const char* value);

// Parses one --dlh-auto value (NULL/""/"(null)": just the flag). Throws UsageError
// ("--dlh-auto: samples: must be a positive integer, got 'abc'").
AutoOptions ParseAutoValue(const char* value);

// Merges a later --dlh-auto (command line after #SBATCH lines) into `into`: keys the later
// one gives replace earlier ones, the rest stay. spec and profile are two answers to one
// question (what to plan), so a later one of them replaces an earlier one of either (both
// in one value are refused by BuildJob). Merging the same value twice changes nothing, so
// Slurm calling the callback twice is harmless.
void MergeAutoOptions(AutoOptions& into, const AutoOptions& later);

// Parses and merges in one step (the option callback). On error `into` is unchanged.
void ApplyAutoValue(AutoOptions& into, const char* value);

}  // namespace dlh::plan

// DLH planning core — from --dlh-auto, the spec and the live cluster state to the Slurm job
// options, DLH_PLAN and the one-line summary. No Slurm headers: the front ends (the SPANK
// plugin's facade, `dlh-estimate slurm-plan` for share/slurm/cli_filter.lua) gather the inputs
// (options, environment, what the user set) and apply the settings.
//
// Inputs and precedence:
//   spec      spec= key, else $DLH_SPEC (relative paths against the submit folder); or
//             spec=suggest with data= (else $DLH_DATA): the network dlh-estimate suggest
//             sizes to the deadline for that data set (objective accuracy, epochs= or 10;
//             samples and eval-samples default to the data set's splits); or
//   profile   profile= key instead (a program's profile, estimator/recommend/profile_speeds.hpp;
//             relative like spec=); both keys given is an error
//   samples   samples= key, else $DLH_SAMPLES, else the profile's (required)
//   epochs    epochs= key, else the spec's or the profile's (required)
//   deadline  deadline= key, else the user's explicit --time (the job must fit in it), else
//             plugstack default-deadline=, else none
//   max GPUs  the smaller of max-gpus= and plugstack max-gpus=
//   types     types= key (GPU types and CPU node types; `cpu` and `gpu` stand for each group,
//             estimator/plan/cpu_nodes.hpp); a GPU type named by the user's --gres/--gpus*
//             replaces it, and any GPU option of the user's leaves CPU node types out
// Mixed plans (two GPU types, with `mixed`) are one job: an untyped GPU count per node (the
// smaller of the two types'), all nodes, and --constraint=[F1*N1&F2*N2] with each node
// type's Slurm feature; the plan lists each part's node names so that every rank finds its
// type (launcher/train/batch_split.hpp). Not a heterogeneous job: SPANK and cli_filter can
// only change one job request, and the launcher's single MPI world is one srun step.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/plan/options.hpp"
#include "estimator/recommend/recommender.hpp"
#include "estimator/recommend/suggest.hpp"

namespace dlh::plan {

// What the user fixed on the command line, in #SBATCH lines or SBATCH_* variables.
struct UserRequest {
  bool gpus_set = false;  // any of gres, gpus, gpus-per-node, gpus-per-task, gpus-per-socket
  bool nodes_set = false;
  bool ntasks_set = false;  // --ntasks
  int ntasks = 0;           // its value when a plain number
  bool ntasks_per_node_set = false;
  int ntasks_per_node = 0;  // its value when a plain number (0: not given or unreadable)
  bool time_set = false;
  bool constraint_set = false;     // --constraint (a mix needs its own)
  bool cpus_per_task_set = false;  // --cpus-per-task (a CPU plan's threads per rank)
  bool signal_set = false;         // --signal: the job script wants a signal before the limit
  std::string signal;              // its value as Slurm gives it, "B:USR1@120"
  std::string gpu_type;            // the GPU type the user's GPU options name ("": none)
  int gpus_per_node = 0;           // from --gres / --gpus-per-node (0: not given)
  int gpus_total = 0;              // from --gpus
  int nodes = 0;                   // --nodes when a single number (0: not given or a range)
  double time_s = 0;               // --time in seconds (0: not given or UNLIMITED)
  std::string time_text;           // --time as Slurm prints it
  bool export_set = false;         // --export: which of the submitting environment the job gets
  std::string export_value;        // its value: "NONE", "ALL,VAR=1", "VAR1,VAR2"
  std::string nodelist;            // --nodelist (-w) as given: "node-[1-2]", or a file's path
  std::string exclude;             // --exclude (-x) as given
  // Set by MakePlan (estimator/plan/requested_nodes.hpp): the types of --nodelist's nodes,
  // and whether `nodes` is their count (no --nodes given).
  std::vector<std::string> nodelist_types;
  bool nodes_from_nodelist = false;
  std::vector<std::pair<std::string, std::string>> given;  // every option noted: name, value
};

// Records one option the user set, with its value as slurm_option_get returns it: gres
// "gres:gpu:a100:2" (22.05 prefixes "gres:"), gpus/gpus-per-node/gpus-per-task/
// gpus-per-socket "a100:2" or "2", nodes "2" or "2-4", time "00:10:00", "1-00:00:00" or
// "UNLIMITED", ntasks, ntasks-per-node, signal ("B:USR1@120"), nodelist and exclude
// (hostlists, "node-[1-2]"). Values it cannot read only
// mark the option as set.
void NoteUserOption(UserRequest& r, const std::string& name, const std::string& value);

// The options the user set, from Slurm's json_cli_options ({"gres":"gres:gpu:a100:2",...}),
// as cli_filter.lua hands them to `dlh-estimate slurm-plan --options`: each of
// kUserOptionNames that is a string goes through NoteUserOption, anything else is ignored.
// Throws UsageError for text that is not a JSON object.
UserRequest UserRequestFromJson(const std::string& json_text);

// The Slurm options NoteUserOption understands: the facade and `dlh-estimate slurm-plan`
// note each one the user set.
extern const char* const kUserOptionNames[15];

// spec=suggest: the spec dlh-estimate suggest writes for the data set (estimator/recommend/
// suggest.hpp), planned like any other; the front end writes it to `path` (the submit
// folder) and hands the job DLH_SPEC, so the job trains what was planned.
struct SuggestedSpec {
  std::string path;  // absolute: SUBMIT_FOLDER/dlh-suggested-<data set's name>-<8 hex of text>.json
  std::string text;  // the spec (JSON, indented)
  std::string data;  // the data set, absolute
  std::string label;             // "CNN 32 filters, 1 conv a stage"
  std::vector<std::string> why;  // suggest's reasons, one line each
};

struct PlanInputs {
  AutoOptions options;
  PluginConfig config;
  std::string env_spec;  // $DLH_SPEC ("": unset)
  std::string env_data;  // $DLH_DATA ("": unset): the data set of spec=suggest
  // How the front end reads a data set's facts for spec=suggest (dlh-data inspect --json,
  // estimator/recommend/suggest.hpp InspectDataSet); unset: spec=suggest is refused.
  std::function<DataFacts(const std::string& path)> inspect_data;
  // Set by MakePlan for spec=suggest; BuildJob then plans this spec.
  std::optional<SuggestedSpec> suggested;
  std::string env_samples;    // $DLH_SAMPLES ("": unset)
  std::string env_stage_dir;  // $DLH_STAGE_DIR ("": unset): the job script stages its data
  // $OPENBLAS_NUM_THREADS ("": unset): with sbatch's default --export=ALL the job inherits
  // it, and dlh-launch train gives each rank that many threads (EnvironmentThreads).
  std::string env_openblas_threads;
  std::string cwd;  // the submit folder, for a relative spec path
  UserRequest user;
};

// One Slurm option of the plan.
struct SlurmSetting {
  std::string name;   // gres, nodes, ntasks-per-node, time
  std::string value;  // what the plan asks for: "gpu:a100:2", "1", "2", "00:04:00"
  bool apply = true;  // false: the user fixed it and keeps their value
};

struct PlanOutcome {
  Job job;
  Recommendation rec;
  Allocation chosen;
  bool feasible = false;  // chosen fits and meets the deadline
  nlohmann::json plan;    // DLH_PLAN (docs/reference/plan.md)
  std::string time_limit;
  int signal_lead_s = 0;  // > 0: the lead of the user's --signal that fits the limit
  std::vector<SlurmSetting> settings;
  std::string deadline_text;  // "30m", "none"
  std::string live_note;      // "free now: node-a100 3/16, ..." or "live node state unknown (...)"
  std::string fallback_note;  // "" or why the plan ignores the live state
  std::string choice_note;    // "" or why the choice is not the estimator's first
  std::string cpu_note;       // "" or why the job goes to CPU nodes (cpu_nodes.hpp)
  std::string time_note;      // "" or a warning: the user's --time is shorter than predicted
  std::string threads_note;   // "" or the threads a rank computes with, from the environment
  std::string type_note;      // "" or how an untyped GPU request was kept to the planned type
  std::string nodes_note;     // "" or what the user's --exclude/--nodelist did to the plan
  int tasks = 0;              // tasks the job will run (the user's --ntasks* when given)
  std::optional<SuggestedSpec> suggested;  // spec=suggest: the spec to write and hand over
  UserRequest user;                        // what the user fixed (kept as they gave it)
};

// The estimator job (see the precedence above). The spec or profile path in it is
// absolute. Throws UsageError naming the key (or the profile file and its field),
// SpecError naming the spec file.
Job BuildJob(const PlanInputs& in, const Cluster& cluster);

// Plans: overlays `live` onto the cluster (when `live_error` is empty) and recommends; when
// nothing that meets the deadline is free now, plans on all nodes (the job will wait).
// Picks the best allocation matching the user's fixed GPU type/count and node count.
PlanOutcome MakePlan(const PlanInputs& in, const Cluster& cluster,
                     const std::vector<LiveNode>& live, const std::string& live_error);

// Slurm options of an allocation: gres, nodes, ntasks-per-node, time, and for a mix
// constraint (docs/researcher-guide.md, "Mixed GPU types in one job"; throws UsageError when
// the two node types share a feature). GPUs are left to the user when any GPU option is set,
// ntasks-per-node when --ntasks or --ntasks-per-node is.
// When the plan sets the nodes and the user gave only --ntasks-per-node, it also sets
// ntasks (nodes x theirs): sbatch derived ntasks from one node before the plugin ran.
// When the plan sets the time limit and the user asked for a signal before it (--signal),
// the signal's lead becomes `signal_lead_s` (their signal kept, "B:USR1@120" ->
// "B:USR1@75"): a lead fixed in the job script cannot know a limit made for the job
// (estimator/model/prediction_band.hpp); with their own --time they keep their lead.
std::vector<SlurmSetting> SlurmSettings(const Allocation& a, const std::string& time_limit,
                                        const UserRequest& user, const Cluster& cluster,
                                        int signal_lead_s = 0);

// "B:USR1@120" with its lead replaced: "B:USR1@75"; "USR1" (Slurm's default lead) likewise.
std::string SignalWithLead(const std::string& signal, int lead_s);

// "1 x 2 alpha", "1 x 2 alpha + 1 x 2 beta".
std::string AllocationText(const Allocation& a);

// "dlh: 1 node x 2 alpha GPUs, 2 tasks, time 00:04:00: predicted 3m23s (90% <= 3m51s),
// 14.7 kJ, deadline 30m (least energy of 4 allocations meeting the 30m deadline)" (+ notes).
// One line.
std::string SummaryLine(const PlanOutcome& p);
// "dlh: no allocation meets the 2m deadline; the fastest, 1 x 2 alpha, needs 3m43s with the
// 10% margin (3m23s predicted)".
std::string InfeasibleMessage(const PlanOutcome& p);
// The dry-run report: job, speeds, availability, the `top` best allocations, the choice and
// the options it would set, for `command` (sbatch or salloc: "salloc would get: ...").
std::string DryRunReport(const PlanOutcome& p, int top, const std::string& command = "sbatch");

}  // namespace dlh::plan

// DLH planning core — planning and the mapping to Slurm options (see plan.hpp).
#include "estimator/plan/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/count_limits.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/hostlist.hpp"
#include "common/program_profile.hpp"
#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "estimator/observe/plan_block.hpp"
#include "estimator/plan/cpu_nodes.hpp"
#include "estimator/plan/environment_threads.hpp"
#include "estimator/plan/requested_nodes.hpp"
#include "estimator/plan/requested_types.hpp"
#include "estimator/recommend/profile_speeds.hpp"
#include "launcher/observe/record.hpp"

namespace dlh::plan {

namespace {

// Any length: the dry-run header holds the spec's path, which may be long.
std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(size_t(n > 0 ? n : 0) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, again);
  va_end(again);
  out.pop_back();
  return out;
}

bool Digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

int SmallInt(const std::string& s) {  // 0 when not a plain number that fits
  if (!Digits(s) || s.size() > 9) return 0;
  return std::atoi(s.c_str());
}

std::string Plural(long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "gpu:a100:2" / "gpu:2" / "gpu:a100" / "gpu" in a GRES list; 22.05 prefixes every item
// with "gres:" ("gres:mps:100,gres:gpu:a100:2").
// "gres:gpu:beta:1" as the user wrote it ("gpu:beta:1"): 22.05 adds "gres:" to each item.
std::string WithoutGresPrefix(const std::string& value) {
  std::string v = value;
  for (size_t at = 0; (at = v.find("gres:", at)) != std::string::npos;) {
    if (at == 0 || v[at - 1] == ',')
      v.erase(at, 5);
    else
      at += 5;
  }
  return v;
}

void NoteGres(UserRequest& r, const std::string& value) {
  for (const GresItem& g : ParseGres(WithoutGresPrefix(value))) {
    if (g.name != "gpu") continue;
    if (!g.type.empty()) r.gpu_type = g.type;
    if (g.count_given) r.gpus_per_node = int(g.count);
  }
}

// "a100:2" / "2" / "a100" (--gpus, --gpus-per-node, --gpus-per-task): type and count.
void TypeAndCount(const std::string& value, std::string* type, int* count) {
  const std::string first = value.substr(0, value.find(','));
  const size_t colon = first.rfind(':');
  const std::string last = colon == std::string::npos ? first : first.substr(colon + 1);
  if (Digits(last)) {
    *count = SmallInt(last);
    if (colon != std::string::npos) {
      std::string t = first.substr(0, colon);
      if (t.rfind("gpu:", 0) == 0) t = t.substr(4);
      *type = t;
    }
  } else {
    *type = first.rfind("gpu:", 0) == 0 ? first.substr(4) : first;
  }
}

// A mix matches an untyped GPU count per node (every part has it), a GPU total and a node
// count (all parts together); a GPU type is one type, never a mix.
bool Matches(const Allocation& a, const UserRequest& u) {
  for (const Part& p : a.parts) {
    if (!u.gpu_type.empty() && (a.parts.size() != 1 || p.gpu != u.gpu_type)) return false;
    if (u.gpus_per_node && p.gpus_per_node != u.gpus_per_node) return false;
  }
  if (u.gpus_total && a.gpus != u.gpus_total) return false;
  if (u.nodes && a.nodes != u.nodes) return false;
  return true;
}

// The tasks the job will run: the user's --ntasks, else nodes x their --ntasks-per-node,
// else one task per GPU. Counted in checked 64 bits: --nodes and --ntasks-per-node may each be
// up to 999999999, and their product is refused above kMaxTasks rather than wrapped.
int TasksOf(const Allocation& a, const UserRequest& u) {
  if (u.ntasks_set && u.ntasks > 0) return u.ntasks;
  int64_t tasks = 0;
  for (const Part& part : a.parts) {
    const int nodes = u.nodes_set && u.nodes > 0 && a.parts.size() == 1 ? u.nodes : part.nodes;
    const int per_node = u.ntasks_per_node > 0 ? u.ntasks_per_node : part.gpus_per_node;
    tasks = CheckedAdd(tasks, CheckedMul(nodes, per_node, "tasks"), "tasks");
  }
  if (tasks > kMaxTasks)
    throw UsageError("--ntasks-per-node: " + std::to_string(tasks) +
                     " tasks in all is more than DLH plans for (at most " +
                     std::to_string(kMaxTasks) + ")");
  return int(tasks);
}

std::string UserConstraintText(const UserRequest& u) {
  std::string s;
  auto add = [&](const std::string& t) { s += (s.empty() ? "" : " ") + t; };
  if (!u.gpu_type.empty() || u.gpus_per_node)
    add("--gres=gpu:" + (u.gpu_type.empty() ? std::string() : u.gpu_type + ":") +
        (u.gpus_per_node ? std::to_string(u.gpus_per_node) : std::string("*")));
  if (u.gpus_total) add("--gpus=" + std::to_string(u.gpus_total));
  if (u.nodes && u.nodes_from_nodelist)
    add("--nodelist=" + u.nodelist + " (" + Plural(u.nodes, "node", "nodes") + ")");
  else if (u.nodes)
    add("--nodes=" + std::to_string(u.nodes));
  return s;
}

// The estimator's `why` without its trailing "(14.7 kJ, 3m23s)": the numbers are in the
// summary already.
std::string ShortWhy(const std::string& why) {
  const size_t open = why.rfind(" (");
  return open != std::string::npos && !why.empty() && why.back() == ')' ? why.substr(0, open) : why;
}

std::string KeptText(const UserRequest& u) {
  std::string kept;
  for (const auto& [name, value] : u.given)
    kept += (kept.empty() ? "" : " ") + std::string("--") + name + "=" +
            (name == "gres" ? WithoutGresPrefix(value) : value);
  return kept;
}

// A mix runs as one job whose nodes Slurm picks by feature, in node name order, so no rank
// can tell its GPU type from its position: the plan lists each part's nodes and every rank
// looks up its SLURMD_NODENAME (launcher/train/batch_split.hpp). They come from the live
// node list; without one the job could not be told apart, so it is not submitted.
void AddNodeNames(PlanOutcome& out, const Cluster& cluster, const std::vector<LiveNode>& live,
                  const std::string& live_error) {
  if (!live_error.empty())
    throw UsageError("--dlh-auto: mixed: the plan on " + AllocationText(out.chosen) +
                     " needs the names of each type's nodes, and the live node state is unknown (" +
                     live_error + ")");
  nlohmann::json& parts = out.plan["allocation"]["parts"];
  for (size_t i = 0; i < out.chosen.parts.size() && i < parts.size(); ++i) {
    const NodeType* nt = cluster.node_type(out.chosen.parts[i].node_type);
    if (!nt) continue;
    // As Slurm hostlists ("alpha[0001-2500]"): 10,000 names one by one would be more than a
    // job's environment variable carries (issue 41).
    parts[i]["node_names"] = CompressHostlist(NodeNamesOfType(cluster, *nt, live));
  }
  // The two types' speeds come from the estimator (one may be a roofline or another type's
  // calibration scaled): the job starts with the planned split and corrects it from what it
  // measures (docs/reference/dlh-launch.md, "Adaptive balancing").
  out.plan["balance"] = "adaptive";
}

}  // namespace

const char* const kUserOptionNames[15] = {
    "gres",   "gpus",          "gpus-per-node",   "gpus-per-task", "gpus-per-socket",
    "nodes",  "ntasks",        "ntasks-per-node", "time",          "constraint",
    "signal", "cpus-per-task", "export",          "nodelist",      "exclude"};

void NoteUserOption(UserRequest& r, const std::string& name, const std::string& value) {
  auto same = [&](const std::pair<std::string, std::string>& g) { return g.first == name; };
  r.given.erase(std::remove_if(r.given.begin(), r.given.end(), same), r.given.end());
  // A signal and the environment are no part of the allocation: the summary says what
  // became of the signal's lead, and of OPENBLAS_NUM_THREADS (EnvironmentThreads).
  if (name != "signal" && name != "export") r.given.emplace_back(name, value);
  if (name == "gres") {
    r.gpus_set = true;
    NoteGres(r, value);
  } else if (name == "gpus" || name == "gpus-per-node" || name == "gpus-per-task" ||
             name == "gpus-per-socket") {
    r.gpus_set = true;
    std::string type;
    int count = 0;
    TypeAndCount(value, &type, &count);
    if (!type.empty()) r.gpu_type = type;
    if (name == "gpus-per-node" && count) r.gpus_per_node = count;
    if (name == "gpus" && count) r.gpus_total = count;
  } else if (name == "nodes") {
    r.nodes_set = true;
    r.nodes = 0;
    const size_t dash = value.find('-');
    if (dash == std::string::npos) {
      r.nodes = SmallInt(value);
    } else if (value.substr(0, dash) == value.substr(dash + 1)) {
      r.nodes = SmallInt(value.substr(0, dash));
    }
  } else if (name == "ntasks") {
    r.ntasks_set = true;
    r.ntasks = SmallInt(value);
  } else if (name == "ntasks-per-node") {
    r.ntasks_per_node_set = true;
    r.ntasks_per_node = SmallInt(value);
  } else if (name == "constraint") {
    r.constraint_set = true;
  } else if (name == "cpus-per-task") {
    r.cpus_per_task_set = true;
  } else if (name == "nodelist") {
    r.nodelist = value;
  } else if (name == "exclude") {
    r.exclude = value;
  } else if (name == "signal") {
    r.signal_set = true;
    r.signal = value;
  } else if (name == "export") {
    r.export_set = true;
    r.export_value = value;
  } else if (name == "time") {
    r.time_set = true;
    r.time_text = value;
    r.time_s = 0;
    if (value != "UNLIMITED" && value != "INFINITE" && value != "infinite" && !value.empty()) {
      try {
        // Slurm's bare number means minutes.
        r.time_s = Digits(value) ? 60.0 * std::atof(value.c_str()) : ParseDuration(value, "--time");
      } catch (const Error&) {
        r.time_s = 0;
      }
    }
  }
}

namespace {

// deadline= key, else the user's explicit --time, else the site's default (0: none).
double DeadlineOf(const PlanInputs& in) {
  if (in.options.deadline) return in.options.deadline_s;
  if (in.user.time_set && in.user.time_s > 0) return in.user.time_s;
  return in.config.default_deadline_s;
}

// spec=suggest: dlh-estimate suggest's spec for the data set and the deadline, on the
// cluster's nodes free now (`free_now`, when the live state is known) or else all of them;
// the data set's splits give samples and eval-samples unless set.
SuggestedSpec SuggestForPlan(PlanInputs& in, const Cluster& cluster, const Cluster* free_now) {
  AutoOptions& o = in.options;
  const std::string data = o.data ? *o.data : in.env_data;
  if (data.empty())
    throw UsageError(
        "--dlh-auto: spec=suggest: needs the data set (data=FILE, or DLH_DATA in "
        "the environment)");
  if (!in.inspect_data)
    throw UsageError("--dlh-auto: spec=suggest: this front end cannot read data sets");
  std::filesystem::path path(data);
  if (path.is_relative() && !in.cwd.empty()) path = std::filesystem::path(in.cwd) / path;
  path = path.lexically_normal();
  DataFacts facts = in.inspect_data(path.string());
  facts.path = path.string();
  SuggestOptions so;
  so.deadline_s = DeadlineOf(in);
  if (!(so.deadline_s > 0))
    throw UsageError(
        "--dlh-auto: spec=suggest: needs a deadline (deadline=, or your --time) to "
        "size the network to");
  so.epochs = o.epochs ? *o.epochs : 10;
  so.name = path.stem().string();
  so.threads_per_rank = EnvironmentThreads(in).threads;  // as the job will plan
  // Sized to what is free now, as the plan itself is; when nothing free meets the deadline,
  // to all nodes (the job then waits for them, as MakePlan's plan does).
  Suggestion s = Suggest(facts, so, free_now ? *free_now : cluster);
  if (s.chosen < 0 && free_now) s = Suggest(facts, so, cluster);
  if (s.chosen < 0) throw UsageError("--dlh-auto: spec=suggest: " + s.why.back());
  SuggestedSpec out;
  out.data = path.string();
  out.text = s.members[size_t(s.chosen)].spec.dump(2) + "\n";
  // Named by its content too: a pending job trains the file when it starts, so a later
  // submission from the same folder (another deadline or epochs) must not rewrite it
  // (2026-12-07: job 1's spec said 2 epochs, its plan 10). The same spec, the same file.
  out.path = (std::filesystem::path(in.cwd.empty() ? "." : in.cwd) /
              ("dlh-suggested-" + so.name + "-" + ModelKey(out.text).substr(0, 8) + ".json"))
                 .lexically_normal()
                 .string();
  out.label = s.members[size_t(s.chosen)].label;
  out.why = s.why;
  if (!o.samples) o.samples = facts.train;
  if (!o.eval_samples) o.eval_samples = facts.test;
  return out;
}

}  // namespace

Job BuildJob(const PlanInputs& in, const Cluster& cluster) {
  const AutoOptions& o = in.options;
  if (o.spec && o.profile)
    throw UsageError(
        "--dlh-auto: profile: plans a program from its profile instead of a spec: give spec=FILE "
        "or profile=FILE, not both");
  // The plugin runs in sbatch as the submitting user: their files, their submit folder.
  auto resolve = [&](const std::string& file) {
    std::filesystem::path path(file);
    if (path.is_relative() && !in.cwd.empty()) path = std::filesystem::path(in.cwd) / path;
    return path.lexically_normal().string();
  };
  Job job;
  std::string unknown;  // what the profile does not say, for the messages below
  if (in.suggested) {
    job.spec = ParseSpec(in.suggested->text, in.suggested->path, "");
    job.features = ComputeFeatures(job.spec);
    job.epochs = job.spec.epochs;
  } else if (o.profile) {
    job = JobFromProfiles(LoadProfiles(resolve(*o.profile)));
    unknown = "; the profile " + job.spec.origin + " does not say";
  } else {
    const std::string spec = o.spec ? *o.spec : in.env_spec;
    if (spec.empty())
      throw UsageError(
          "--dlh-auto: spec: required (spec=FILE, profile=FILE, or DLH_SPEC in the environment)");
    job.spec = LoadSpec(resolve(spec));
    job.features = ComputeFeatures(job.spec);
    job.epochs = job.spec.epochs;
  }

  // A profile's samples (JobFromProfile) are the last resort: what the user says now wins.
  if (o.samples) {
    job.samples = *o.samples;
  } else if (!in.env_samples.empty()) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(in.env_samples.c_str(), &end, 10);
    if (!Digits(in.env_samples) || errno == ERANGE || v <= 0 || v > kMaxSamplesPerEpoch)
      throw UsageError("DLH_SAMPLES: must be a positive integer up to " +
                       std::to_string(kMaxSamplesPerEpoch) + ", got '" + in.env_samples + "'");
    job.samples = v;
  } else if (job.samples <= 0) {
    throw UsageError("--dlh-auto: samples: required (samples=N, or DLH_SAMPLES in the environment" +
                     unknown + ")");
  }
  if (o.epochs) job.epochs = *o.epochs;
  if (job.epochs <= 0) throw UsageError("--dlh-auto: epochs: required (epochs=N" + unknown + ")");
  job.eval_samples = o.eval_samples ? *o.eval_samples : -1;
  job.deadline_s = DeadlineOf(in);
  job.objective = ParseObjective(o.objective ? *o.objective : "energy");
  job.max_gpus = o.max_gpus ? *o.max_gpus : 0;
  if (in.config.max_gpus > 0 && (job.max_gpus == 0 || in.config.max_gpus < job.max_gpus))
    job.max_gpus = in.config.max_gpus;
  if (o.mixed && *o.mixed && in.user.constraint_set)
    throw UsageError(
        "--dlh-auto: mixed: a mix asks Slurm for its nodes with --constraint=[TYPE1*N1&TYPE2*N2], "
        "and your --constraint is set; drop one of the two");
  // A GPU type of the user's is one type: the mix is off, as if `mixed` were not given.
  job.allow_mixed = o.mixed && *o.mixed && in.user.gpu_type.empty();
  job.mixed_same_gpus_per_node = true;  // one --gres=gpu:N for every node of the job
  job.per_gpu_batch = o.per_gpu_batch ? *o.per_gpu_batch : 0;
  job.margin = in.config.margin;
  job.startup_s = in.config.startup_s;
  job.stage = !in.env_stage_dir.empty();
  // OPENBLAS_NUM_THREADS is dlh-launch train's; a program that sets its own count keeps it
  // (JobFromProfile, the profile's warning says so).
  if (!job.profile || !ProgramSetsItsThreads(*job.profile))
    job.threads_per_rank = EnvironmentThreads(in).threads;
  // The plan's limit and the signal's lead go together; with their own --time the user's
  // signal is theirs too.
  job.signal = in.user.signal_set && !in.user.time_set;
  job.top = 5;

  if (o.types) job.allowed_types = ResolveTypeNames(*o.types, cluster, "--dlh-auto: types");
  // GPUs asked for are GPUs: CPU node types are left out.
  if (in.user.gpus_set) {
    job.allowed_types = GpuTypesOnly(job.allowed_types, cluster);
    if (job.allowed_types.empty())
      throw UsageError(
          "--dlh-auto: types: allows no GPU type, and your --gres/--gpus asks for GPUs");
  }
  if (!in.user.gpu_type.empty()) {
    const std::string& t = in.user.gpu_type;
    if (!cluster.gpu(t) || cluster.gpu(t)->cpu)
      throw UsageError("--gres: GPU type '" + t + "' is not in the cluster description " +
                       in.config.cluster);
    if (o.types &&
        std::find(job.allowed_types.begin(), job.allowed_types.end(), t) == job.allowed_types.end())
      throw UsageError("--dlh-auto: types: does not include " + t +
                       ", the GPU type your --gres/--gpus asks for");
    job.allowed_types = {t};
  }
  if (in.user.constraint_set)
    job.allowed_types = TypesOfConstraint(in.user, cluster, job.allowed_types);
  job.allowed_types = TypesOfNodelist(in.user, job.allowed_types);
  if (!job.allow_mixed) CheckUserShapeFits(in.user, cluster, job.allowed_types);
  // Choosing among allocations that match the user's node or GPU count needs all of them.
  if (in.user.gpus_per_node || in.user.gpus_total || in.user.nodes) job.top = 0;
  return job;
}

PlanOutcome MakePlan(const PlanInputs& given_in, const Cluster& described_cluster,
                     const std::vector<LiveNode>& all_live, const std::string& live_error) {
  PlanOutcome out;
  // The nodes as they are: a type's GPUs a node are what its nodes have, when fewer than the
  // description says (Slurm refuses a request for more), busy or free; the user's excluded
  // nodes are none of them, and their listed nodes fix the type and the node count.
  Cluster cluster = described_cluster;
  PlanInputs in = given_in;
  std::vector<LiveNode> live = all_live;
  out.nodes_note = ApplyRequestedNodes(&in.user, &cluster, &live, live_error,
                                       in.options.mixed && *in.options.mixed);
  out.user = in.user;
  const std::string hardware_note = live_error.empty() ? BoundGpusPerNode(cluster, live) : "";
  if (in.options.spec && *in.options.spec == "suggest" && !in.options.profile) {
    PlanInputs suggested = in;
    Cluster free_now = cluster;
    if (live_error.empty()) OverlayAvailability(free_now, live);
    suggested.suggested =
        SuggestForPlan(suggested, cluster, live_error.empty() ? &free_now : nullptr);
    out.suggested = suggested.suggested;
    out.job = BuildJob(suggested, cluster);
  } else {
    out.job = BuildJob(in, cluster);
  }
  const Job& job = out.job;
  if (const EnvironmentThreadCount env = EnvironmentThreads(in);
      job.threads_per_rank > 0 && env.threads == job.threads_per_rank)
    out.threads_note = "planned with " + Plural(job.threads_per_rank, "thread", "threads") +
                       " a CPU rank (" + env.source + ")";
  if (in.options.deadline)
    out.deadline_text = *in.options.deadline;
  else if (job.deadline_s > 0 && in.user.time_set && in.user.time_s > 0)
    out.deadline_text = in.user.time_text + " (your --time)";
  else if (job.deadline_s > 0)
    out.deadline_text = in.config.default_deadline;
  else
    out.deadline_text = "none";

  // Live availability first; when nothing free now meets the deadline, plan on all nodes.
  bool have_rec = false;
  if (live_error.empty()) {
    Cluster now = cluster;
    out.live_note = OverlayAvailability(now, live) + hardware_note;
    try {
      out.rec = Recommend(job, now);
      have_rec = out.rec.feasible;
    } catch (const EstimateError&) {  // no free node at all: plan on all nodes below
    }
    if (!have_rec)
      out.fallback_note = "nothing free now meets the deadline: planned on all nodes (may wait)";
  } else {
    out.live_note = "live node state unknown (" + live_error + ")";
    out.fallback_note = out.live_note + ": planned on all nodes";
  }
  if (!have_rec) out.rec = Recommend(job, cluster);
  Cluster planned_on = cluster;  // what the plan saw: live availability when it used it
  if (have_rec) OverlayAvailability(planned_on, live);

  const Recommendation& rec = out.rec;
  if (!rec.feasible) {
    out.chosen = rec.fastest;
    out.feasible = false;
  } else {
    out.feasible = true;
    out.chosen = rec.ranked.front();
    auto it = std::find_if(rec.ranked.begin(), rec.ranked.end(),
                           [&](const Allocation& a) { return Matches(a, in.user); });
    if (it == rec.ranked.end()) {
      out.choice_note = "no allocation meeting the deadline matches your " +
                        UserConstraintText(in.user) + "; DLH_PLAN describes the best one";
    } else if (it != rec.ranked.begin()) {
      out.chosen = *it;
      out.choice_note = "the best matching your " + UserConstraintText(in.user) +
                        " (against the overall best: " + it->why + ")";
    }
  }
  if (out.feasible && IsCpuPlan(out.chosen))
    out.cpu_note = CpuChoiceNote(job, planned_on, out.chosen);
  out.plan = PlanJson(job, rec, out.chosen);
  AddSharedHostToPlan(planned_on, &out.plan);
  if (out.suggested)  // the front end writes it there and hands the job DLH_SPEC
    out.plan["suggested"] = {{"spec", out.suggested->path},
                             {"data", out.suggested->data},
                             {"network", out.suggested->label}};
  AddObservationsToPlan(job, cluster, rec, out.chosen, &out.plan);
  // lr=find: the plugin cannot train, so the plan only says where the rate is to come from;
  // dlh-launch train finds it (or reuses a stored range test) at the planned batch. `lr`
  // keeps linear scaling's rate, which the job falls back to when the test finds no minimum.
  if (in.options.lr && *in.options.lr == "find") out.plan["lr_source"] = "find";
  out.time_limit = out.plan["time_limit"].get<std::string>();
  out.signal_lead_s = out.plan.value("signal_lead_s", 0);
  out.settings = SlurmSettings(out.chosen, out.time_limit, in.user, cluster, out.signal_lead_s);
  PinUntypedGpus(in.user, cluster, live, live_error, &out);
  if (out.chosen.parts.size() > 1) AddNodeNames(out, cluster, live, live_error);
  out.tasks = TasksOf(out.chosen, in.user);
  const double needed_s = out.chosen.total_s * (1 + job.margin);
  if (out.feasible && in.user.time_set && in.user.time_s > 0 && needed_s > in.user.time_s)
    out.time_note = "warning: your --time=" + in.user.time_text + " is shorter than the " +
                    HumanDuration(out.chosen.total_s) + " predicted (" + HumanDuration(needed_s) +
                    " with the " + Printf("%.0f", job.margin * 100) +
                    "% margin): the job may be cut off";
  return out;
}

std::string SignalWithLead(const std::string& signal, int lead_s) {
  const size_t at = signal.rfind('@');
  return (at == std::string::npos ? signal : signal.substr(0, at)) + "@" + std::to_string(lead_s);
}

std::vector<SlurmSetting> SlurmSettings(const Allocation& a, const std::string& time_limit,
                                        const UserRequest& user, const Cluster& cluster,
                                        int signal_lead_s) {
  if (a.parts.empty()) throw Error("SlurmSettings: an allocation without parts (internal error)");
  if (IsCpuPlan(a)) return CpuSlurmSettings(a, time_limit, user, cluster);
  const Part& p = a.parts[0];
  std::string gres = "gpu:" + p.gpu + ":" + std::to_string(p.gpus_per_node);
  std::string constraint;
  if (a.parts.size() > 1) {
    // One job on several GPU types: an untyped GPU count per node, and the nodes of each
    // type by their feature with Slurm's count syntax, e.g. [alpha*1&beta*1].
    gres = "gpu:" + std::to_string(p.gpus_per_node);
    std::vector<std::string> seen;
    for (const Part& part : a.parts) {
      if (part.gpus_per_node != p.gpus_per_node)
        throw Error("SlurmSettings: a mix with " + std::to_string(p.gpus_per_node) + " and " +
                    std::to_string(part.gpus_per_node) +
                    " GPUs per node is not one Slurm job (internal error)");
      const NodeType* nt = cluster.node_type(part.node_type);
      if (!nt) throw Error("SlurmSettings: unknown node type " + part.node_type);
      const std::string& feature = nt->slurm_feature();
      if (std::find(seen.begin(), seen.end(), feature) != seen.end())
        throw UsageError("--dlh-auto: mixed: node types of the plan share the Slurm feature '" +
                         feature +
                         "'; give each its own node_types[].feature in the cluster "
                         "description " +
                         (cluster.origin.empty() ? cluster.name : cluster.origin));
      seen.push_back(feature);
      constraint += (constraint.empty() ? "[" : "&") + feature + "*" + std::to_string(part.nodes);
    }
    constraint += "]";
  }
  std::vector<SlurmSetting> s = {
      {"gres", gres, !user.gpus_set},
      {"nodes", std::to_string(a.nodes), !user.nodes_set},
      {"ntasks-per-node", std::to_string(p.gpus_per_node),
       !user.ntasks_set && !user.ntasks_per_node_set},
      {"time", time_limit, !user.time_set},
  };
  if (!constraint.empty()) s.push_back({"constraint", constraint, !user.constraint_set});
  if (!user.nodes_set && !user.ntasks_set && user.ntasks_per_node > 0)
    s.push_back(
        {"ntasks", std::to_string(CheckedMul(a.nodes, user.ntasks_per_node, "ntasks")), true});
  if (user.signal_set && !user.time_set && signal_lead_s > 0 && !user.signal.empty())
    s.push_back({"signal", SignalWithLead(user.signal, signal_lead_s), true});
  return s;
}

std::string AllocationText(const Allocation& a) {
  std::string s;
  for (const Part& p : a.parts) s += (s.empty() ? "" : " + ") + PartShortText(p);
  return s;
}

std::string SummaryLine(const PlanOutcome& p) {
  const Allocation& a = p.chosen;
  std::string s = "dlh: ";
  for (size_t i = 0; i < a.parts.size(); ++i) s += (i ? " + " : "") + PartText(a.parts[i]);
  s += ", " + Plural(p.tasks, "task", "tasks") + ", time " + p.time_limit + ": predicted " +
       BandText(a.total_s, a.total_upper_s) + ", " + FormatEnergy(a.energy_j) + ", deadline " +
       p.deadline_text + " (" + ShortWhy(p.rec.ranked.empty() ? a.why : p.rec.ranked[0].why) + ")";
  if (p.suggested)
    s += "; spec: suggested " + p.suggested->label + " for " + p.suggested->data + ", written to " +
         p.suggested->path + " (DLH_SPEC)";
  if (const std::string from = ChosenProvenance(p.rec, a); !from.empty())
    s += "; step time " + from;
  const std::string kept = KeptText(p.user);
  if (!kept.empty()) s += "; yours kept: " + kept;
  for (const SlurmSetting& st : p.settings)
    if (st.name == "signal" && st.apply)
      s += "; --signal=" + st.value +
           " (your lead fitted to the limit: the signal comes after "
           "the 90% end)";
  if (!p.time_note.empty()) s += "; " + p.time_note;
  for (const std::string& w : StaleCalibrationWarnings(p.rec.speeds)) s += "; warning: " + w;
  if (p.job.profile)
    for (const std::string& w : ProfileWarnings(*p.job.profile)) s += "; warning: " + w;
  if (!p.choice_note.empty()) s += "; " + p.choice_note;
  if (!p.type_note.empty()) s += "; " + p.type_note;
  if (!p.nodes_note.empty()) s += "; " + p.nodes_note;
  if (!p.cpu_note.empty()) s += "; " + p.cpu_note;
  if (!p.threads_note.empty()) s += "; " + p.threads_note;
  if (const std::string note = SyncNote(p.job, a); !note.empty()) s += "; " + note;
  if (const std::string note = PipelineNote(p.rec, a); !note.empty()) s += "; " + note;
  if (!p.fallback_note.empty()) s += "; " + p.fallback_note;
  for (const std::string& t : p.rec.unrunnable_types) s += "; left out " + t;
  return s;
}

std::string InfeasibleMessage(const PlanOutcome& p) {
  const Recommendation& r = p.rec;
  return "dlh: no allocation meets the " + p.deadline_text + " deadline; the fastest, " +
         AllocationText(r.fastest) + ", needs " +
         HumanDuration(r.fastest.total_s * (1 + p.job.margin)) + " with the " +
         Printf("%.0f", p.job.margin * 100) + "% margin (" + HumanDuration(r.fastest.total_s) +
         " predicted)";
}

std::string DryRunReport(const PlanOutcome& p, int top, const std::string& command) {
  const Job& job = p.job;
  const Recommendation& rec = p.rec;
  std::string s = "dlh: dry run, nothing submitted\n";
  if (p.suggested) {
    for (const std::string& line : p.suggested->why) s += "suggest: " + line + "\n";
    s += "suggest: the spec (not written in a dry run; " + p.suggested->path + " otherwise):\n" +
         p.suggested->text;
  }
  s += Printf("%s: %lld samples x %d epochs, global batch %d, deadline %s, objective %s\n",
              job.spec.origin.c_str(), static_cast<long long>(job.samples), job.epochs,
              job.spec.batch_size, p.deadline_text.c_str(), ObjectiveName(job.objective));
  for (const auto& [gpu, speed] : rec.speeds)
    s +=
        Printf("  %s: %s, %.3f ms + %.4f ms/sample per step%s\n", gpu.c_str(), speed.source.c_str(),
               speed.fixed_s * 1e3, speed.per_sample_s * 1e3, SpreadText(speed.log_sigma).c_str());
  for (const std::string& w : StaleCalibrationWarnings(rec.speeds)) s += "  warning: " + w + "\n";
  if (job.profile)
    s += "  profiles: " + ProfileSourcesText(ProfileSourcesOfSpeeds(rec.speeds)) + "\n";
  if (job.profile)
    for (const std::string& w : ProfileWarnings(*job.profile)) s += "  warning: " + w + "\n";
  for (const std::string& t : rec.unrunnable_types) s += "  left out " + t + "\n";
  if (p.fallback_note.rfind(p.live_note, 0) == 0)  // "live node state unknown (...): ..."
    s += p.fallback_note + "\n";
  else
    s += p.live_note + (p.fallback_note.empty() ? "" : "; " + p.fallback_note) + "\n";
  s += Printf("%d allocations considered\n\n", rec.candidates);
  auto row = [&](int rank, const Allocation& a) {
    std::string what;
    for (const Part& part : a.parts) what += (what.empty() ? "" : " + ") + PartCellText(part);
    s += Printf("%3d  %-34s %5d %9s %10.3f %9.1f %8.2f  ", rank, what.c_str(), a.gpus,
                HumanDuration(a.total_s).c_str(), a.energy_j / 3.6e6, a.gpu_hours, a.step_s * 1e3) +
         a.why + "\n";
  };
  s += Printf("%3s  %-34s %5s %9s %10s %9s %8s  %s\n", "#", "allocation (nodes x gpus, batch)",
              "GPUs", "time", "energy kWh", "GPU-h", "step ms", "why");
  if (!p.feasible) {
    row(0, rec.fastest);
    return s + "\n" + InfeasibleMessage(p) + "\n";
  }
  const int n = std::min<int>(top, int(rec.ranked.size()));
  for (int i = 0; i < n; ++i) row(i + 1, rec.ranked[size_t(i)]);
  s += "\nchosen: " + AllocationText(p.chosen) + ", " + ShortWhy(p.chosen.why) + "; time limit " +
       p.time_limit + "\n";
  s += "predicted " + BandText(p.chosen.total_s, p.chosen.total_upper_s) + ": " +
       PhasesText(p.chosen.phases, p.chosen.steps) + "\n";
  if (const std::string from = ChosenProvenance(rec, p.chosen); !from.empty())
    s += "step time: " + from + "\n";
  if (!p.choice_note.empty()) s += "note: " + p.choice_note + "\n";
  if (!p.cpu_note.empty()) s += "note: " + p.cpu_note + "\n";
  if (!p.type_note.empty()) s += "note: " + p.type_note + "\n";
  if (!p.nodes_note.empty()) s += "note: " + p.nodes_note + "\n";
  if (!p.threads_note.empty()) s += "note: " + p.threads_note + "\n";
  if (const std::string note = SyncNote(p.job, p.chosen); !note.empty())
    s += "training: " + note + "\n";
  if (const std::string note = PipelineNote(p.rec, p.chosen); !note.empty())
    s += "layout: " + note + "\n";
  std::string opts;
  for (const SlurmSetting& st : p.settings)
    if (st.apply) opts += " --" + st.name + "=" + st.value;
  const std::string kept = KeptText(p.user);
  s += command + " would get:" + (opts.empty() ? std::string(" nothing") : opts) +
       (kept.empty() ? std::string() : " (yours kept: " + kept + ")") + "\n";
  if (!p.time_note.empty()) s += p.time_note + "\n";
  return s;
}

}  // namespace dlh::plan

// DLH SPANK plugin — the extern "C" facade (dlh_spank.h). Every function catches every
// exception: nothing may unwind into Slurm's C code.
//
// Setting job options from a SPANK plugin (measured with Slurm 22.05; plugin/README.md,
// Design): in slurm_spank_init_post_opt the client's option struct is the global `opt` of
// sbatch/salloc/srun, and slurm_option_isset/slurm_option_get/slurm_option_set of
// libslurmfull read and change it before the job request is built. None of these is a
// public API, so they are looked up with dlsym(RTLD_DEFAULT) at run time: the .so has no
// link dependency on libslurmfull, and a Slurm without them makes --dlh-auto fail closed
// with a message that names the cli_filter/lua fallback.
//
// The fallback (`register-only`): Slurm's cli_filter/lua runs share/slurm/cli_filter.lua in
// sbatch, as the user, after the option callbacks and before post_opt. It plans with
// `dlh-estimate slurm-plan` (the same code as here) and sets the options through its own
// documented API; it cannot set environment variables, so it writes the plan into a pipe
// this plugin opened, and post_opt exports it like a plan of its own.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/capture_output.hpp"
#include "common/error.hpp"
#include "common/one_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/options.hpp"
#include "estimator/plan/plan.hpp"
#include "estimator/recommend/suggest.hpp"
#include "plugin/dlh_spank.h"
#include "plugin/slurm_nodes.hpp"

namespace {

using dlh::plan::AutoOptions;
using dlh::plan::PluginConfig;

constexpr const char* kSiteVariable = "DLH_SITE";
constexpr const char* kHandoffVariable = "DLH_PLAN_HANDOFF";
constexpr const char* kEstimateVariable = "DLH_ESTIMATE";
// A plan reaches the job as environment variables (DLH_PLAN, SLURM_SPANK_DLH_PLAN), and Linux
// passes at most 128 KiB in one ("NAME=value", MAX_ARG_STRLEN): a larger plan would stop the
// job from starting, so it is refused with one line instead (issue 41; it used to be cut at
// 32 KiB without a word, and exported as invalid JSON). A plan is about 1 KiB; a mix lists
// its nodes.
constexpr size_t kMaxPlanBytes = 128 * 1024 - 64;

struct State {
  PluginConfig config;
  std::string config_error;  // reported when --dlh-auto is used
  AutoOptions options;
  bool planned = false;  // post_opt ran (hetjob components and repeated calls plan once)
  int handoff = -1;      // register-only: the memory file cli_filter.lua writes the plan into
};
State* g_state = nullptr;

State& GetState() {
  if (!g_state) g_state = new State;
  return *g_state;
}

// slurm_opt_t is opaque here; the 22.05 prototypes are in src/common/slurm_opt.h.
struct SlurmOptions {
  void* opt = nullptr;
  bool (*isset)(void*, const char*) = nullptr;
  char* (*get)(void*, const char*) = nullptr;  // xmalloc'ed copy
  int (*set)(void*, const char*, const char*, bool) = nullptr;
  void (*xfree_ptr)(void*) = nullptr;  // frees what `get` returned (leaked when missing)
  std::string missing;                 // names of the symbols not found

  bool ok() const { return missing.empty(); }

  static SlurmOptions resolve() {
    SlurmOptions s;
    auto find = [&s](const char* name) {
      void* p = dlsym(RTLD_DEFAULT, name);
      if (!p) s.missing += (s.missing.empty() ? "" : ", ") + std::string(name);
      return p;
    };
    s.opt = find("opt");
    s.isset = reinterpret_cast<bool (*)(void*, const char*)>(find("slurm_option_isset"));
    s.get = reinterpret_cast<char* (*)(void*, const char*)>(find("slurm_option_get"));
    s.set =
        reinterpret_cast<int (*)(void*, const char*, const char*, bool)>(find("slurm_option_set"));
    s.xfree_ptr = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "slurm_xfree_ptr"));
    return s;
  }

  std::string Get(const char* name) const {
    char* v = get(opt, name);
    std::string out = v ? v : "";
    if (v && xfree_ptr) xfree_ptr(v);
    return out;
  }
};

// One line: a value the user gave may hold control characters.
void Log(dlh_log_fn log, int level, const std::string& message) {
  if (log) log(level, dlh::OneLine(message).c_str());
}

// The last-resort handler: no allocation, no throw; control characters become '?'.
int Fail(dlh_log_fn log, const char* where, const char* what) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, "dlh: %s%s", where, what);
  for (char* c = buf; *c; ++c)
    if (static_cast<unsigned char>(*c) < 0x20 || *c == 0x7f) *c = '?';
  if (log) log(DLH_LOG_ERROR, buf);
  return DLH_FAIL;
}

// dlh-estimate of the same installation: PREFIX/bin next to PREFIX/lib/dlh/spank_dlh.so
// (make install), or bin/ next to lib/ (the build tree). "" when neither exists.
std::string EstimateNextToPlugin() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&EstimateNextToPlugin), &info) || !info.dli_fname) return "";
  const std::string so = info.dli_fname;
  const std::string dir = so.substr(0, so.find_last_of('/') + 1);
  for (const char* relative : {"../../bin/dlh-estimate", "../bin/dlh-estimate"}) {
    const std::string candidate = dir + relative;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// dlh-data for spec=suggest: beside dlh-estimate (EstimateNextToPlugin's folders), else PATH.
std::string DataToolNextToPlugin() {
  const std::string estimate = EstimateNextToPlugin();
  return estimate.empty() ? "dlh-data" : dlh::ProgramBeside("dlh-data", estimate);
}

// register-only: the memory file and the variables cli_filter.lua reads. A memory file
// (memfd), not a pipe: cli_filter.lua writes the plan from this same sbatch process, before
// post_opt reads it, so a pipe's 64 KiB would block that write forever on a larger plan.
// Nothing is inherited by children (MFD_CLOEXEC): cli_filter.lua opens /dev/fd/N of this
// process itself, which opens the memory file anew.
void OpenHandoff(State& st, const std::vector<std::string>& args) {
  st.handoff = memfd_create("dlh-plan", MFD_CLOEXEC);
  if (st.handoff < 0) return;
  std::string site;
  for (const std::string& a : args) site += (site.empty() ? "" : " ") + a;
  setenv(kSiteVariable, site.c_str(), 1);
  setenv(kHandoffVariable, ("/dev/fd/" + std::to_string(st.handoff)).c_str(), 1);
  const std::string estimate = EstimateNextToPlugin();
  if (!estimate.empty())
    setenv(kEstimateVariable, estimate.c_str(), 1);
  else
    unsetenv(kEstimateVariable);  // cli_filter.lua then looks on PATH
}

struct Handoff {
  std::string text;  // the plan, whole, when it fits kMaxPlanBytes
  size_t bytes = 0;  // what cli_filter.lua wrote
};

// Reads what cli_filter.lua handed over, then closes the file and removes the variables, so
// that they never reach a job.
Handoff CloseHandoff(State& st) {
  Handoff h;
  struct stat sb {};
  if (st.handoff >= 0 && fstat(st.handoff, &sb) == 0 && sb.st_size > 0) {
    h.bytes = size_t(sb.st_size);
    if (h.bytes <= kMaxPlanBytes) {
      h.text.resize(h.bytes);
      size_t got = 0;
      while (got < h.bytes) {
        const ssize_t n = pread(st.handoff, &h.text[got], h.bytes - got, off_t(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += size_t(n);
      }
      h.text.resize(got);
    }
  }
  if (st.handoff >= 0) close(st.handoff);
  st.handoff = -1;
  unsetenv(kSiteVariable);
  unsetenv(kHandoffVariable);
  unsetenv(kEstimateVariable);
  while (!h.text.empty() && (h.text.back() == '\n' || h.text.back() == ' ')) h.text.pop_back();
  return h;
}

std::string PlanTooLarge(size_t bytes) {
  return "dlh: the plan is " + std::to_string(bytes) + " bytes, more than a job's environment " +
         "variable holds (" + std::to_string(kMaxPlanBytes) + "); nothing submitted";
}

// DLH_PLAN for the job: in the environment sbatch copies (--export=ALL, the default) and in
// the SPANK job-control environment, which reaches the job as SLURM_SPANK_DLH_PLAN whatever
// --export says (sbatch merges every SLURM_* variable even with --export=NONE).
void ExportPlan(const std::string& plan, dlh_log_fn log, dlh_export_fn export_job_env) {
  setenv("DLH_PLAN", plan.c_str(), 1);
  if (export_job_env && export_job_env("DLH_PLAN", plan.c_str()) != 0)
    Log(log, DLH_LOG_INFO,
        "dlh: could not put DLH_PLAN into the job-control environment; with --export=NONE "
        "the job will not see it");
}

// The job trains the spec the plan was made for: train.sbatch reads DLH_SPEC (and, with
// --export=NONE, SLURM_SPANK_DLH_SPEC). spec=FILE: that file (it named only the suggested
// one before, so train.sbatch trained its default spec under a plan for the user's);
// spec=suggest: the suggested spec, and DLH_DATA for --data when the user did not set it. A
// program's plan (profile=) names no spec.
void HandOverSpec(const nlohmann::json& plan, dlh_log_fn log, dlh_export_fn export_job_env) {
  auto hand_over = [&](const char* name, const std::string& value) {
    setenv(name, value.c_str(), 1);
    if (export_job_env && export_job_env(name, value.c_str()) != 0)
      Log(log, DLH_LOG_INFO,
          std::string("dlh: could not put ") + name + " into the job-control environment");
  };
  const auto it = plan.find("suggested");
  if (it == plan.end() || !it->is_object()) {
    const auto spec = plan.find("spec");
    if (!plan.contains("profile") && spec != plan.end() && spec->is_string() && !spec->empty())
      hand_over("DLH_SPEC", spec->get<std::string>());
    return;
  }
  for (const auto& [name, key] : {std::pair<const char*, const char*>{"DLH_SPEC", "spec"},
                                  std::pair<const char*, const char*>{"DLH_DATA", "data"}}) {
    const auto v = it->find(key);
    if (v == it->end() || !v->is_string()) continue;
    if (std::string(name) == "DLH_DATA" && std::getenv(name)) continue;  // the user's stands
    hand_over(name, v->get<std::string>());
  }
}

int PostOpt(dlh_log_fn log, dlh_export_fn export_job_env) {
  State& st = GetState();
  const Handoff handed_over = CloseHandoff(st);
  if (!st.options.requested || st.planned) return DLH_OK;
  st.planned = true;
  if (!st.config_error.empty()) {
    Log(log, DLH_LOG_ERROR, "dlh: " + st.config_error);
    return DLH_FAIL;
  }
  // cli_filter.lua planned and set the options; the plan still has to reach the job.
  if (st.config.register_only) {
    if (handed_over.bytes > kMaxPlanBytes) {
      Log(log, DLH_LOG_ERROR, PlanTooLarge(handed_over.bytes));
      return DLH_FAIL;
    }
    if (handed_over.text.empty()) {
      Log(log, DLH_LOG_ERROR,
          "dlh: --dlh-auto was not planned: spank_dlh.so is loaded with register-only, but "
          "share/slurm/cli_filter.lua (CliFilterPlugins=cli_filter/lua) handed over no plan; "
          "ask your administrator; nothing submitted");
      return DLH_FAIL;
    }
    ExportPlan(handed_over.text, log, export_job_env);
    const nlohmann::json handed = nlohmann::json::parse(handed_over.text, nullptr, false);
    if (handed.is_object()) HandOverSpec(handed, log, export_job_env);
    return DLH_OK;
  }
  const bool dry_run = st.options.dry_run.value_or(false);
  const SlurmOptions api = SlurmOptions::resolve();
  if (!api.ok() && !dry_run) {
    Log(log, DLH_LOG_ERROR,
        "dlh: this Slurm does not give plugins " + api.missing +
            " (found in Slurm 22.05), so --dlh-auto cannot set the job's options; the "
            "fallback is register-only with cli_filter/lua and share/slurm/cli_filter.lua "
            "(ask your administrator); nothing submitted");
    return DLH_FAIL;
  }

  dlh::plan::PlanInputs in;
  in.options = st.options;
  in.config = st.config;
  if (const char* v = std::getenv("DLH_SPEC")) in.env_spec = v;
  if (const char* v = std::getenv("DLH_DATA")) in.env_data = v;
  in.inspect_data = [](const std::string& path) {
    return dlh::InspectDataSet(DataToolNextToPlugin(), path, "--dlh-auto: data: ");
  };
  if (const char* v = std::getenv("DLH_STAGE_DIR")) in.env_stage_dir = v;
  if (const char* v = std::getenv("DLH_SAMPLES")) in.env_samples = v;
  if (const char* v = std::getenv("OPENBLAS_NUM_THREADS")) in.env_openblas_threads = v;
  if (char* cwd = getcwd(nullptr, 0)) {
    in.cwd = cwd;
    std::free(cwd);
  }
  if (api.ok()) {
    for (const char* name : dlh::plan::kUserOptionNames)
      if (api.isset(api.opt, name)) dlh::plan::NoteUserOption(in.user, name, api.Get(name));
  }

  const dlh::Cluster cluster = dlh::LoadCluster(st.config.cluster);
  std::vector<dlh::plan::LiveNode> live;
  std::string live_error;
  if (!dlh::plugin::LoadLiveNodes(&live, &live_error) && live_error.empty())
    live_error = "unknown error";
  const dlh::plan::PlanOutcome plan = dlh::plan::MakePlan(in, cluster, live, live_error);

  if (dry_run) {
    // stdout, like `dlh-estimate recommend`; nothing is submitted (see spank_entry.c).
    // The plugin runs inside sbatch or salloc (spank_entry.c refuses srun); SPANK's
    // allocator context is the same for both, the process's name is not.
    const std::string command =
        std::strcmp(program_invocation_short_name, "salloc") == 0 ? "salloc" : "sbatch";
    std::fputs(dlh::plan::DryRunReport(plan, 5, command).c_str(), stdout);
    std::fflush(stdout);
    if (!plan.feasible) {
      Log(log, DLH_LOG_ERROR, dlh::plan::InfeasibleMessage(plan));
      return DLH_FAIL;
    }
    return DLH_DRY_RUN;
  }
  if (!plan.feasible) {
    Log(log, DLH_LOG_ERROR, dlh::plan::InfeasibleMessage(plan) + "; nothing submitted");
    return DLH_FAIL;
  }
  // Before any option is set: a plan the job could not receive submits nothing.
  const std::string plan_text = plan.plan.dump();
  if (plan_text.size() > kMaxPlanBytes) {
    Log(log, DLH_LOG_ERROR, PlanTooLarge(plan_text.size()));
    return DLH_FAIL;
  }
  for (const auto& s : plan.settings) {
    if (!s.apply) continue;
    if (api.set(api.opt, s.name.c_str(), s.value.c_str(), false) != 0) {
      Log(log, DLH_LOG_ERROR,
          "dlh: Slurm refused --" + s.name + "=" + s.value + "; nothing submitted");
      return DLH_FAIL;
    }
    // sbatch derived SLURM_NTASKS_PER_NODE before this hook; keep the job's env consistent.
    if (s.name == "ntasks-per-node") setenv("SLURM_NTASKS_PER_NODE", s.value.c_str(), 1);
  }
  // This runs in sbatch, as the submitting user: a suggested spec goes to their submit folder.
  if (plan.suggested) dlh::WriteFileAtomically(plan.suggested->path, plan.suggested->text);
  HandOverSpec(plan.plan, log, export_job_env);
  ExportPlan(plan_text, log, export_job_env);
  Log(log, DLH_LOG_INFO, dlh::plan::SummaryLine(plan));
  return DLH_OK;
}

}  // namespace

extern "C" {

void dlh_configure(int argc, char** argv) {
  try {
    State& st = GetState();
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i)
      if (argv && argv[i]) args.emplace_back(argv[i]);
    st.config_error.clear();
    st.config = dlh::plan::ParsePluginArgs(args);
    if (st.config.register_only) OpenHandoff(st, args);
  } catch (const std::exception& e) {
    if (g_state) {
      try {
        g_state->config_error = e.what();
      } catch (...) {
        g_state->config_error.clear();
      }
    }
  } catch (...) {
  }
}

int dlh_option(const char* value, dlh_log_fn log) {
  try {
    dlh::plan::ApplyAutoValue(GetState().options, value);
    return DLH_OK;
  } catch (const std::exception& e) {
    return Fail(log, "", e.what());
  } catch (...) {
    return Fail(log, "", "--dlh-auto: unexpected error");
  }
}

int dlh_requested(void) { return g_state && g_state->options.requested ? 1 : 0; }

int dlh_allocator_post_opt(dlh_log_fn log, dlh_export_fn export_job_env) {
  try {
    return PostOpt(log, export_job_env);
  } catch (const std::exception& e) {
    return Fail(log, "", e.what());
  } catch (...) {
    return Fail(log, "", "unexpected error while planning");
  }
}

void dlh_finish(void) {
  if (g_state) {
    try {
      CloseHandoff(*g_state);
    } catch (...) {
    }
  }
  delete g_state;  // destructors of strings and vectors do not throw
  g_state = nullptr;
}

}  // extern "C"

// DLH SPANK plugin — the extern "C" facade (dlh_spank.h). Every function catches every
// exception: nothing may unwind into Slurm's C code.
//
// Setting job options from a SPANK plugin (measured with Slurm 22.05; plugin/README.md,
// Design): in slurm_spank_init_post_opt the client's option struct is the global `opt` of
// sbatch/salloc/srun, and slurm_option_isset/slurm_option_get/slurm_option_set of
// libslurmfull read and change it before the job request is built. None of these is a
// public API, so they are looked up with dlsym(RTLD_DEFAULT) at run time: the .so has no
// link dependency on libslurmfull, and a Slurm without them makes --dlh-auto fail closed
// with a message that names the job_submit/lua fallback.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/cluster.hpp"
#include "plugin/dlh_spank.h"
#include "plugin/live_state.hpp"
#include "plugin/options.hpp"
#include "plugin/plan.hpp"

namespace {

using dlh::plugin::AutoOptions;
using dlh::plugin::PluginConfig;

struct State {
  PluginConfig config;
  std::string config_error;  // reported when --dlh-auto is used
  AutoOptions options;
  bool planned = false;  // post_opt ran (hetjob components and repeated calls plan once)
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

void Log(dlh_log_fn log, int level, const std::string& message) {
  if (log) log(level, message.c_str());
}

// The last-resort handler: no allocation, no throw.
int Fail(dlh_log_fn log, const char* where, const char* what) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, "dlh: %s%s", where, what);
  if (log) log(DLH_LOG_ERROR, buf);
  return DLH_FAIL;
}

int PostOpt(dlh_log_fn log) {
  State& st = GetState();
  if (!st.options.requested || st.planned) return DLH_OK;
  st.planned = true;
  if (!st.config_error.empty()) {
    Log(log, DLH_LOG_ERROR, "dlh: " + st.config_error);
    return DLH_FAIL;
  }
  // The site plans in slurmctld (job_submit.lua), from the option value Slurm forwards.
  if (st.config.register_only) return DLH_OK;
  const bool dry_run = st.options.dry_run.value_or(false);
  const SlurmOptions api = SlurmOptions::resolve();
  if (!api.ok() && !dry_run) {
    Log(log, DLH_LOG_ERROR,
        "dlh: this Slurm does not give plugins " + api.missing +
            " (found in Slurm 22.05), so --dlh-auto cannot set the job's options; the "
            "documented fallback is job_submit/lua with share/slurm/job_submit.lua "
            "(ask your administrator); nothing submitted");
    return DLH_FAIL;
  }

  dlh::plugin::PlanInputs in;
  in.options = st.options;
  in.config = st.config;
  if (const char* v = std::getenv("DLH_SPEC")) in.env_spec = v;
  if (const char* v = std::getenv("DLH_SAMPLES")) in.env_samples = v;
  if (char* cwd = getcwd(nullptr, 0)) {
    in.cwd = cwd;
    std::free(cwd);
  }
  if (api.ok()) {
    for (const char* name : {"gres", "gpus", "gpus-per-node", "gpus-per-task", "nodes", "ntasks",
                             "ntasks-per-node", "time"})
      if (api.isset(api.opt, name)) dlh::plugin::NoteUserOption(in.user, name, api.Get(name));
  }

  const dlh::Cluster cluster = dlh::LoadCluster(st.config.cluster);
  std::vector<dlh::plugin::LiveNode> live;
  std::string live_error;
  if (!dlh::plugin::LoadLiveNodes(&live, &live_error) && live_error.empty())
    live_error = "unknown error";
  const dlh::plugin::PlanOutcome plan = dlh::plugin::MakePlan(in, cluster, live, live_error);

  if (dry_run) {
    // stdout, like `dlh-estimate recommend`; nothing is submitted (see spank_entry.c).
    std::fputs(dlh::plugin::DryRunReport(plan, 5).c_str(), stdout);
    std::fflush(stdout);
    if (!plan.feasible) {
      Log(log, DLH_LOG_ERROR, dlh::plugin::InfeasibleMessage(plan));
      return DLH_FAIL;
    }
    return DLH_DRY_RUN;
  }
  if (!plan.feasible) {
    Log(log, DLH_LOG_ERROR, dlh::plugin::InfeasibleMessage(plan) + "; nothing submitted");
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
  // sbatch and salloc copy their environment into the job (unless --export says otherwise).
  setenv("DLH_PLAN", plan.plan.dump().c_str(), 1);
  Log(log, DLH_LOG_INFO, dlh::plugin::SummaryLine(plan));
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
    st.config = dlh::plugin::ParsePluginArgs(args);
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
    dlh::plugin::ApplyAutoValue(GetState().options, value);
    return DLH_OK;
  } catch (const std::exception& e) {
    return Fail(log, "", e.what());
  } catch (...) {
    return Fail(log, "", "--dlh-auto: unexpected error");
  }
}

int dlh_requested(void) { return g_state && g_state->options.requested ? 1 : 0; }

int dlh_allocator_post_opt(dlh_log_fn log) {
  try {
    return PostOpt(log);
  } catch (const std::exception& e) {
    return Fail(log, "", e.what());
  } catch (...) {
    return Fail(log, "", "unexpected error while planning");
  }
}

void dlh_finish(void) {
  delete g_state;  // destructors of strings and vectors do not throw
  g_state = nullptr;
}

}  // extern "C"

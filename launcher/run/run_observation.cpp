// DLH — `dlh-launch run`'s observation record (see run_observation.hpp).
#include "launcher/run/run_observation.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>

#include "common/median.hpp"
#include "launcher/observe/record_probe.hpp"
#include "launcher/observe/store.hpp"
#include "launcher/run/run_dir.hpp"

namespace dlh {

void WriteRunObservation(const RunObservationInputs& in) {
  if (in.store.empty() || !in.log || in.log->steps() < 4) return;
  try {
    const ProgressLog& log = *in.log;
    const LaunchPlan& plan = *in.plan;
    Observation r;
    r.created = RecordTimeNow();
    const passwd* pw = getpwuid(getuid());
    r.user = pw ? pw->pw_name : std::to_string(getuid());
    r.command = "run";
    r.model_name = DefaultRunName(in.command);
    // A plan from the program's profile carries the profile's key; otherwise the program's
    // name is all there is (the estimator keys a profile the same way: "program NAME").
    r.model_key = !plan.model_key.empty() ? plan.model_key : ModelKey("program " + r.model_name);
    r.gpu_type = !plan.observations_gpu.empty() ? plan.observations_gpu : in.gpu_type;
    if (r.gpu_type.empty() && plan.parts.size() == 1) r.gpu_type = plan.parts[0].gpu;
    const ProgramProfile& said = log.described();
    r.device = said.device.empty() ? "unknown" : said.device;
    r.probe = NodeProbeForRecord(r.device);
    r.ranks = in.ranks;
    r.threads_per_rank = said.cpu_threads;
    r.ranks_per_node = in.ranks_per_node;
    r.gpus_per_node = r.device.rfind("cuda", 0) == 0 ? in.ranks_per_node : 0;
    r.hosts = in.hosts;
    // The first step line ends the first step: steps are the gaps from there on.
    const std::vector<double>& t = log.step_times();
    std::vector<double> gaps;
    for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
    r.step_s = Median(gaps);
    r.steps = int64_t(gaps.size());
    if (!gaps.empty()) r.steps_s = t.back() - t.front();  // whatever the program did between
    std::vector<double> samples;
    for (int64_t s : log.step_samples())
      if (s > 0) samples.push_back(double(s));
    r.per_rank_batch = samples.empty() ? 0 : int64_t(Median(samples));
    if (r.per_rank_batch <= 0 && plan.present && plan.gpus > 0)
      r.per_rank_batch = plan.global_batch / plan.gpus;
    r.global_batch = plan.present ? plan.global_batch : r.per_rank_batch * in.ranks;
    r.startup_s = t.front() - in.started_s;
    r.total_s = in.ended_s - in.started_s;
    r.energy_j = in.energy_j;
    if (r.per_rank_batch <= 0 || !(r.step_s > 0)) {
      std::fprintf(stderr,
                   "dlh-launch: run: warning: no observation record: the program's step lines "
                   "give no sample count and no plan gives its batch\n");
      return;
    }
    if (plan.present && plan.predicted_step_s > 0) {
      r.has_prediction = true;
      r.predicted_step_s = plan.predicted_step_s;
      r.predicted_compute_s = plan.predicted_compute_s;
      r.predicted_comm_s = plan.predicted_comm_s;
      r.predicted_total_s = plan.predicted_total_s;
    }
    const StoreWrite w = WriteObservation(in.store, r, plan.observations_limit);
    if (w.written)
      std::fprintf(stderr, "dlh-launch: run: observation: %s\n", w.path.c_str());
    else
      std::fprintf(stderr, "dlh-launch: run: warning: %s\n", w.warning.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlh-launch: run: warning: observation record not written: %s\n",
                 e.what());
  }
}

}  // namespace dlh

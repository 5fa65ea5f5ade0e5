// DLH estimator — planning from a program's profile (see profile_speeds.hpp).
#include "estimator/recommend/profile_speeds.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/error.hpp"
#include "estimator/model/wave_scaling.hpp"

namespace dlh {

namespace {

// The profile's file name for source texts and warnings ("prof.json"), or "profile".
std::string FileName(const ProgramProfile& p) {
  if (p.origin.empty()) return "profile";
  return std::filesystem::path(p.origin).filename().string();
}

std::string Where(const ProgramProfile& p) { return p.origin.empty() ? "profile" : p.origin; }

std::string Fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

Job JobFromProfile(const ProgramProfile& p) {
  if (p.points.empty()) throw UsageError(Where(p) + ": points: must be a non-empty array");
  Job job;
  job.profile = p;
  const int64_t largest = p.points.back().batch;

  // What the recommender reads from the spec: the global batch its candidates split, the
  // rate it scales with that batch (0 when unknown: the plan's lr is 0 then), the optimizer
  // (only for its slots) and the names in messages and the plan.
  TrainSpec& spec = job.spec;
  spec.origin = p.origin;
  spec.name = p.program.empty() ? FileName(p) : p.program;
  spec.batch_size = int(p.global_batch > 0 ? p.global_batch : largest);
  spec.epochs = p.epochs;
  spec.optimizer.lr = p.lr;
  // The recommender counts slots from the profile itself (any number); the optimizer kind
  // says the same for the common counts, for whoever prints the spec.
  spec.optimizer.kind =
      p.optimizer_slots >= 2 ? OptimizerSpec::Kind::Adam : OptimizerSpec::Kind::Sgd;
  spec.optimizer.momentum = p.optimizer_slots == 1 ? 0.9 : 0;

  // What it reads from the features. The parameters size the allreduce, the checkpoints and
  // the fixed part of the memory. The FLOPs are unknown, and on this path they only set
  // the cost of an evaluation sample: forward / (forward + backward). A backward pass costs
  // about twice the forward one (a gradient for the input and one for the weights), so
  // forward is a third of a training step, as for the spec's own models without FLOPs
  // (job_time.cpp, WorkOf). The time model, the roofline and the HTML page's calibration
  // points, which use FLOPs otherwise, are not used with a profile.
  ModelFeatures& f = job.features;
  f.params = double(p.params);
  f.other_flops_fwd = 1;
  f.other_flops_bwd = 2;
  // Memory: TrainingMemoryBytes = 4 params (2 + slots) + 8 batch activation_elements (no
  // convolution workspace here), so the activations are set to give the measured peak at
  // the largest batch; what the parameters do not explain grows with the batch, which
  // errs on the safe side for larger batches. Without a measurement, the parameters only.
  if (p.memory_bytes > 0) {
    const double fixed = 4.0 * f.params * (2.0 + p.optimizer_slots);
    f.activation_elements = std::max(0.0, p.memory_bytes - fixed) / (8.0 * double(largest));
  }
  job.samples = p.samples;
  job.epochs = p.epochs;
  if (ProgramSetsItsThreads(p)) job.threads_per_rank = p.cpu_threads;
  return job;
}

bool ProgramSetsItsThreads(const ProgramProfile& p) {
  return p.cpu_threads > 0 && p.threads_offered > 0 && p.cpu_threads != p.threads_offered;
}

Job JobFromProfiles(const std::vector<ProgramProfile>& set) {
  const std::string origin = set.empty() || set[0].origin.empty() ? "profile" : set[0].origin;
  CheckProfileSet(set, origin);
  Job job = JobFromProfile(set[0]);
  if (set.size() > 1) job.profiles = set;
  return job;
}

ProfileSources ProfileSourcesOf(const Job& job, const Cluster& cluster) {
  ProfileSources out;
  std::vector<const ProgramProfile*> all;
  if (job.profiles.empty() && job.profile) all.push_back(&*job.profile);
  for (const ProgramProfile& p : job.profiles) all.push_back(&p);
  for (const ProgramProfile* p : all) {
    const GpuType& g = ProfiledGpuType(*p, cluster);
    if (!out.measured.emplace(g.name, p).second)
      throw UsageError(Where(*p) + ": gpu_type: " + g.name + " is measured by two profiles");
  }
  for (const GpuType& g : cluster.gpu_types) {
    if (out.measured.count(g.name) || g.cpu) continue;  // never planned on CPU nodes
    const GpuType* ref =
        ClosestType(cluster, g, [&](const GpuType& m) { return out.measured.count(m.name) > 0; });
    if (ref) out.transferred[g.name] = ref->name;
  }
  return out;
}

ProfileSources ProfileSourcesOfSpeeds(const std::map<std::string, DeviceSpeed>& speeds) {
  ProfileSources out;
  for (const auto& [gpu, s] : speeds) {
    if (s.reference.empty())
      out.measured[gpu] = nullptr;
    else
      out.transferred[gpu] = s.reference;
  }
  return out;
}

std::string ProfileSourcesText(const ProfileSources& sources) {
  std::string measured, transferred;
  for (const auto& [type, p] : sources.measured) measured += (measured.empty() ? "" : ", ") + type;
  for (const auto& [type, from] : sources.transferred)
    transferred += (transferred.empty() ? "" : ", ") + type + " (from " + from + ")";
  return "measured on " + measured + (transferred.empty() ? "" : "; transferred to " + transferred);
}

ProfileLine FitProfileLine(const std::vector<ProfilePoint>& points) {
  if (points.empty()) throw EstimateError("profile: no points to fit");
  ProfileLine line;
  if (points.size() == 1) {
    const ProfilePoint& q = points[0];
    line.per_sample_s = q.step_s / double(q.batch);
    line.how = "1 batch, " + std::to_string(q.batch) + ": proportional";
    return line;
  }
  // Minimise sum ((fixed + per * b - t) / t)^2: weights w = 1 / t^2.
  double s = 0, sb = 0, sbb = 0, st = 0, sbt = 0;
  for (const ProfilePoint& q : points) {
    const double b = double(q.batch), t = q.step_s, w = 1 / (t * t);
    s += w;
    sb += w * b;
    sbb += w * b * b;
    st += w * t;
    sbt += w * b * t;
  }
  line.how = std::to_string(points.size()) + " batches, " + std::to_string(points.front().batch) +
             "-" + std::to_string(points.back().batch);
  const double det = s * sbb - sb * sb;  // > 0: the batches are distinct
  line.per_sample_s = (s * sbt - sb * st) / det;
  line.fixed_s = (st - line.per_sample_s * sb) / s;
  if (!(line.per_sample_s > 0)) {
    // Larger batches were no slower (noise, or a device far from busy): the time does not
    // grow within the range measured. A flat line; the tiny slope keeps the speed valid
    // (per_sample_s > 0) without changing any step by more than a few nanoseconds.
    line.fixed_s = st / s;
    line.per_sample_s = 1e-9 * line.fixed_s;
    line.how += ", no slower at larger batches: flat";
  } else if (line.fixed_s < 0) {
    // A negative time at batch 0 is noise in the fixed part: the line through the origin
    // that fits best instead.
    line.fixed_s = 0;
    line.per_sample_s = sbt / sbb;
    line.how += ", through the origin";
  }
  return line;
}

const GpuType& ProfiledGpuType(const ProgramProfile& p, const Cluster& cluster) {
  std::string names;
  std::vector<const GpuType*> gpus;  // a profile is a program timed on a GPU type
  for (const GpuType& g : cluster.gpu_types)
    if (!g.cpu) gpus.push_back(&g), names += (names.empty() ? "" : ", ") + g.name;
  const std::string types = "cluster \"" + cluster.name + "\" has " + names;
  if (p.gpu_type.empty()) {
    if (gpus.size() == 1) return *gpus[0];
    throw UsageError(Where(p) + ": gpu_type: not given, and " + types +
                     ": profile with dlh-launch run --gpu-type TYPE");
  }
  if (const GpuType* g = cluster.gpu(p.gpu_type); g && !g->cpu) return *g;
  throw UsageError(Where(p) + ": gpu_type: \"" + p.gpu_type + "\" is not in the cluster (" + types +
                   ")");
}

DeviceSpeed ProfileSpeed(const ProgramProfile& p, const GpuType& profiled, const GpuType& target) {
  const ProfileLine line = FitProfileLine(p.points);
  DeviceSpeed s;
  s.fixed_s = line.fixed_s;
  s.per_sample_s = line.per_sample_s;
  // A CPU process's speed carries its threads wherever it goes, as a scaled calibration
  // carries its reference's (job_time.hpp, CpuRankShare).
  s.cpu_threads = p.cpu_threads;
  if (target.name == profiled.name) {
    s.source = "profiled (" + FileName(p) + ": " + line.how + ")";
    return s;
  }
  // Compute by the peaks' ratio, the fixed part (launches, the host's loop, data loading
  // between steps) kept: the profile does not say which part of a step is memory-bound,
  // and a training step of the models this is for is mostly GEMMs.
  const SpeedRatio ratio = PeakRatio(profiled, target);
  s.per_sample_s /= ratio.flops;
  s.source = "scaled from " + profiled.name + "'s profile (" + FileName(p) + "): FLOP/s x" +
             Fixed2(ratio.flops);
  s.reference = profiled.name;
  return s;
}

std::vector<std::string> ProfileWarnings(const ProgramProfile& p) {
  std::vector<std::string> out;
  if (p.params <= 0)
    out.push_back(FileName(p) +
                  ": params unknown: the allreduce and the checkpoints are taken as free (the "
                  "program can write 'params N' to DLH_PROGRESS_FD)");
  if (p.memory_bytes <= 0)
    out.push_back(FileName(p) +
                  ": memory unknown: GPU memory is checked for the parameters only (the "
                  "program can write 'memory BYTES' to DLH_PROGRESS_FD)");
  if (ProgramSetsItsThreads(p))
    out.push_back(FileName(p) + ": the program computes with " + std::to_string(p.cpu_threads) +
                  (p.cpu_threads == 1 ? " thread" : " threads") + " of its own (offered " +
                  std::to_string(p.threads_offered) +
                  " when profiled): planned so whatever a node's cores (a program that takes "
                  "OMP_NUM_THREADS uses the rank's share)");
  return out;
}

}  // namespace dlh

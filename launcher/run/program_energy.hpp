// DLH — the energy of a program's run (issue 44): each rank of `dlh-launch run` measures what
// its program used with the built-in trainer's meters (launcher/train/run_energy.hpp: the
// rank's GPU through NVML, or the node's CPU packages through RAPL, read by the node's first
// rank), from just before the launch to the program's end; summary.json's "energy" and the
// observation record come from every rank's figure. Where nothing can be measured the run
// says so and why, as train's does.
//
// Which meter counts is known only once the program said what it runs on (its `device`
// line): both are started, and the one for that device is read at the end ("cuda...": the
// GPU's, "cpu...": the CPU packages', nothing said: the GPU's when the rank has one).
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/train/run_energy.hpp"

namespace dlh {

// The PCI bus id ("0000:3B:00.0") of the GPU the rank's program uses: the visible GPU
// GpuIndexFor picks (the binding's, else the local rank modulo the count), as the CUDA
// driver names it (libcuda.so.1, loaded at run time; no context is made, so the launcher
// takes none of the GPU's memory). "" and *why_not set when there is none (no driver, no
// visible GPU).
std::string ProgramGpuBusId(int bound_device, int local_rank, std::string* why_not);

// One rank's figure at the end.
struct RankEnergy {
  double joules = -1;  // -1: not measured (why says why); RunEnergy::kCovered: its node's
                       // first rank's RAPL reading counts it
  std::string source;  // "nvml", "rapl" (a covered rank's too); "": not measured
  std::string why;
};

class ProgramEnergy {
 public:
  // `gpu_bus_id`: ProgramGpuBusId's ("": no GPU, `gpu_why_not` says why); `node_leader`:
  // the node's first rank, which reads the CPU packages. Starts the meters now.
  ProgramEnergy(const std::string& gpu_bus_id, const std::string& gpu_why_not, bool node_leader);

  // Often (a RAPL counter must be read before it wraps): each meter reads at most once a
  // second.
  void Poll();
  // A step record's energy_j (and on a GPU gpu_power_w, gpu_util, gpu_mem_gib), from the
  // meter of `device` (the program's description so far), those measured only.
  void AddTo(const std::string& device, nlohmann::json* record) const;
  // This rank's figure for a program that said it runs on `device` ("": said nothing).
  RankEnergy Final(const std::string& device);
  // Seconds since the meters started.
  double Seconds() const;

 private:
  bool UsesGpu(const std::string& device) const;

  std::unique_ptr<RunEnergy> gpu_;  // null: no GPU
  std::string gpu_why_not_;
  RunEnergy cpu_;
  std::chrono::steady_clock::time_point started_;
};

// summary.json's "energy" from every rank's figure (rank order): EnergySummary's
// (run_energy.hpp), or {"measured": false, "why"} when the ranks were measured by different
// meters (a GPU's joules and a node's CPU packages' make no one total).
nlohmann::json ProgramEnergySummary(const std::vector<RankEnergy>& ranks, int64_t samples,
                                    double seconds);

// A RankEnergy as one line of text and back, to gather it with the ranks' strings.
std::string RankEnergyText(const RankEnergy& e);
RankEnergy RankEnergyFromText(const std::string& text);

}  // namespace dlh

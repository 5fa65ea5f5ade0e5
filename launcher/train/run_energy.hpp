// DLH — a training run's measured energy: this rank's meter (its GPU's counter through
// NVML, or the node's CPU packages through RAPL), the GPU's power, utilisation and memory for
// metrics.jsonl, and summary.json's "energy" from every rank's figure. Where nothing can be
// measured the run says so and why; it never fills in a datasheet figure.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/energy.hpp"

namespace dlh {

class RunEnergy {
 public:
  // A joules figure that means "measured by another rank": the CPU packages' counters are
  // the node's, so only the node's first rank reads them (its figure covers the others).
  static constexpr double kCovered = -2;

  // `gpu_pci_bus_id` empty: the CPU engine, whose meter is RAPL on the `node_leader` only.
  RunEnergy(const std::string& gpu_pci_bus_id, bool node_leader);

  // Every step: reads the meter and samples the GPU at most once a second (NVML calls take
  // a while; RAPL only needs a read well within its wrap time), so a step costs a clock read.
  void poll();
  // Adds "energy_j" (this rank's, cumulative, as of the last read) and on a GPU "gpu_power_w",
  // "gpu_util" (percent) and "gpu_mem_gib" to a metrics.jsonl record, those measured only.
  void add_to(nlohmann::json* record) const;

  // This rank's joules since the meter was made, read now; -1 when not measured (why_not()
  // says why), kCovered on a CPU rank other than its node's first.
  double final_joules();
  const std::string& why_not() const { return why_not_; }
  // "nvml" or "rapl"; empty when not measured.
  std::string source() const { return meter_ ? meter_->source() : ""; }

 private:
  std::unique_ptr<EnergyMeter> meter_;
  std::string bus_id_, why_not_;
  bool covered_ = false;
  std::chrono::steady_clock::time_point last_poll_;
  double joules_ = 0;
  GpuSample sample_;
  bool sampled_ = false;
};

// summary.json's "energy", from every rank's final_joules() and why_not() (rank order):
// {"measured": true, "source", "scope", "joules_per_rank" (null for a covered rank),
// "joules_total", "joules_per_sample", "seconds", "mean_power_w"}, or {"measured": false,
// "why"} when any rank that should have measured could not.
nlohmann::json EnergySummary(const std::vector<double>& joules, const std::vector<std::string>& why,
                             const std::string& source, int64_t samples, double seconds);

}  // namespace dlh

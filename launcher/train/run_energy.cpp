// DLH — a training run's measured energy (run_energy.hpp).
#include "launcher/train/run_energy.hpp"

namespace dlh {

RunEnergy::RunEnergy(const std::string& gpu_pci_bus_id, bool node_leader)
    : bus_id_(gpu_pci_bus_id), last_poll_(std::chrono::steady_clock::now()) {
  if (!bus_id_.empty()) {
    meter_ = MakeGpuEnergyMeter(bus_id_, &why_not_);
    sampled_ = SampleGpu(bus_id_, &sample_);
  } else if (node_leader) {
    meter_ = MakeCpuEnergyMeter(&why_not_);
  } else {
    covered_ = true;
  }
}

void RunEnergy::poll() {
  if (!meter_ && !sampled_) return;  // nothing here can be read
  const auto now = std::chrono::steady_clock::now();
  if (now - last_poll_ < std::chrono::seconds(1)) return;
  last_poll_ = now;
  if (meter_) joules_ = meter_->joules();
  if (!bus_id_.empty()) sampled_ = SampleGpu(bus_id_, &sample_);
}

void RunEnergy::add_to(nlohmann::json* record) const {
  if (meter_) (*record)["energy_j"] = joules_;
  if (!sampled_) return;
  if (sample_.power_w >= 0) (*record)["gpu_power_w"] = sample_.power_w;
  if (sample_.util_percent >= 0) (*record)["gpu_util"] = sample_.util_percent;
  if (sample_.mem_used_gib >= 0) (*record)["gpu_mem_gib"] = sample_.mem_used_gib;
}

double RunEnergy::final_joules() {
  if (covered_) return kCovered;
  if (!meter_) return -1;
  joules_ = meter_->joules();
  return joules_;
}

nlohmann::json EnergySummary(const std::vector<double>& joules, const std::vector<std::string>& why,
                             const std::string& source, int64_t samples, double seconds) {
  nlohmann::json per_rank = nlohmann::json::array();
  double total = 0;
  for (size_t r = 0; r < joules.size(); ++r) {
    if (joules[r] == RunEnergy::kCovered) {
      per_rank.push_back(nullptr);
      continue;
    }
    if (joules[r] < 0) {  // a part of the run unmeasured: no total that would look whole
      const std::string text = r < why.size() && !why[r].empty() ? why[r] : "not measured";
      return {{"measured", false},
              {"why", joules.size() > 1 ? "rank " + std::to_string(r) + ": " + text : text}};
    }
    per_rank.push_back(joules[r]);
    total += joules[r];
  }
  if (per_rank.empty() || source.empty()) return {{"measured", false}, {"why", "no meter"}};
  nlohmann::json e = {
      {"measured", true},
      {"source", source},
      {"scope", source == "rapl" ? "cpu package(s) of each node, read by its first rank"
                                 : "each rank's GPU"},
      {"joules_per_rank", per_rank},
      {"joules_total", total},
      {"seconds", seconds}};
  if (samples > 0) e["joules_per_sample"] = total / double(samples);
  if (seconds > 0) e["mean_power_w"] = total / seconds;
  return e;
}

}  // namespace dlh

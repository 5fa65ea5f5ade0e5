// DLH — measured energy: a GPU's own counter (NVML, loaded at run time) or the CPU
// packages' RAPL counters (Linux powercap). Where neither can be read the answer is "not
// measured" and why, never a figure made up from a datasheet: the estimator's models are
// the place for those.
//
// No link-time dependence on NVIDIA's library: libnvidia-ml.so.1 comes with the driver, so
// it exists exactly where there is a GPU to measure, and every binary still runs without it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace dlh {

// Cumulative energy of one device since the meter was made.
class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;
  virtual double joules() = 0;             // since construction
  virtual std::string source() const = 0;  // "nvml" or "rapl"
  virtual std::string scope() const = 0;   // "gpu 0000:3B:00.0" or "cpu package(s) of this node"
};

// NVML (libnvidia-ml.so.1 loaded with dlopen at run time; $DLH_NVML_LIBRARY overrides the
// name, for tests) for the GPU with this PCI bus id. nullptr and *why_not set ("NVML not
// found: libnvidia-ml.so.1: cannot open ...") when it cannot measure, as on a GPU older than
// Volta, which has no energy counter: integrating sampled power instead would miss what
// happens between samples.
std::unique_ptr<EnergyMeter> MakeGpuEnergyMeter(const std::string& pci_bus_id,
                                                std::string* why_not);

// RAPL package zones under /sys/class/powercap ($DLH_POWERCAP_DIR overrides, for tests),
// wrap-around handled as long as joules() is called more often than a counter wraps
// (minutes at full power). nullptr and *why_not set when there is no readable zone (most
// VMs; energy_uj is often root-only).
std::unique_ptr<EnergyMeter> MakeCpuEnergyMeter(std::string* why_not);

// Power/utilisation/memory sample of that GPU, for metrics (fields absent, -1, when NVML
// lacks them). False when NVML or the device is not there or none of the fields is.
struct GpuSample {
  double power_w = -1;
  double util_percent = -1;
  double mem_used_gib = -1;
};
bool SampleGpu(const std::string& pci_bus_id, GpuSample* out);

// The pieces of the RAPL meter, for tests with a fake tree.
struct EnergyZone {
  std::string name;       // "intel-rapl:0"
  double joules = 0;      // energy_uj / 1e6
  double max_joules = 0;  // max_energy_range_uj / 1e6, where the counter wraps (0: unknown)
};
// Top-level RAPL package zones (intel-rapl:N, not sub-zones like intel-rapl:0:0) under
// `powercap_dir` (normally /sys/class/powercap), sorted by name. False when there is none
// or one cannot be read; then *why_not (when given) says which.
bool ReadEnergyZones(const std::string& powercap_dir, std::vector<EnergyZone>* zones,
                     std::string* why_not = nullptr);
// Joules used between two readings of the same zones, allowing for one wrap of each
// counter. Returns -1 when the readings do not match or a wrap cannot be undone.
double EnergyBetween(const std::vector<EnergyZone>& before, const std::vector<EnergyZone>& after);
// The packages' counters summed (a reading, not a difference: only differences mean
// anything). False when there is none (as on most VMs) or it cannot be read.
bool ReadCpuEnergyJoules(double* joules);

// "850 J", "12.3 kJ", "4.56 MJ (1.27 kWh)": for the end-of-run line and the run report.
std::string DescribeJoules(double joules);

}  // namespace dlh

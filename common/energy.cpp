// DLH — measured energy: the NVML meter and sample (the library opened once per process
// with dlopen) and the RAPL meter on Linux powercap.
#include "common/energy.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

// ---- NVML --------------------------------------------------------------------------------
// The few entry points used, declared here: nvml.h ships with the CUDA toolkit only on some
// installations, and the ABI of these calls has been stable since the _v2 names came.
using nvmlDevice_t = struct NvmlDeviceOpaque*;
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
struct NvmlUtilization {
  unsigned gpu, memory;  // percent of the last sample period
};
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};

// The library and its initialisation: dlclose and nvmlShutdown when the last user lets go.
class Nvml {
 public:
  explicit Nvml(const std::string& library) : handle_(dlopen(library.c_str(), RTLD_NOW)) {
    if (!handle_) {
      const char* why = dlerror();
      throw Error("NVML not found: " + std::string(why ? why : library + ": cannot open"));
    }
    Resolve(&init, "nvmlInit_v2", true);
    Resolve(&shutdown, "nvmlShutdown", true);
    Resolve(&error_string, "nvmlErrorString", true);
    Resolve(&handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2", true);
    // Optional: a call the library lacks reads as "not supported".
    Resolve(&total_energy, "nvmlDeviceGetTotalEnergyConsumption", false);
    Resolve(&power_usage, "nvmlDeviceGetPowerUsage", false);
    Resolve(&utilization, "nvmlDeviceGetUtilizationRates", false);
    Resolve(&memory_info, "nvmlDeviceGetMemoryInfo", false);
    const nvmlReturn_t rc = init();
    if (rc != kNvmlSuccess) throw Error("NVML cannot start: " + Describe(rc));
  }
  ~Nvml() { shutdown(); }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::string Describe(nvmlReturn_t rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? s : "NVML error " + std::to_string(rc);
  }
  // Throws Error when NVML does not know the device.
  nvmlDevice_t Device(const std::string& pci_bus_id) const {
    nvmlDevice_t device = nullptr;
    const nvmlReturn_t rc = handle_by_pci(pci_bus_id.c_str(), &device);
    if (rc != kNvmlSuccess) throw Error("NVML has no GPU " + pci_bus_id + ": " + Describe(rc));
    return device;
  }

  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handle_by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*total_energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // mJ, Volta+
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;             // mW
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*memory_info)(nvmlDevice_t, NvmlMemory*) = nullptr;

 private:
  struct Closer {
    void operator()(void* h) const { dlclose(h); }
  };
  template <typename F>
  void Resolve(F* f, const char* name, bool required) {
    *f = reinterpret_cast<F>(dlsym(handle_.get(), name));
    if (!*f && required) throw Error("NVML library lacks " + std::string(name));
  }
  std::unique_ptr<void, Closer> handle_;
};

// The process's NVML, opened on first use and kept (a meter and the samples share it).
// Opened again only when $DLH_NVML_LIBRARY names another library (tests switch it); a
// failure is remembered too, so a missing library costs one dlopen, not one per sample.
std::shared_ptr<Nvml> LoadNvml(std::string* why_not) {
  static std::mutex mutex;
  static std::string name, failure;
  static std::shared_ptr<Nvml> nvml;
  const char* env = std::getenv("DLH_NVML_LIBRARY");
  const std::string wanted = env && *env ? env : "libnvidia-ml.so.1";
  std::lock_guard<std::mutex> lock(mutex);
  if (wanted != name || (!nvml && failure.empty())) {
    nvml.reset();
    failure.clear();
    name = wanted;
    try {
      nvml = std::make_shared<Nvml>(wanted);
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  if (!nvml && why_not) *why_not = failure;
  return nvml;
}

class GpuMeter : public EnergyMeter {
 public:
  // Throws Error when the device has no readable energy counter.
  GpuMeter(std::shared_ptr<Nvml> nvml, const std::string& pci_bus_id)
      : nvml_(std::move(nvml)), device_(nvml_->Device(pci_bus_id)), bus_id_(pci_bus_id) {
    if (!nvml_->total_energy) throw Error("NVML library lacks nvmlDeviceGetTotalEnergyConsumption");
    const nvmlReturn_t rc = nvml_->total_energy(device_, &start_mj_);
    if (rc == kNvmlNotSupported)
      throw Error("GPU " + pci_bus_id + " has no energy counter (older than Volta)");
    if (rc != kNvmlSuccess)
      throw Error("GPU " + pci_bus_id + ": cannot read its energy: " + nvml_->Describe(rc));
  }
  // A failed read (rare: the driver busy resetting) keeps the last value.
  double joules() override {
    unsigned long long mj = 0;
    if (nvml_->total_energy(device_, &mj) == kNvmlSuccess && mj >= start_mj_)
      last_ = double(mj - start_mj_) * 1e-3;
    return last_;
  }
  std::string source() const override { return "nvml"; }
  std::string scope() const override { return "gpu " + bus_id_; }

 private:
  std::shared_ptr<Nvml> nvml_;
  nvmlDevice_t device_;
  std::string bus_id_;
  unsigned long long start_mj_ = 0;
  double last_ = 0;
};

// ---- RAPL --------------------------------------------------------------------------------

std::string PowercapDir() {
  const char* env = std::getenv("DLH_POWERCAP_DIR");
  return env && *env ? env : "/sys/class/powercap";
}

// Reads a file holding one non-negative integer (sysfs style).
bool ReadCounter(const std::filesystem::path& path, double* value) {
  std::ifstream in(path);
  unsigned long long v = 0;
  if (!(in >> v)) return false;
  *value = double(v);
  return true;
}

// "intel-rapl:N" with N all digits: a package zone (sub-zones are "intel-rapl:N:M"). AMD
// packages appear under the same name (the kernel's intel_rapl driver serves both).
bool IsPackageZone(const std::string& name) {
  const std::string prefix = "intel-rapl:";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return std::all_of(name.begin() + long(prefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

class RaplMeter : public EnergyMeter {
 public:
  RaplMeter(std::string dir, std::vector<EnergyZone> zones)
      : dir_(std::move(dir)), last_(std::move(zones)) {}
  // Adds up the differences between successive readings, so that each counter may wrap
  // once between two calls; an unreadable moment keeps the total as it was.
  double joules() override {
    std::vector<EnergyZone> now;
    if (!ReadEnergyZones(dir_, &now)) return total_;
    const double d = EnergyBetween(last_, now);
    if (d >= 0) {
      total_ += d;
      last_ = std::move(now);
    }
    return total_;
  }
  std::string source() const override { return "rapl"; }
  std::string scope() const override { return "cpu package(s) of this node"; }

 private:
  std::string dir_;
  std::vector<EnergyZone> last_;
  double total_ = 0;
};

}  // namespace

std::unique_ptr<EnergyMeter> MakeGpuEnergyMeter(const std::string& pci_bus_id,
                                                std::string* why_not) {
  std::string why;
  std::unique_ptr<EnergyMeter> meter;
  if (pci_bus_id.empty()) {
    why = "no GPU (the CPU engine)";
  } else if (std::shared_ptr<Nvml> nvml = LoadNvml(&why)) {
    try {
      meter = std::make_unique<GpuMeter>(std::move(nvml), pci_bus_id);
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (!meter && why_not) *why_not = why;
  return meter;
}

bool SampleGpu(const std::string& pci_bus_id, GpuSample* out) {
  *out = GpuSample();
  std::shared_ptr<Nvml> nvml = LoadNvml(nullptr);
  if (!nvml || pci_bus_id.empty()) return false;
  nvmlDevice_t device = nullptr;
  if (nvml->handle_by_pci(pci_bus_id.c_str(), &device) != kNvmlSuccess) return false;
  unsigned mw = 0;
  if (nvml->power_usage && nvml->power_usage(device, &mw) == kNvmlSuccess) out->power_w = mw * 1e-3;
  NvmlUtilization u{};
  if (nvml->utilization && nvml->utilization(device, &u) == kNvmlSuccess) out->util_percent = u.gpu;
  NvmlMemory m{};
  if (nvml->memory_info && nvml->memory_info(device, &m) == kNvmlSuccess)
    out->mem_used_gib = double(m.used) / double(1ull << 30);
  return out->power_w >= 0 || out->util_percent >= 0 || out->mem_used_gib >= 0;
}

std::unique_ptr<EnergyMeter> MakeCpuEnergyMeter(std::string* why_not) {
  const std::string dir = PowercapDir();
  std::vector<EnergyZone> zones;
  std::string why;
  if (!ReadEnergyZones(dir, &zones, &why)) {
    if (why_not) *why_not = "RAPL not readable: " + why;
    return nullptr;
  }
  return std::make_unique<RaplMeter>(dir, std::move(zones));
}

bool ReadEnergyZones(const std::string& powercap_dir, std::vector<EnergyZone>* zones,
                     std::string* why_not) {
  zones->clear();
  auto fail = [&](const std::string& why) {
    if (why_not) *why_not = why;
    zones->clear();
    return false;
  };
  std::error_code ec;
  std::filesystem::directory_iterator it(powercap_dir, ec), end;
  if (ec) return fail(powercap_dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return fail(powercap_dir + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (!IsPackageZone(name)) continue;
    EnergyZone z;
    z.name = name;
    double uj = 0;
    if (!ReadCounter(it->path() / "energy_uj", &uj))
      return fail((it->path() / "energy_uj").string() + ": cannot read (often root-only)");
    z.joules = uj * 1e-6;
    double range_uj = 0;
    if (ReadCounter(it->path() / "max_energy_range_uj", &range_uj)) z.max_joules = range_uj * 1e-6;
    zones->push_back(z);
  }
  if (zones->empty()) return fail("no package zone (intel-rapl:N) under " + powercap_dir);
  std::sort(zones->begin(), zones->end(),
            [](const EnergyZone& a, const EnergyZone& b) { return a.name < b.name; });
  return true;
}

double EnergyBetween(const std::vector<EnergyZone>& before, const std::vector<EnergyZone>& after) {
  if (before.empty() || before.size() != after.size()) return -1;
  double total = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].name != after[i].name) return -1;
    double d = after[i].joules - before[i].joules;
    if (d < 0) {  // the counter passed max_energy_range_uj and restarted at 0
      if (!(after[i].max_joules > 0)) return -1;
      d += after[i].max_joules;
      if (d < 0) return -1;
    }
    total += d;
  }
  return total;
}

bool ReadCpuEnergyJoules(double* joules) {
  std::vector<EnergyZone> zones;
  if (!ReadEnergyZones(PowercapDir(), &zones)) return false;
  double sum = 0;
  for (const EnergyZone& z : zones) sum += z.joules;
  *joules = sum;
  return true;
}

std::string DescribeJoules(double joules) {
  char text[64];
  if (joules < 1e3)
    std::snprintf(text, sizeof text, "%.0f J", joules);
  else if (joules < 1e6)
    std::snprintf(text, sizeof text, "%.1f kJ", joules / 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f MJ (%.2f kWh)", joules / 1e6, joules / 3.6e6);
  return text;
}

}  // namespace dlh

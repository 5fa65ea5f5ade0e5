// DLH — the energy of a program's run (see program_energy.hpp).
#include "launcher/run/program_energy.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "launcher/engine/gpu_assignment.hpp"

namespace dlh {
namespace {

// The few CUDA driver entry points used (cuda.h's, whose ABI has not changed since CUDA 4).
using CuResult = int;
using CuInit = CuResult (*)(unsigned);
using CuDeviceGetCount = CuResult (*)(int*);
using CuDeviceGet = CuResult (*)(int*, int);
using CuDeviceGetPciBusId = CuResult (*)(char*, int, int);
using CuGetErrorString = CuResult (*)(CuResult, const char**);

std::string CudaError(CuGetErrorString describe, CuResult rc) {
  const char* text = nullptr;
  if (describe && describe(rc, &text) == 0 && text) return text;
  return "CUDA driver error " + std::to_string(rc);
}

std::string OneLine(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace

std::string ProgramGpuBusId(int bound_device, int local_rank, std::string* why_not) {
  // Loaded once and kept: the driver does not expect to be unloaded once initialised.
  static void* const driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    *why_not = "the CUDA driver (libcuda.so.1) is not installed";
    return "";
  }
  const auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  const auto count_of = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  const auto get = reinterpret_cast<CuDeviceGet>(dlsym(driver, "cuDeviceGet"));
  const auto bus_of = reinterpret_cast<CuDeviceGetPciBusId>(dlsym(driver, "cuDeviceGetPCIBusId"));
  const auto describe = reinterpret_cast<CuGetErrorString>(dlsym(driver, "cuGetErrorString"));
  if (!init || !count_of || !get || !bus_of) {
    *why_not = "libcuda.so.1 lacks the driver's entry points";
    return "";
  }
  int count = 0;
  CuResult rc = init(0);
  if (rc == 0) rc = count_of(&count);
  if (rc != 0 || count <= 0) {
    *why_not = rc != 0 ? "CUDA: " + CudaError(describe, rc) : std::string("no GPU visible");
    return "";
  }
  const int index = GpuIndexFor(bound_device, local_rank, count);
  int device = 0;
  char bus[32] = "";
  rc = get(&device, index);
  if (rc == 0) rc = bus_of(bus, int(sizeof bus), device);
  if (rc != 0) {
    *why_not = "GPU " + std::to_string(index) + ": " + CudaError(describe, rc);
    return "";
  }
  return bus;
}

ProgramEnergy::ProgramEnergy(const std::string& gpu_bus_id, const std::string& gpu_why_not,
                             bool node_leader)
    : gpu_why_not_(gpu_why_not), cpu_("", node_leader), started_(std::chrono::steady_clock::now()) {
  if (!gpu_bus_id.empty()) gpu_ = std::make_unique<RunEnergy>(gpu_bus_id, false);
}

bool ProgramEnergy::UsesGpu(const std::string& device) const {
  if (device.rfind("cuda", 0) == 0) return true;
  if (device.rfind("cpu", 0) == 0) return false;
  return gpu_ != nullptr;
}

void ProgramEnergy::Poll() {
  if (gpu_) gpu_->poll();
  cpu_.poll();
}

void ProgramEnergy::AddTo(const std::string& device, nlohmann::json* record) const {
  if (!UsesGpu(device))
    cpu_.add_to(record);
  else if (gpu_)
    gpu_->add_to(record);
}

RankEnergy ProgramEnergy::Final(const std::string& device) {
  RankEnergy e;
  if (UsesGpu(device)) {
    if (!gpu_) {
      e.why = "the program runs on " + device + " but its GPU cannot be found: " + gpu_why_not_;
      return e;
    }
    e.joules = gpu_->final_joules();
    e.source = e.joules >= 0 ? gpu_->source() : "";
    e.why = gpu_->why_not();
    return e;
  }
  e.joules = cpu_.final_joules();
  e.source = e.joules >= 0 || e.joules == RunEnergy::kCovered ? "rapl" : "";
  e.why = cpu_.why_not();
  return e;
}

double ProgramEnergy::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

nlohmann::json ProgramEnergySummary(const std::vector<RankEnergy>& ranks, int64_t samples,
                                    double seconds) {
  std::vector<double> joules;
  std::vector<std::string> whys;
  std::string source;
  size_t first = 0;  // the first rank with a meter
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankEnergy& e = ranks[r];
    if (!e.source.empty() && !source.empty() && e.source != source)
      return {{"measured", false},
              {"why", "the ranks ran on different kinds of device (rank " + std::to_string(first) +
                          ": " + source + ", rank " + std::to_string(r) + ": " + e.source +
                          "): their meters make no one total"}};
    if (source.empty()) {
      source = e.source;
      first = r;
    }
    joules.push_back(e.joules);
    whys.push_back(e.why);
  }
  return EnergySummary(joules, whys, source, samples, seconds);
}

std::string RankEnergyText(const RankEnergy& e) {
  char joules[64];
  std::snprintf(joules, sizeof joules, "%.17g", e.joules);
  return std::string(joules) + "\n" + OneLine(e.source) + "\n" + OneLine(e.why);
}

RankEnergy RankEnergyFromText(const std::string& text) {
  RankEnergy e;
  std::istringstream in(text);
  std::string joules;
  std::getline(in, joules);
  std::getline(in, e.source);
  std::getline(in, e.why);
  e.joules = joules.empty() ? -1 : std::strtod(joules.c_str(), nullptr);
  return e;
}

}  // namespace dlh

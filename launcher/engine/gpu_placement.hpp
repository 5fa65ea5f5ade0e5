// DLH — each GPU rank on the CPUs nearest its GPU (issue 42, part 6).
//
// On a two-socket GPU node, a rank whose threads run on the other socket than its GPU copies
// every batch across the socket link, and its pinned staging buffers (first touched by those
// threads) land in the far memory. The kernel says which CPUs are near a PCI device:
// /sys/bus/pci/devices/DOMAIN:BUS:DEV.FN/local_cpulist (and numa_node). Before the GPU engine
// is built (its loader, BLAS and staging threads inherit the binding), a rank narrows its CPUs
// to those near its GPU, within what Slurm or mpirun already allowed it:
//   - already all near the GPU (srun --gpu-bind=closest, or a node of one socket): kept;
//   - some near: the rank keeps those;
//   - none near (the launcher bound it elsewhere on purpose): kept, and said;
//   - no NUMA information (a VM, numa_node -1 with every CPU local): kept.
// DLH_GPU_BIND=none leaves the binding alone.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; throws UsageError(`origin`: ...) for anything else.
std::vector<int> ParseCpuList(const std::string& text, const std::string& origin);
// {0, 1, 2, 3, 8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& cpus);

// "00000000:3B:00.0" or "0000:3b:00.0" (CUDA's forms) -> "0000:3b:00.0", sysfs's; "" when
// `bus_id` is not a PCI address.
std::string SysfsPciAddress(const std::string& bus_id);

struct GpuPlacement {
  bool bind = false;      // narrow the rank to `cpus`
  std::vector<int> cpus;  // the CPUs to keep (bind), sorted
  int numa_node = -1;     // the GPU's, -1 unknown
  bool far = false;       // every allowed CPU is far from the GPU (left alone: worth saying)
  std::string note;       // why nothing changes, or what did: for --verbose and the log
};

// What to do for a rank allowed `allowed` CPUs whose GPU has PCI bus id `bus_id`, reading
// `sysfs_pci` (normally /sys/bus/pci/devices). Never throws for the machine's sake: a device
// folder that is missing or unreadable gives no binding and a note.
GpuPlacement PlaceNearGpu(const std::string& bus_id, const std::vector<int>& allowed,
                          const std::string& sysfs_pci = "/sys/bus/pci/devices");

// The calling thread's allowed CPUs (sched_getaffinity).
std::vector<int> AllowedCpus();

// Binds the calling thread (threads it starts later inherit it) as PlaceNearGpu says, and
// returns what it did (bind false where binding failed, with the note saying why);
// DLH_GPU_BIND=none: nothing, an empty placement.
GpuPlacement ApplyGpuPlacement(const std::string& bus_id);

}  // namespace dlh

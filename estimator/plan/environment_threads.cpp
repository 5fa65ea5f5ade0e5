// DLH planning — the threads a CPU rank of the job will compute with (environment_threads.hpp).
#include "estimator/plan/environment_threads.hpp"

#include <cstdlib>
#include <sstream>

namespace dlh::plan {

EnvironmentThreadCount EnvironmentThreads(const PlanInputs& in) {
  const std::string name = "OPENBLAS_NUM_THREADS";
  std::string value, source;
  bool inherits = !in.user.export_set;
  if (in.user.export_set) {
    std::stringstream items(in.user.export_value);
    for (std::string item; std::getline(items, item, ',');) {
      if (item == "ALL" || item == name) inherits = true;
      if (item.rfind(name + "=", 0) == 0) {
        value = item.substr(name.size() + 1);
        source = "--export=..." + item;
      }
    }
  }
  if (value.empty() && inherits && !in.env_openblas_threads.empty()) {
    value = in.env_openblas_threads;
    source = name + "=" + value + " in your environment";
  }
  const int threads = std::atoi(value.c_str());
  if (!(threads > 0 && threads <= 4096)) return {};
  return {threads, source};
}

}  // namespace dlh::plan

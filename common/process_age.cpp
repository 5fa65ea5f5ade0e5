// DLH — the calling process's age (process_age.hpp).
#include "common/process_age.hpp"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace dlh {

double ProcessAgeSeconds() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count from its end.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  // Fields 3 (state) to 21, then 22: starttime, in clock ticks after boot.
  for (int i = 3; i < 22 && (fields >> field); ++i) {
  }
  unsigned long long start_ticks = 0;
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (!(fields >> start_ticks) || ticks_per_s <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0)
    return 0;
  const double age =
      double(now.tv_sec) + 1e-9 * double(now.tv_nsec) - double(start_ticks) / double(ticks_per_s);
  return age > 0 ? age : 0;
}

}  // namespace dlh

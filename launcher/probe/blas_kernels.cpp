// DLH — OpenBLAS's kernels for the CPU they run on (see blas_kernels.hpp).
#include "launcher/probe/blas_kernels.hpp"

#include <cblas.h>
#include <errno.h>  // program_invocation_short_name
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <system_error>

#include "common/exit_codes.hpp"

namespace dlh {
namespace {

constexpr char kCoreType[] = "OPENBLAS_CORETYPE";
// Set only between the two runs of one program: the kernels OpenBLAS took, and the process
// that asked (a program this one starts has another pid and decides for itself).
constexpr char kTookEnv[] = "DLH_BLAS_KERNELS_TOOK";
constexpr char kPidEnv[] = "DLH_BLAS_KERNELS_PID";
// And OPENBLAS_CORETYPE as the user had it ("=" and its value; absent where it was unset).
constexpr char kUserEnv[] = "DLH_BLAS_KERNELS_USER";

std::string g_note;

std::string CoreName() {
  const char* core = openblas_get_corename();
  std::string s = core ? core : "";
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The best OpenBLAS family the CPU's instruction sets (as the OS enables them: libgcc's
// checks read XCR0) carry; empty where it has nothing past what Prescott's kernels use.
std::string FamilyTheCpuSupports() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512cd");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

// OPENBLAS_CORETYPE as the user had it (USER: its value, or null where it was unset), and none
// of the variables that carried the choice between the two runs.
void RestoreUserEnvironment(const char* user) {
  if (user)
    setenv(kCoreType, user, 1);
  else
    unsetenv(kCoreType);
  for (const char* name : {kTookEnv, kPidEnv, kUserEnv}) unsetenv(name);
}

}  // namespace

void UseBlasKernelsTheCpuSupports(char** argv) {
  const char* took = std::getenv(kTookEnv);
  const char* pid = std::getenv(kPidEnv);
  if (took && pid && std::atol(pid) == long(getpid())) {
    // The second run: OPENBLAS_CORETYPE has done its work at OpenBLAS's load.
    const std::string asked = std::getenv(kCoreType) ? std::getenv(kCoreType) : "";
    const std::string runs = CoreName();
    const char* policy = std::getenv("DLH_BLAS_KERNELS");
    const bool forced = policy && std::string(policy) == "cpu";
    g_note = "OpenBLAS's " + runs + " kernels, not the " + took + " ones " +
             (forced ? std::string(std::getenv(kUserEnv) ? "OPENBLAS_CORETYPE named" : "it chose")
                     : "it took for this CPU, which it does not know") +
             " (DLH_BLAS_KERNELS=" +
             (forced ? "cpu: the kernels the CPU's instruction sets carry, " + asked
                     : "auto: the CPU's instruction sets carry " + asked +
                           "; DLH_BLAS_KERNELS=openblas keeps OpenBLAS's choice") +
             (runs == asked ? "" : ", which this OpenBLAS does not have") + ")";
    // The user's environment again, for whatever this program starts; the value is after the
    // '=' that tells set from unset (copied: restoring unsets the variable that holds it).
    const char* user = std::getenv(kUserEnv);
    const std::string value = user ? user + 1 : "";
    RestoreUserEnvironment(user ? value.c_str() : nullptr);
    return;
  }
  const char* policy_env = std::getenv("DLH_BLAS_KERNELS");
  const std::string policy = policy_env ? policy_env : "auto";
  if (policy != "auto" && policy != "openblas" && policy != "cpu") {
    std::fprintf(stderr, "%s: DLH_BLAS_KERNELS: must be auto, openblas or cpu, got '%s'\n",
                 program_invocation_short_name, policy.c_str());
    std::exit(kExitBadInput);
  }
  if (policy == "openblas") return;
  const bool user_set = std::getenv(kCoreType) != nullptr;
  const std::string user = user_set ? std::getenv(kCoreType) : "";
  const std::string core = CoreName();
  if (policy != "cpu") {
    if (user_set) return;            // the user's choice, even an empty one
    if (core != "Prescott") return;  // a CPU OpenBLAS knows, or not an x86 build
  }
  const std::string family = FamilyTheCpuSupports();
  if (family.empty() || family == core) return;
  if (user_set) setenv(kUserEnv, ("=" + user).c_str(), 1);
  setenv(kCoreType, family.c_str(), 1);
  setenv(kTookEnv, core.c_str(), 1);
  setenv(kPidEnv, std::to_string(long(getpid())).c_str(), 1);
  // The binary's own path, not /proc/self/exe: exec names the process after the path's last
  // part ("exe" would be what ps, pgrep and top show, and what Slurm's and a user's tools
  // look for). A binary replaced on disk since it started reads "... (deleted)" and fails.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) execv(self.c_str(), argv);
  // Not run again (no /proc, the binary replaced on disk): OpenBLAS's own choice stands.
  RestoreUserEnvironment(user_set ? user.c_str() : nullptr);
}

std::string BlasKernelsNote() { return g_note; }

}  // namespace dlh

// DLH — the CPU time of the calling thread or of the whole process, user and system apart.
//
// A background checkpoint write does not block the training loop, but where every core
// trains, the CPU its threads use is taken from training all the same: the write's CPU
// seconds, not its wall seconds, are what it costs the run.
#pragma once

namespace dlh {

struct CpuSeconds {
  double user = 0;
  double system = 0;  // the kernel's work for the thread: copies into the page cache, fsync
  double total() const { return user + system; }
  CpuSeconds& operator+=(const CpuSeconds& o) {
    user += o.user;
    system += o.system;
    return *this;
  }
};
CpuSeconds operator-(const CpuSeconds& a, const CpuSeconds& b);

// getrusage(RUSAGE_THREAD): this thread's CPU time since it started.
CpuSeconds ThisThreadCpu();
// getrusage(RUSAGE_SELF): every thread of this process (OpenBLAS's, the loader's, the
// checkpoint writer's), the ones that ended included.
CpuSeconds ThisProcessCpu();

}  // namespace dlh

// DLH — how long ago the calling process started, as the kernel counts it.
//
// A job's time limit covers the process from its start, not from the point where the
// launcher's own clock would begin (after the loader, MPI_Init and the option parsing): the
// launcher's whole-job time starts at the process's start so that what it records is what
// the job paid.
#pragma once

namespace dlh {

// Seconds since this process started (/proc/self/stat's starttime against CLOCK_BOOTTIME,
// the kernel's clock-tick resolution); 0 where the kernel does not say, so that a caller's
// clock starts where it is asked rather than failing.
double ProcessAgeSeconds();

}  // namespace dlh

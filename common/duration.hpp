// DLH — durations as users write them: "3h", "90m", "2h30m", "45s", "1d12h", a plain
// number of seconds ("5400"), or Slurm's time formats ("MM", "MM:SS", "HH:MM:SS",
// "D-HH", "D-HH:MM", "D-HH:MM:SS"; a bare number in Slurm's format means minutes, so
// Slurm-style parsing is only used where the text contains ':' or '-').
#pragma once

#include <string>

namespace dlh {

// Seconds in `text`; throws UsageError("<what>: ...") for anything else, including zero or
// negative durations.
double ParseDuration(const std::string& text, const std::string& what);

// "2h05m", "12m30s", "45s", "3d04h".
std::string HumanDuration(double seconds);

}  // namespace dlh

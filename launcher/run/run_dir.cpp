// DLH — the run folder of `dlh-launch run` (see run_dir.hpp).
#include "launcher/run/run_dir.hpp"

#include <filesystem>
#include <system_error>

#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dlh {
namespace {

bool IsInterpreter(const std::string& name) {
  if (name.rfind("python", 0) == 0) return true;  // python, python3, python3.11
  for (const char* known :
       {"bash", "sh", "dash", "zsh", "ksh", "perl", "ruby", "Rscript", "julia", "node", "lua"})
    if (name == known) return true;
  return false;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string DefaultRunName(const std::vector<std::string>& command) {
  const std::string program = fs::path(command.at(0)).filename().string();
  std::string name = program;
  if (IsInterpreter(program)) {
    for (size_t i = 1; i < command.size(); ++i) {
      const std::string& arg = command[i];
      if (arg == "-m" && i + 1 < command.size()) return command[i + 1];  // python -m pkg.mod
      if (arg == "-c") break;  // the program is on the command line: no script to name
      if (arg.empty() || arg[0] == '-') continue;
      name = fs::path(arg).filename().string();
      break;
    }
  }
  const std::string stem = fs::path(name).stem().string();
  return stem.empty() || stem == "." || stem == ".." ? "run" : stem;
}

std::string NewestCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error(dir + ": cannot read: " + ec.message());
  std::string best;
  fs::file_time_type best_time{};
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || EndsWith(name, ".tmp") || EndsWith(name, ".partial"))
      continue;
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;  // gone meanwhile, a folder, a socket
    const fs::file_time_type time = it->last_write_time(file_ec);
    if (file_ec) continue;
    if (best.empty() || time > best_time || (time == best_time && name > best)) {
      best = name;
      best_time = time;
    }
  }
  if (ec) throw Error(dir + ": cannot read: " + ec.message());
  return best.empty() ? "" : (fs::path(dir) / best).string();
}

}  // namespace dlh

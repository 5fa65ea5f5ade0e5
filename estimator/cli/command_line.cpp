// DLH — dlh-estimate's command-line helpers (see command_line.hpp).
#include "estimator/cli/command_line.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "common/cli.hpp"
#include "common/error.hpp"

namespace po = boost::program_options;

namespace dlh::cli {

bool Parse(const std::string& command, const std::vector<std::string>& args,
           const po::options_description& desc, const std::vector<std::string>& positional,
           po::variables_map& vm) {
  SubcommandSyntax syntax;
  for (const auto& name : positional) syntax.positional.push_back({name, "missing " + name});
  syntax.prefix = command + ": ";
  syntax.suffix = " (see dlh-estimate " + command + " --help)";
  if (ParseSubcommand(args, desc, syntax, &vm) == ParseResult::kStop) {
    std::cout << desc << "\n";
    return false;
  }
  return true;
}

std::string Str(const po::variables_map& vm, const char* name) {
  return vm[name].as<std::string>();
}

void WriteJson(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }

std::string Printf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string ClusterPath(const boost::program_options::variables_map& vm, const char* command) {
  if (vm.count("cluster")) return Str(vm, "cluster");
  if (const char* env = std::getenv("DLH_CLUSTER"); env && *env) return env;
  throw UsageError(std::string(command) +
                   ": no cluster description: pass --cluster FILE or set DLH_CLUSTER");
}

}  // namespace dlh::cli

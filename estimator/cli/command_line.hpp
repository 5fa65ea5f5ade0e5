// DLH — dlh-estimate's command-line helpers, shared by the command files of estimator/cli/.
#pragma once

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh::cli {

// Parses `args` against `desc` (+ positional names, each required); prints help and returns
// false on --help.
bool Parse(const std::string& command, const std::vector<std::string>& args,
           const boost::program_options::options_description& desc,
           const std::vector<std::string>& positional, boost::program_options::variables_map& vm);

// The string value of option `name`.
std::string Str(const boost::program_options::variables_map& vm, const char* name);

// The cluster description: --cluster, else $DLH_CLUSTER; throws UsageError naming `command`
// when neither is given.
std::string ClusterPath(const boost::program_options::variables_map& vm, const char* command);

// `j` on stdout, indented by 2.
void WriteJson(const nlohmann::json& j);

// printf into a string (at most 511 characters).
std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dlh::cli

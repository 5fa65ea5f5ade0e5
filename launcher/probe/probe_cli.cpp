// DLH — `probe`, the same command in dlh-launch and dlh-estimate (see probe_cli.hpp).
#include "launcher/probe/probe_cli.hpp"

#include <boost/program_options.hpp>
#include <iostream>

#include "common/cli.hpp"
#include "common/exit_codes.hpp"
#include "launcher/probe/host_probe.hpp"

namespace po = boost::program_options;

namespace dlh {

int ProbeCommand(const std::vector<std::string>& args, const std::string& tool) {
  ProbeOptions o;
  std::string device = "cpu";
  po::options_description d(tool + " probe: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("device", po::value<std::string>(&device)->default_value("cpu"), "cpu, cuda or cuda:N")
    ("threads", po::value<int>(&o.threads)->default_value(0),
        "CPU: engine threads to measure up to (0: the cores of the affinity mask)")
    ("seconds", po::value<double>(&o.budget_s)->default_value(3),
        "about how long the probe runs (0.1 to 600)");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "probe: ";
  syntax.suffix = " (see " + tool + " probe --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  std::cout << ProbeDevice(device, o).dump(2) << "\n";
  return kExitOk;
}

}  // namespace dlh

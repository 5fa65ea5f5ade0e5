// DLH — `dlh-estimate cluster --from-slurm` (see cluster_cmd.hpp).
#include "estimator/cli/cluster_cmd.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/cluster/cluster_from_slurm.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

constexpr int kSinfoTimeoutS = 30;
constexpr size_t kMaxSinfoBytes = 64u << 20;

// Output of `command` (stdout and stderr together); throws Error when it does not exit 0.
std::string RunCommand(const std::string& command, const std::string& what) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) throw Error(what + ": cannot start: " + std::string(std::strerror(errno)));
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
    if (out.size() < kMaxSinfoBytes) out.append(buf, n);
  }
  const int status = pclose(p);
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  std::string first = out.substr(0, out.find('\n'));
  std::string why;
  if (status == -1)
    why = "cannot wait for it";
  else if (WIFEXITED(status) && WEXITSTATUS(status) == 124)
    why = "no answer in " + std::to_string(kSinfoTimeoutS) + " s";
  else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    why = "not found";
  else if (WIFEXITED(status))
    why = "exit status " + std::to_string(WEXITSTATUS(status));
  else
    why = "killed by signal " + std::to_string(WTERMSIG(status));
  throw Error(what + " failed (" + why + ")" + (first.empty() ? "" : ": " + first));
}

std::string Source(const std::string& sinfo_file) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  if (!sinfo_file.empty()) return "sinfo output in " + sinfo_file + " (" + when + ")";
  return "sinfo on " + std::string(host) + " at " + when;
}

}  // namespace

int ClusterCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate cluster --from-slurm: options");
  const std::string sinfo_help = "read this `sinfo -h -N -O '" + std::string(kSinfoNodeFormat) +
                                 "'` output instead of running sinfo";
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("from-slurm", "draft the description from live Slurm state (sinfo)")
    ("out", po::value<std::string>(), "file to write (atomically; default: stdout)")
    ("name", po::value<std::string>()->default_value("slurm"), "the cluster's name")
    ("allow-placeholders", "write GPU types without datasheet figures with PLACEHOLDER figures "
        "(default: leave them out, name them, exit 3)")
    ("cpu-calibration", po::value<std::string>(), "describe the nodes without GPUs as CPU node "
        "types timed by this calibration (dlh-estimate calibrate on one of them), written as "
        "given")
    ("sinfo", po::value<std::string>(), sinfo_help.c_str());
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "cluster: ";
  syntax.suffix = " (see dlh-estimate cluster --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  if (!vm.count("from-slurm"))
    throw UsageError("cluster: say where from: --from-slurm (see dlh-estimate cluster --help)");
  ClusterDraftOptions options;
  options.name = vm["name"].as<std::string>();
  if (options.name.empty()) throw UsageError("cluster: --name: must not be empty");
  options.allow_placeholders = vm.count("allow-placeholders") > 0;
  if (vm.count("cpu-calibration")) {
    options.cpu_calibration = vm["cpu-calibration"].as<std::string>();
    if (options.cpu_calibration.empty())
      throw UsageError("cluster: --cpu-calibration: needs a calibration file");
  }

  std::string text;
  const std::string sinfo_file = vm.count("sinfo") ? vm["sinfo"].as<std::string>() : "";
  if (!sinfo_file.empty()) {
    std::string why;
    if (!ReadFileText(sinfo_file, kMaxSinfoBytes, &text, &why))
      throw UsageError("cluster: --sinfo: " + sinfo_file + ": cannot read: " + why);
  } else {
    text = RunCommand("timeout " + std::to_string(kSinfoTimeoutS) + " sinfo -h -N -O '" +
                          kSinfoNodeFormat + "' 2>&1",
                      "sinfo");
  }
  options.source = Source(sinfo_file);
  const std::vector<SinfoNode> nodes = NodesFromSinfo(text);
  if (nodes.empty()) throw Error("sinfo listed no nodes");
  ClusterDraft draft = DraftClusterFromNodes(nodes, options);
  for (const std::string& line : draft.problems)
    std::fprintf(stderr, "dlh-estimate: %s\n", line.c_str());
  for (const std::string& line : draft.notes)
    std::fprintf(stderr, "dlh-estimate: note: %s\n", line.c_str());
  if (draft.description.is_null()) {
    std::fprintf(stderr,
                 "dlh-estimate: no GPU node (nor, without --cpu-calibration, CPU node) could "
                 "be described from %zu nodes; nothing written\n",
                 nodes.size());
    return kExitIncomplete;
  }
  const std::string json_text = draft.description.dump(2) + "\n";
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  // What is written must be what recommend and the plugin accept.
  ParseCluster(json_text, out.empty() ? "(stdout)" : out, "");
  if (out.empty())
    std::fputs(json_text.c_str(), stdout);
  else
    WriteFileAtomically(out, json_text);
  std::fprintf(stderr, "dlh-estimate: %s: %d node types, %d GPU types, %d nodes%s%s\n",
               out.empty() ? "(stdout)" : out.c_str(), draft.node_types, draft.gpu_types,
               draft.nodes,
               draft.cpu_node_types == 0
                   ? ""
                   : (", " + std::to_string(draft.cpu_node_types) + " CPU node types of " +
                      std::to_string(draft.cpu_nodes) + " nodes")
                         .c_str(),
               draft.incomplete ? " (incomplete: see above)"
                                : "; confirm the figures marked in "
                                  "the descriptions");
  return draft.incomplete ? kExitIncomplete : kExitOk;
}

}  // namespace dlh

// dlh-report — what a run did, as a page and live (docs/reference/dlh-report.md).
//
//   dlh-report RUN_DIR [--out FILE]           the HTML report (default RUN_DIR/report.html)
//   dlh-report RUN_DIR --watch [--interval S] rewrite it as metrics arrive, until the run ends
//   dlh-report RUN_DIR --follow               the headline in the terminal, until the run ends
//   dlh-report RUN_DIR --serve PORT           serve it over HTTP (for an ssh tunnel)
//
// Exit status (common/exit_codes.hpp): 0 success, 1 runtime error (cannot write, cannot
// listen), 2 bad command line or a folder that holds no run.
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/report/headline.hpp"
#include "launcher/report/live.hpp"
#include "launcher/report/report_html.hpp"
#include "launcher/report/serve.hpp"

namespace po = boost::program_options;

namespace dlh::report {
namespace {

const char* const kSynopsis =
    "usage: dlh-report RUN_DIR [--out FILE] [--watch | --follow | --serve PORT] [OPTIONS]\n"
    "\n"
    "Shows what a dlh-launch run did, from its run folder (metrics.jsonl, summary.json,\n"
    "heartbeat/, checkpoints/): one self-contained HTML page with its charts (works offline),\n"
    "a terminal view of a running job, or the page served for a browser.\n";

// A folder for the output that does not exist is the user's mistake, caught before work.
void CheckOutFolder(const std::string& out) {
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw UsageError("--out " + out + ": no folder " + parent.string());
}

int Main(int argc, char** argv) {
  LiveOptions live;
  std::string out, bind = "127.0.0.1";
  int serve_port = -1;
  po::options_description d("options");
  d.add_options()("help,h", "show this help and exit")(
      "out,o", po::value(&out), "the report's path (default RUN_DIR/report.html)")(
      "watch", po::bool_switch(),
      "rewrite the report every --interval seconds until the run ends; "
      "the page reloads itself meanwhile")(
      "follow", po::bool_switch(),
      "print the run's headline every --interval seconds until it ends")(
      "serve", po::value(&serve_port),
      "serve the report at http://BIND:PORT/, rebuilt for each "
      "request (0: any free port); until stopped")(
      "bind", po::value(&bind),
      "the address --serve listens on (default 127.0.0.1: reach it "
      "through ssh -L PORT:localhost:PORT)")("interval", po::value(&live.interval_s),
                                             "seconds between updates (default 5)")(
      "refresh", po::value(&live.refresh_s),
      "seconds between the page's own reloads while the run "
      "goes on, with --watch and --serve (default 10)");
  std::vector<std::string> args(argv + 1, argv + argc);
  SubcommandSyntax syntax;
  syntax.positional = {{"run-dir", "missing RUN_DIR, the run folder (dlh-launch train --run-dir)"}};
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << kSynopsis << "\n" << d;
    return kExitOk;
  }
  live.run_dir = vm["run-dir"].as<std::string>();
  const bool watch = vm["watch"].as<bool>(), follow = vm["follow"].as<bool>();
  if (int(watch) + int(follow) + int(serve_port >= 0) > 1)
    throw UsageError("--watch, --follow and --serve: one at a time");
  if (vm.count("serve") && (serve_port < 0 || serve_port > 65535))
    throw UsageError("--serve " + std::to_string(serve_port) + ": not a port (0 to 65535)");
  if (!(live.interval_s >= 0.1) || !std::isfinite(live.interval_s))
    throw UsageError("--interval: at least 0.1 seconds");
  if (live.refresh_s < 1) throw UsageError("--refresh: at least 1 second");
  if (out.empty()) out = (std::filesystem::path(live.run_dir) / "report.html").string();
  live.out = out;

  if (follow) return Follow(live);
  if (serve_port >= 0) {
    try {
      ServeOptions so;
      so.address = bind;
      so.port = serve_port;
      so.token = NewServeToken();
      Serve(
          so,
          [&] {
            ReportOptions ro;
            ro.now = Now();
            ro.refresh_s = live.refresh_s;
            return ReportHtml(LoadRun(live.run_dir), ro);
          },
          [&](int port) {
            // The token goes to this terminal only (never argv): whoever has the URL reads
            // the report.
            const std::string query = "/?token=" + so.token;
            std::cout << "dlh-report: serving the report of " << live.run_dir << " at http://"
                      << bind << ":" << port << query << " (private: the token is needed; "
                      << "from a laptop: ssh -L " << port << ":localhost:" << port
                      << " THIS_HOST, then open http://localhost:" << port << query << ")"
                      << std::endl;
          });
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {  // cannot listen: a runtime failure, not bad input
      std::cerr << "dlh-report: --serve: " << e.what() << "\n";
      return kExitFailure;
    }
    return kExitOk;
  }
  if (watch) {
    CheckOutFolder(out);
    std::cout << "dlh-report: writing " << out << " until the run ends" << std::endl;
    return Watch(live);
  }
  const RunData run = LoadRun(live.run_dir);  // a folder without a run: bad input, below
  CheckOutFolder(out);
  ReportOptions ro;
  ro.now = Now();
  WriteFileAtomically(out, ReportHtml(run, ro));
  const Headline h = HeadlineOf(run, ro.now);
  std::cout << "dlh-report: wrote " << out << " (" << RunStateName(h.state) << ", step " << h.step
            << (run.problems.empty()
                    ? ""
                    : ", " + std::to_string(run.problems.size()) + " problems noted")
            << ")\n";
  for (const std::string& p : run.problems) std::cerr << "dlh-report: note: " << p << "\n";
  return kExitOk;
}

}  // namespace
}  // namespace dlh::report

int main(int argc, char** argv) {
  try {
    return dlh::report::Main(argc, argv);
  } catch (const dlh::UsageError& e) {
    std::cerr << "dlh-report: " << e.what() << " (see dlh-report --help)\n";
    return dlh::kExitBadInput;
  } catch (const dlh::IoError& e) {
    std::cerr << "dlh-report: " << e.what() << "\n";
    return dlh::kExitFailure;
  } catch (const dlh::Error& e) {  // LoadRun: the folder holds no run
    std::cerr << "dlh-report: " << e.what() << "\n";
    return dlh::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "dlh-report: " << e.what() << "\n";
    return dlh::kExitFailure;
  }
}

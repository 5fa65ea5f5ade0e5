// DLH — subcommand parsing (see cli.hpp).
#include "common/cli.hpp"

#include <unistd.h>

#include <filesystem>
#include <sstream>

namespace po = boost::program_options;

namespace dlh {

ParseResult ParseSubcommand(const std::vector<std::string>& args,
                            const po::options_description& options, const SubcommandSyntax& syntax,
                            po::variables_map* vm) {
  auto usage_error = [&](const std::string& problem) {
    return UsageError(syntax.prefix + problem + syntax.suffix);
  };
  // Positional arguments are options too: hidden ones unless `options` shows them (help
  // prints `options` alone).
  po::options_description hidden;
  po::positional_options_description positional;
  for (const auto& p : syntax.positional) {
    if (!options.find_nothrow(p.name, false))
      hidden.add_options()(p.name.c_str(), po::value<std::string>());
    positional.add(p.name.c_str(), 1);
  }
  po::options_description all;
  all.add(options).add(hidden);
  // notify() checks required options and stores values into the bound variables.
  const auto notify = [&] {
    try {
      po::notify(*vm);
    } catch (const po::error& e) {
      throw usage_error(e.what());
    }
  };
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    // Without a positional description Program_options drops words that are not options.
    if (!syntax.ignore_extra_arguments) parser.positional(positional);
    po::store(parser.run(), *vm);
  } catch (const po::error& e) {
    throw usage_error(e.what());
  }
  // --help first: a user asking for help has not yet given the required options.
  if (vm->count("help")) return ParseResult::kStop;
  if (syntax.precheck) syntax.precheck(*vm);
  notify();
  for (const auto& p : syntax.positional)
    if (!p.missing.empty() && !vm->count(p.name)) throw usage_error(p.missing);
  return ParseResult::kRun;
}

std::string HelpNumber(double value) {
  std::ostringstream text;  // six significant digits, as printf's %g: what a user would type
  text << value;
  return text.str();
}

void CheckOutputFolder(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw UsageError(option + ": needs a file name");
  if (fs::is_directory(path, ec))
    throw UsageError(option + ": " + path + ": is a folder, expected a file name");
  const fs::path folder = fs::path(path).parent_path();
  const std::string where = folder.empty() ? "." : folder.string();
  if (!fs::is_directory(where, ec))
    throw UsageError(option + ": " + path + ": folder " + where + " does not exist");
  if (::access(where.c_str(), W_OK | X_OK) != 0)
    throw UsageError(option + ": " + path + ": folder " + where + " is not writable");
}

}  // namespace dlh

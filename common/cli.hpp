// DLH — one parser for the subcommands of every DLH tool (dlh-launch train, dlh-data
// synthetic, dlh-estimate recommend, ...), on Boost.Program_options.
//
// The tools differ only in what they print and how they word a problem; the parsing (hidden
// positional options, when --help wins, which errors become UsageError) is here once.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {

// Everything about a subcommand's command line except its options.
struct SubcommandSyntax {
  struct Positional {
    // The option it fills. A name `options` does not define becomes a hidden std::string
    // option (read it as vm[name].as<std::string>(); `--name VALUE` works too).
    std::string name;
    // The problem reported when it is absent ("missing SPEC"); empty: it may be absent.
    std::string missing;
  };
  std::vector<Positional> positional;  // in order, one value each

  // Every problem found here is thrown as UsageError(prefix + problem + suffix), e.g.
  // prefix "recommend: " and suffix " (see dlh-estimate recommend --help)". A tool whose
  // main decorates every UsageError itself leaves both empty.
  std::string prefix, suffix;

  // Runs after --help was handled and before required options are checked or values
  // stored: for messages clearer than Program_options' own ("missing FILE, the data set to
  // inspect" rather than "the option '--file' is required but missing"). What it throws
  // propagates unchanged.
  std::function<void(const boost::program_options::variables_map&)> precheck;

  // A habit of dlh-launch's bench commands, kept so that moving them here changed nothing:
  // they ignore words that are not options (and have no positional arguments).
  bool ignore_extra_arguments = false;
};

enum class ParseResult {
  kRun,   // parsed and checked: run the command
  kStop,  // --help was given (`options` must define "help"): print help, exit 0
};

// Parses `args` (the arguments after the subcommand's name) against `options`, filling
// `vm` and the variables bound to the options. Throws UsageError (see above) for an
// unknown or malformed option, a missing required option or positional argument, or too
// many positional arguments (unless ignore_extra_arguments).
ParseResult ParseSubcommand(const std::vector<std::string>& args,
                            const boost::program_options::options_description& options,
                            const SubcommandSyntax& syntax,
                            boost::program_options::variables_map* vm);

// A floating-point default as --help shows it: "0.1". Program_options writes a double's
// default with every digit it holds ("(=0.10000000000000001)"), so a double option passes
// this as default_value's text: ->default_value(0.1, HelpNumber(0.1)).
std::string HelpNumber(double value);

// The folder an output file will be written into must exist and be writable, and the path
// must not be a folder: checked when the command line is read, before the command's work (a
// calibration sweep, a validation, a replay), so that a typo in a path costs seconds, not
// the minutes of GPU or CPU time whose result it would have thrown away. Throws UsageError
// "OPTION: PATH: why".
void CheckOutputFolder(const std::string& path, const std::string& option);

}  // namespace dlh

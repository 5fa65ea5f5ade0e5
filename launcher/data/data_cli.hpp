// DLH — what every dlh-data command shares: parsing its options and numbers, and the
// one-line summary of a data set file just written.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/spec.hpp"

namespace dlh {

std::string ShapeText(const Shape3& s);  // "1x28x28"

// Parses a whole decimal number within [lo, hi]; `what` names the option in messages.
int64_t ParseInt(const std::string& text, const std::string& what, int64_t lo, int64_t hi);
// A non-negative whole number ("-1" is refused, not wrapped).
uint64_t ParseSeed(const std::string& text);
// "CxHxW", each 1 to 65536, at most 2^26 values in all. `what` names the option.
Shape3 ParseShape(const std::string& text, const std::string& what = "--shape");
// "HxW", each 1 to 65536.
void ParseSize(const std::string& text, const std::string& what, int* height, int* width);

// Parses a subcommand's arguments. Returns false when --help was given (and printed).
// Problems are thrown bare: main adds the command and the --help hint to every UsageError.
bool ParseArgs(const std::string& command, const std::string& synopsis,
               const std::vector<std::string>& args,
               boost::program_options::options_description& options, SubcommandSyntax syntax,
               boost::program_options::variables_map& vm);

// "wrote FILE: N train, M test, CxHxW, K classes", read back from the file just written.
void PrintSummary(const std::string& path);

}  // namespace dlh

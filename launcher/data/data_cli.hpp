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

// A file or folder an import reads, for CheckImportOutput: `option` names it in messages
// ("--train-labels"; empty for the positional FILE). depth 0: `path` itself is read; 2: the
// files in its sub-folders are (an image folder: ROOT/CLASS/IMAGE).
struct ImportInput {
  std::string path;
  std::string option;
  int depth = 0;
};

// Checked before an import reads anything, so that nothing is read or written in vain: --out
// is not a folder and its folder exists and is writable (CheckOutputFolder), and --out is not
// one of the inputs, which the write (renamed onto --out) would replace. Inputs are compared
// by device and inode: another path or a symbolic link to the same file counts. Throws Error
// (exit 1, as the write's own failure) "COMMAND: --out OUT is the input file (write to another
// file)".
void CheckImportOutput(const std::string& command, const std::string& out,
                       const std::vector<ImportInput>& inputs);

// "wrote FILE: N train, M test, CxHxW, K classes", read back from the file just written.
void PrintSummary(const std::string& path);

}  // namespace dlh

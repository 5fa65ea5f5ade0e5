// DLH — what every dlh-data command shares (see data_cli.hpp).
#include "launcher/data/data_cli.hpp"

#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/error.hpp"
#include "launcher/storage/h5.hpp"

namespace po = boost::program_options;

namespace dlh {

std::string ShapeText(const Shape3& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

int64_t ParseInt(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError(what + ": expected a whole number, got '" + text + "'");
  if (v < lo || v > hi)
    throw UsageError(what + ": " + text + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

uint64_t ParseSeed(const std::string& text) {
  // std::stoull accepts "-1" and wraps it; a seed that silently becomes 2^64-1 is a trap.
  size_t used = 0;
  unsigned long long v = 0;
  if (!text.empty() && text[0] != '-' && text[0] != '+') {
    try {
      v = std::stoull(text, &used, 10);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  if (used == 0 || used != text.size())
    throw UsageError("--seed: expected a non-negative whole number, got '" + text + "'");
  return v;
}

Shape3 ParseShape(const std::string& text, const std::string& what) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == 'x' || c == 'X')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  if (parts.size() != 3)
    throw UsageError(what + ": expected CxHxW (e.g. 3x32x32), got '" + text + "'");
  Shape3 s;
  s.channels = int(ParseInt(parts[0], what + " channels", 1, 1 << 16));
  s.height = int(ParseInt(parts[1], what + " height", 1, 1 << 16));
  s.width = int(ParseInt(parts[2], what + " width", 1, 1 << 16));
  if (s.elements() > (int64_t(1) << 26))
    throw UsageError(what + ": " + text + " is too large (more than 2^26 values per sample)");
  return s;
}

void ParseSize(const std::string& text, const std::string& what, int* height, int* width) {
  const size_t x = text.find_first_of("xX");
  if (x == std::string::npos || text.find_first_of("xX", x + 1) != std::string::npos)
    throw UsageError(what + ": expected HxW (e.g. 32x32), got '" + text + "'");
  *height = int(ParseInt(text.substr(0, x), what + " height", 1, 1 << 16));
  *width = int(ParseInt(text.substr(x + 1), what + " width", 1, 1 << 16));
}

bool ParseArgs(const std::string& command, const std::string& synopsis,
               const std::vector<std::string>& args, po::options_description& options,
               SubcommandSyntax syntax, po::variables_map& vm) {
  options.add_options()("help,h", "show this help and exit");
  if (ParseSubcommand(args, options, syntax, &vm) == ParseResult::kStop) {
    std::cout << "usage: dlh-data " << command << " " << synopsis << "\n\n" << options;
    return false;
  }
  return true;
}

void CheckImportOutput(const std::string& command, const std::string& out,
                       const std::vector<ImportInput>& inputs) {
  try {
    CheckOutputFolder(out, "--out");
  } catch (const UsageError& e) {
    throw Error(command + ": " + e.what());
  }
  struct stat o;
  if (::stat(out.c_str(), &o) != 0) return;  // not there yet: no input it could be
  // Whether `a` (stat'ed) is the file `b` names (links followed).
  auto same = [](const struct stat& a, const std::string& b) {
    struct stat y;
    return ::stat(b.c_str(), &y) == 0 && a.st_dev == y.st_dev && a.st_ino == y.st_ino;
  };
  for (const ImportInput& in : inputs) {
    std::string what;
    if (in.depth == 0) {
      if (!same(o, in.path)) continue;
      what = "the input " + (in.option.empty() ? "file" : in.option);
      if (!in.option.empty() || in.path != out) what += " " + in.path;
    } else {
      // The folder `depth` levels above the file --out is (links resolved), if it has so many.
      std::error_code ec;
      std::filesystem::path up = std::filesystem::canonical(out, ec);
      int climbed = 0;
      for (; climbed < in.depth && !ec && up.has_relative_path(); ++climbed) up = up.parent_path();
      struct stat folder;
      if (ec || climbed != in.depth || ::stat(up.c_str(), &folder) != 0 || !same(folder, in.path))
        continue;
      what = "an image of the " + (in.option.empty() ? "input" : in.option) + " folder " + in.path;
    }
    throw Error(command + ": --out " + out + " is " + what + " (write to another file)");
  }
}

void PrintSummary(const std::string& path) {
  try {
    h5::File file(path, h5::Mode::ReadOnly);
    std::vector<hsize_t> train = h5::Dims(file.id(), "/train/images");
    std::vector<hsize_t> test = h5::Dims(file.id(), "/test/images");
    int64_t classes = h5::GetIntAttr(file.id(), ".", "classes");
    std::printf("wrote %s: %llu train, %llu test, %llux%llux%llu, %" PRId64 " classes\n",
                path.c_str(), (unsigned long long)train.at(0), (unsigned long long)test.at(0),
                (unsigned long long)train.at(1), (unsigned long long)train.at(2),
                (unsigned long long)train.at(3), classes);
  } catch (const H5Error& e) {
    throw DataError(path + ": cannot read back the file just written: " + e.what());
  }
}

}  // namespace dlh

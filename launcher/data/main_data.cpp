// dlh-data — creates and checks DLH data set files (layout: launcher/data/dataset.hpp).
//
//   dlh-data import-fashion-mnist --out FILE [--source DIR]
//   dlh-data import-numpy | import-hdf5 | import-images | import-csv ... --out FILE
//   dlh-data synthetic --out FILE --shape CxHxW --classes K --train N --test M [--seed S]
//   dlh-data inspect FILE
//   dlh-data stage FILE [--to DIR] [--verify] [--force]
//
// Exit status (common/exit_codes.hpp): 0 success, 1 runtime error (bad input file, I/O),
// 2 bad command line.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/data/data_cli.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/import_commands.hpp"
#include "launcher/data/stage.hpp"
#include "launcher/storage/h5.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

const char* const kDefaultSource = "/usr/share/datasets/fashion-mnist";

const char* const kUsage =
    "usage: dlh-data COMMAND [OPTIONS]\n"
    "\n"
    "Creates and checks DLH data set files (HDF5: /train/images, /train/labels,\n"
    "/test/images, /test/labels; root attributes classes, source, mean, std).\n"
    "\n"
    "commands:\n"
    "  import-fashion-mnist --out FILE [--source DIR]\n"
    "        convert the Fashion-MNIST IDX files (plain or .gz) into FILE\n"
    "  import-numpy --out FILE (--npz F | --train-images X.npy --train-labels Y.npy ...)\n"
    "        convert NumPy arrays (np.save, np.savez, np.savez_compressed)\n"
    "  import-hdf5 FILE --out OUT --images PATH --labels PATH\n"
    "        convert two datasets of an HDF5 file written by h5py, Keras, MATLAB\n"
    "  import-images DIR --out FILE (--size HxW [--channels 1|3] | --spec SPEC)\n"
    "        convert a folder of PNG/JPEG images per class (the ImageFolder layout)\n"
    "  import-csv FILE --out OUT [--label COLUMN]\n"
    "        convert a CSV table of feature columns and a label column\n"
    "        (the imports hold out --test-fraction 0.1 of training when no test split is given)\n"
    "  synthetic --out FILE --shape CxHxW --classes K --train N --test M [--seed S]\n"
    "        generate a learnable synthetic classification data set\n"
    "  inspect FILE\n"
    "        validate FILE as the trainer would and print what it holds\n"
    "  stage FILE [--to DIR] [--verify] [--force]\n"
    "        copy FILE to this node's DIR (checksummed, read back, skipped when current)\n"
    "\n"
    "'dlh-data COMMAND --help' documents each command's options.\n"
    "Exit status: 0 success, 1 error in the data or I/O, 2 bad command line.\n";

int ImportCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  std::string out, source;
  options.add_options()  //
      ("out,o", po::value(&out)->required()->value_name("FILE"),
       "data set file to write (written to FILE.tmp.<pid>.<n>, then renamed into place)")  //
      ("source,s", po::value(&source)->default_value(kDefaultSource)->value_name("DIR"),
       "folder holding train-images-idx3-ubyte, train-labels-idx1-ubyte, "
       "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or .gz");
  po::variables_map vm;
  if (!ParseArgs("import-fashion-mnist", "--out FILE [--source DIR]", args, options, {}, vm))
    return kExitOk;
  // The files ImportFashionMnist reads: each plain or gzipped.
  std::vector<ImportInput> inputs;
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    for (const char* ext : {"", ".gz"}) {
      const std::string path =
          source + (source.empty() || source.back() == '/' ? "" : "/") + name + ext;
      inputs.push_back({path, ""});
    }
  CheckImportOutput("import-fashion-mnist", out, inputs);
  ImportFashionMnist(source, out);
  PrintSummary(out);
  return kExitOk;
}

int SyntheticCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  std::string out, shape_text, classes_text, train_text, test_text, seed_text;
  // Numbers are taken as text and parsed here: program_options would accept "-5" for an
  // unsigned seed and give a vague message for "abc".
  options.add_options()  //
      ("out,o", po::value(&out)->required()->value_name("FILE"),
       "data set file to write (written to FILE.tmp.<pid>.<n>, then renamed into place)")  //
      ("shape", po::value(&shape_text)->required()->value_name("CxHxW"),
       "per-sample shape: channels x height x width, e.g. 3x32x32 (flat vectors: Fx1x1)")  //
      ("classes", po::value(&classes_text)->required()->value_name("K"),
       "number of classes, at least 2")  //
      ("train", po::value(&train_text)->required()->value_name("N"),
       "training samples (classes balanced, order shuffled)")  //
      ("test", po::value(&test_text)->required()->value_name("M"),
       "held-out test samples (0 allowed)")  //
      ("seed", po::value(&seed_text)->default_value("1")->value_name("S"),
       "random seed; the same seed and options give the same data");
  po::variables_map vm;
  if (!ParseArgs("synthetic", "--out FILE --shape CxHxW --classes K --train N --test M [--seed S]",
                 args, options, {}, vm))
    return kExitOk;
  CheckImportOutput("synthetic", out, {});  // no input: --out is a file in a writable folder
  Shape3 shape = ParseShape(shape_text);
  int classes = int(ParseInt(classes_text, "--classes", 2, 1 << 20));
  int64_t train = ParseInt(train_text, "--train", 1, int64_t(1) << 40);
  int64_t test = ParseInt(test_text, "--test", 0, int64_t(1) << 40);
  uint64_t seed = ParseSeed(seed_text);
  // Everything is generated in memory before writing; refuse what cannot fit rather than
  // dying of std::bad_alloc half way.
  double gib = double(train + test) * double(shape.elements()) * 4 / (1 << 30);
  if (gib > 64)
    throw UsageError("synthetic: " + std::to_string(train + test) + " samples of " +
                     ShapeText(shape) + " need " + std::to_string(int64_t(gib)) +
                     " GiB; the limit is 64 GiB");
  WriteSyntheticDataset(out, shape, classes, train, test, seed);
  PrintSummary(out);
  return kExitOk;
}

void PrintSplit(const char* name, const DataSplit& s, int classes, bool with_stats) {
  std::printf("%-9s %" PRId64 " samples of %s\n", name, s.count, ShapeText(s.shape).c_str());
  std::vector<int64_t> hist(size_t(classes), 0);
  for (int32_t l : s.labels) ++hist[size_t(l)];
  std::printf("  label histogram:");
  for (int k = 0; k < classes; ++k) {
    if (k % 10 == 0) std::printf("\n   ");
    std::printf(" %d:%" PRId64, k, hist[size_t(k)]);
  }
  std::printf("\n");
  if (!with_stats || s.images.empty()) return;
  double sum = 0, sum_sq = 0;
  float lo = s.images[0], hi = s.images[0];
  for (float v : s.images) {
    sum += v;
    sum_sq += double(v) * v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  double n = double(s.images.size());
  double mean = sum / n;
  std::printf("  loaded pixels: min %.4f, max %.4f, mean %.4f, std %.4f\n", lo, hi, mean,
              std::sqrt(std::max(0.0, sum_sq / n - mean * mean)));
}

// "0 cats, 1 dogs, ..." from the JSON array /class_names; the first 20 of a long list.
std::string ClassNamesText(const std::string& path, const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_array()) throw DataError(path + ": /class_names is not a JSON array of names");
  std::string out;
  for (size_t i = 0; i < j.size() && i < 20; ++i) {
    if (!j[i].is_string())
      throw DataError(path + ": /class_names[" + std::to_string(i) + "] is not a name");
    out += (i ? ", " : "") + std::to_string(i) + " " + j[i].get<std::string>();
  }
  if (j.size() > 20) out += ", ... (" + std::to_string(j.size()) + " in all)";
  return out;
}

// inspect --json: what a program that plans for the data set needs (dlh-estimate suggest),
// without reading the images.
nlohmann::json SplitJson(const DataSplit& s, int classes) {
  std::vector<int64_t> hist(size_t(classes), 0);
  for (int32_t l : s.labels) ++hist[size_t(l)];
  return {{"samples", s.count},
          {"shape", {s.shape.channels, s.shape.height, s.shape.width}},
          {"histogram", hist}};
}

int InspectCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  std::string path;
  options.add_options()  //
      ("file", po::value(&path)->required()->value_name("FILE"),
       "data set file to check (also accepted as the only positional argument)")  //
      ("json",
       "print one JSON object instead: classes, class_names, element (uint8 or "
       "float32), and per split its samples, shape [C, H, W] and label histogram "
       "(the images are checked for their shape and type, not read)");
  SubcommandSyntax syntax;
  syntax.positional = {{"file", ""}};  // --file is required: precheck says it better
  syntax.precheck = [](const po::variables_map& vm) {
    if (!vm.count("file")) throw UsageError("missing FILE, the data set to inspect");
  };
  po::variables_map vm;
  if (!ParseArgs("inspect", "FILE [--json]", args, options, syntax, vm)) return kExitOk;

  // LoadDataset is the trainer's own validation: a file that passes here loads there.
  const bool json = vm.count("json") > 0;
  Dataset ds = LoadDataset(path, !json);
  std::string source = "(none)";
  std::string norm = "(none: images are used as stored)";
  std::string names = "(none stored)";
  int64_t version = 0;
  try {
    h5::File file(path, h5::Mode::ReadOnly);
    hid_t f = file.id();
    if (h5::HasAttr(f, ".", "format_version")) version = h5::GetIntAttr(f, ".", "format_version");
    if (h5::HasAttr(f, ".", "source")) {
      // h5::GetStringAttr cannot read fixed-length ASCII strings (it asks HDF5 for UTF-8,
      // which HDF5 will not convert); the source is informational, so do not fail on it.
      try {
        source = h5::GetStringAttr(f, ".", "source");
      } catch (const H5Error& e) {
        source = std::string("(unreadable: ") + e.what() + ")";
      }
    }
    if (h5::HasAttr(f, ".", "mean"))  // LoadDataset read and checked them
      norm = "mean " + StatsText(ds.input_mean, ds.train.shape) + "; std " +
             StatsText(ds.input_std, ds.train.shape) + " (loaded images are (x - mean) / std)";
    if (h5::Exists(f, "/class_names"))
      names = ClassNamesText(path, h5::ReadString(f, "/class_names"));
  } catch (const H5Error& e) {
    throw DataError(path + ": " + e.what());
  }
  if (json) {
    nlohmann::json names_json = nullptr;
    try {
      h5::File file(path, h5::Mode::ReadOnly);
      if (h5::Exists(file.id(), "/class_names"))
        names_json =
            nlohmann::json::parse(h5::ReadString(file.id(), "/class_names"), nullptr, false);
    } catch (const H5Error& e) {
      throw DataError(path + ": " + e.what());
    }
    if (!names_json.is_array()) names_json = nullptr;
    const nlohmann::json out = {{"file", path},
                                {"format_version", version},
                                {"classes", ds.classes},
                                {"class_names", names_json},
                                {"element", ds.train.stored_bytes ? "uint8" : "float32"},
                                {"train", SplitJson(ds.train, ds.classes)},
                                {"test", SplitJson(ds.test, ds.classes)}};
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  std::printf("file      %s\n", path.c_str());
  std::printf("format    %s\n", version ? std::to_string(version).c_str() : "(not stored)");
  std::printf("source    %s\n", source.c_str());
  std::printf("classes   %d\n", ds.classes);
  std::printf("normalize %s\n", norm.c_str());
  std::printf("names     %s\n", names.c_str());
  PrintSplit("train", ds.train, ds.classes, true);
  PrintSplit("test", ds.test, ds.classes, false);
  std::printf("ok: %s is a valid data set\n", path.c_str());
  return kExitOk;
}

int StageCommand(const std::vector<std::string>& args) {
  po::options_description options("options");
  std::string path, dir;
  options.add_options()  //
      ("file", po::value(&path)->required()->value_name("FILE"),
       "the data set to stage (also accepted as the only positional argument)")  //
      ("to", po::value(&dir)->value_name("DIR"),
       "the node-local folder, yours alone (created, mode 0700, when missing); %n: this "
       "node's name (SLURMD_NODENAME, else the host name), %u: your user name, %j: the job's "
       "id; default /tmp/dlh-%u/job-%j (outside a job /tmp/dlh-%u/stage)")  //
      ("verify", "re-read a copy already staged and compare its checksum")  //
      ("force", "copy even when the copy is current");
  SubcommandSyntax syntax;
  syntax.positional = {{"file", ""}};
  syntax.precheck = [](const po::variables_map& vm) {
    if (!vm.count("file")) throw UsageError("missing FILE, the data set to stage");
  };
  po::variables_map vm;
  if (!ParseArgs("stage", "FILE [--to DIR] [--verify] [--force]", args, options, syntax, vm))
    return kExitOk;
  std::string node;
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n) {
    node = n;
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    node = host;
  }
  const StageNames names = CurrentStageNames(node);
  StageOptions o;
  o.verify = vm.count("verify") > 0;
  o.force = vm.count("force") > 0;
  o.progress = [&](int64_t done, int64_t total) {
    std::fprintf(stderr, "dlh-data: stage: %s: %.0f of %.0f MB (%.0f%%)\n", node.c_str(),
                 double(done) / 1e6, double(total) / 1e6,
                 total ? 100.0 * double(done) / double(total) : 100.0);
  };
  const std::string to =
      vm.count("to") ? ExpandStageDir(dir, names, "--to") : DefaultStageDir(names);
  const StageResult r = StageFile(path, to, o);
  if (!r.note.empty()) std::fprintf(stderr, "dlh-data: stage: %s\n", r.note.c_str());
  if (r.copied)
    std::printf(
        "staged %s on %s: %s, %.1f MB in %.2f s (%.0f MB/s, read back and checked), "
        "crc32 %08x\n",
        path.c_str(), node.c_str(), r.path.c_str(), double(r.bytes) / 1e6, r.seconds,
        r.seconds > 0 ? double(r.bytes) / 1e6 / r.seconds : 0.0, r.crc32);
  else
    std::printf("already staged %s on %s: %s, unchanged (crc32 %08x%s)\n", path.c_str(),
                node.c_str(), r.path.c_str(), r.crc32, o.verify ? ", verified" : "");
  return kExitOk;
}

struct Command {
  const char* name;
  std::function<int(const std::vector<std::string>&)> run;
};

int Main(int argc, char** argv, std::string& command) {
  const std::vector<Command> commands = {{"import-fashion-mnist", ImportCommand},
                                         {"import-numpy", ImportNumpyCommand},
                                         {"import-hdf5", ImportHdf5Command},
                                         {"import-images", ImportImagesCommand},
                                         {"import-csv", ImportCsvCommand},
                                         {"synthetic", SyntheticCommand},
                                         {"inspect", InspectCommand},
                                         {"stage", StageCommand}};
  if (argc < 2) throw UsageError("missing command (see 'dlh-data --help')");
  std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  for (const Command& c : commands) {
    if (first != c.name) continue;
    command = c.name;
    return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  throw UsageError(
      "unknown command '" + first +
      "' (commands: import-fashion-mnist, import-numpy, import-hdf5, import-images, import-csv, "
      "synthetic, inspect, stage; see 'dlh-data --help')");
}

}  // namespace
}  // namespace dlh

int main(int argc, char** argv) {
  std::string command;  // set once the command is known, to prefix usage messages
  auto usage_error = [&](const std::string& what) {
    if (command.empty()) {
      std::cerr << "dlh-data: " << what << "\n";
    } else {
      std::cerr << "dlh-data: " << command << ": " << what << " (see 'dlh-data " << command
                << " --help')\n";
    }
    return dlh::kExitBadInput;
  };
  try {
    return dlh::Main(argc, argv, command);
  } catch (const dlh::UsageError& e) {  // ParseSubcommand turns Program_options' errors into these
    return usage_error(e.what());
  } catch (const std::exception& e) {
    // dlh::Error messages already name the file at fault.
    std::cerr << "dlh-data: " << e.what() << "\n";
    return dlh::kExitFailure;
  }
}

// DLH — `dlh-launch export` (see export_command.hpp).
#include "launcher/export/export_command.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/capture_output.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "common/spec.hpp"
#include "common/temporary_folder.hpp"
#include "launcher/export/pytorch_program.hpp"
#include "launcher/predict/predict_command.hpp"

namespace dlh {
namespace {

namespace po = boost::program_options;

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// HDF5's signature at the start of the file: a checkpoint rather than a spec (JSON).
bool IsHdf5(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char head[8] = {};
  const bool hdf5 = ::read(fd, head, sizeof head) == ssize_t(sizeof head) &&
                    std::memcmp(head, "\x89HDF\r\n\x1a\n", sizeof head) == 0;
  ::close(fd);
  return hdf5;
}

std::string BaseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace

int RunExportCommand(const std::vector<std::string>& args) {
  std::string pytorch, torch_out, onnx_out, python;
  po::options_description d("dlh-launch export SOURCE: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("pytorch", po::value(&pytorch), "write the spec as a standalone PyTorch program (SOURCE: "
        "a spec, a DLH checkpoint or a run folder)")
    ("torch", po::value(&torch_out), "write the trained model as a PyTorch state dict of the "
        "exported program's Net (SOURCE: a checkpoint or a run folder, its newest)")
    ("onnx", po::value(&onnx_out), "write the trained model as ONNX (opset 13; input 'images' "
        "N x C x H x W standardised as the data set's, output 'logits')")
    ("python", po::value(&python), "the Python 3 with torch and h5py that writes --torch and "
        "--onnx (default: $DLH_PYTHON, else python3)");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.prefix = "export: ";
  syntax.suffix = " (see dlh-launch export --help)";
  syntax.positional = {{"source", "missing SOURCE (a spec, a checkpoint or a run folder)"}};
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  const std::string source = vm["source"].as<std::string>();
  if (pytorch.empty() && torch_out.empty() && onnx_out.empty())
    throw UsageError("export: give --pytorch, --torch or --onnx");
  for (const std::string* out : {&pytorch, &torch_out, &onnx_out})
    if (!out->empty() && IsDirectory(*out)) throw UsageError("export: " + *out + " is a folder");
  // Each output's folder before the work (a checkpoint read, seconds of Python), failing as
  // the write itself would have after it.
  for (const auto& [option, out] :
       {std::pair{"--pytorch", &pytorch}, {"--torch", &torch_out}, {"--onnx", &onnx_out}}) {
    if (out->empty()) continue;
    try {
      CheckOutputFolder(*out, std::string("export: ") + option);
    } catch (const UsageError& e) {
      throw Error(e.what());
    }
  }

  const bool from_checkpoint = IsDirectory(source) || IsHdf5(source);
  if (!from_checkpoint && (!torch_out.empty() || !onnx_out.empty()))
    throw UsageError("export: --torch and --onnx export a trained model: " + source +
                     " is not a checkpoint or a run folder");
  TrainSpec spec;
  std::string checkpoint;
  if (from_checkpoint) {
    const TrainState state = LoadTrainedModel(source, &checkpoint, "export");
    spec = ParseSpec(state.spec_json, checkpoint + ": its spec", "");
  } else {
    spec = LoadSpec(source);
  }
  PyTorchProgramOptions options;
  options.data = spec.dataset;

  if (!pytorch.empty()) {
    options.file_name = BaseName(pytorch);
    WriteFileAtomically(pytorch, WritePyTorchProgram(spec, options));
    ::chmod(pytorch.c_str(), 0755);
    std::fprintf(stderr,
                 "dlh-launch: export: wrote %s: %s as a PyTorch program (python3 %s --help)\n",
                 pytorch.c_str(), spec.name.c_str(), pytorch.c_str());
  }
  if (torch_out.empty() && onnx_out.empty()) return kExitOk;

  // The weights go through the program itself, so the state dict's keys are its Net's. It
  // writes into a private folder; the files are copied into place only when all are there,
  // so a failure leaves nothing behind.
  TemporaryFolder folder("dlh-export-");
  const std::string program = folder.path() + "/net.py";
  options.file_name = BaseName(program);
  WriteFileAtomically(program, WritePyTorchProgram(spec, options));
  if (python.empty()) {
    const char* env = std::getenv("DLH_PYTHON");
    python = env && *env ? env : "python3";
  }
  std::vector<std::string> argv = {python, program, "--from-dlh", checkpoint};
  std::vector<std::pair<std::string, std::string>> outputs;  // (written there, goes here)
  if (!torch_out.empty()) {
    outputs.emplace_back(folder.path() + "/model.pt", torch_out);
    argv.insert(argv.end(), {"--export-torch", outputs.back().first});
  }
  if (!onnx_out.empty()) {
    outputs.emplace_back(folder.path() + "/model.onnx", onnx_out);
    argv.insert(argv.end(), {"--export-onnx", outputs.back().first});
  }
  int code = 0;
  try {
    code = RunProgram(argv);
  } catch (const Error& e) {
    throw Error(std::string("export: ") + e.what() +
                " (give --python or DLH_PYTHON: a Python 3 with torch and h5py)");
  }
  if (code != 0) {
    // The program (--pytorch), written before, stays: it needs no weights.
    const std::string left = pytorch.empty()
                                 ? "nothing written"
                                 : "no weights written (the program " + pytorch + " was)";
    std::fprintf(stderr, "dlh-launch: export: %s failed (exit %d) on %s; %s\n", python.c_str(),
                 code, checkpoint.c_str(), left.c_str());
    return kExitFailure;
  }
  for (const auto& [written, out] : outputs) {
    std::string bytes, why;
    if (!ReadFileText(written, size_t(1) << 34, &bytes, &why))
      throw Error(written + ": cannot read: " + why);
    WriteFileAtomically(out, bytes);
    std::fprintf(stderr, "dlh-launch: export: wrote %s from %s\n", out.c_str(), checkpoint.c_str());
  }
  return kExitOk;
}

}  // namespace dlh

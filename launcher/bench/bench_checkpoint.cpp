// DLH — checkpoint write benchmark (see bench_checkpoint.hpp).
#include "launcher/bench/bench_checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

constexpr size_t kArrayFloats = size_t(4) << 20;  // 16 MiB per array

// Varied values (not zeros): what a trained model holds, and nothing a file system or
// device could shortcut. xorshift32 is fast enough not to dominate the setup.
void Fill(std::vector<float>* data, uint32_t seed) {
  uint32_t x = seed | 1u;
  for (float& v : *data) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = float(int32_t(x)) * 0x1p-31f;
  }
}

// The floor under any checkpoint format: the same arrays written with write(2) into one
// file, fsync'ed and closed. They go 1 MiB at a time through one reused buffer, as dd
// copies: handing the kernel the arrays themselves took several times as long here (h5.cpp,
// kPieceBytes, has the figures). Returns the file's size.
off_t WriteRaw(const std::string& path, const TrainState& s) {
  unlink(path.c_str());
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CheckpointError(path + ": cannot create (" + std::strerror(errno) + ")");
  off_t total = 0;
  std::vector<char> piece(size_t(1) << 20);
  auto put = [&](const std::vector<NamedArray>& arrays) {
    for (const NamedArray& a : arrays) {
      const char* from = reinterpret_cast<const char*>(a.data.data());
      size_t left = a.data.size() * sizeof(float);
      while (left > 0) {
        const size_t bytes = std::min(left, piece.size());
        std::memcpy(piece.data(), from, bytes);
        from += bytes;
        left -= bytes;
        for (size_t done = 0; done < bytes;) {
          ssize_t n = write(fd, piece.data() + done, bytes - done);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) throw CheckpointError(path + ": write failed (" + std::strerror(errno) + ")");
          done += size_t(n);
          total += n;
        }
      }
    }
  };
  try {
    put(s.params);
    put(s.optimizer_state);
    if (fsync(fd) != 0)
      throw CheckpointError(path + ": fsync failed (" + std::strerror(errno) + ")");
  } catch (...) {
    close(fd);
    throw;
  }
  if (close(fd) != 0) throw CheckpointError(path + ": close failed (" + std::strerror(errno) + ")");
  return total;
}

}  // namespace

TrainState MakeBenchState(size_t param_bytes) {
  TrainState s;
  s.spec_json = R"({"name": "bench-checkpoint"})";
  s.optimizer = "sgd";
  s.world_size = 1;
  size_t left = param_bytes / sizeof(float);
  for (int i = 0; left > 0; ++i) {
    const size_t n = std::min(left, kArrayFloats);
    left -= n;
    char name[32];
    std::snprintf(name, sizeof name, "%03d.dense/weight", i);
    NamedArray p{name, {int(n)}, std::vector<float>(n)};
    Fill(&p.data, uint32_t(2 * i + 1));
    NamedArray m{std::string(name) + "/momentum", {int(n)}, std::vector<float>(n)};
    Fill(&m.data, uint32_t(2 * i + 2));
    s.params.push_back(std::move(p));
    s.optimizer_state.push_back(std::move(m));
  }
  return s;
}

nlohmann::json RunCheckpointBench(const CheckpointBenchOptions& o) {
  CheckpointDir dir(o.dir);
  if (o.raw) {
    std::error_code ec;
    std::filesystem::create_directories(dir.dir(), ec);
    if (ec) throw CheckpointError(dir.dir() + ": cannot create folder (" + ec.message() + ")");
  }
  nlohmann::json sizes = nlohmann::json::array();
  int64_t step = 0;
  // Steps continue from what the folder holds, so that a rerun into the same folder rotates
  // like a resumed training run instead of overwriting a kept file.
  const std::vector<std::string> existing = dir.list_newest_first();
  if (!existing.empty()) {
    const std::string name = existing.front().substr(existing.front().rfind('/') + 1);
    long long newest = 0;
    if (std::sscanf(name.c_str(), "ckpt-%lld.h5", &newest) == 1) step = newest;
  }
  for (size_t bytes : o.param_bytes) {
    TrainState state = MakeBenchState(bytes);
    std::vector<double> seconds;
    off_t file_bytes = 0;
    for (int r = 0; r < o.repeats; ++r) {
      state.step = ++step;
      auto t0 = std::chrono::steady_clock::now();
      if (o.raw) {
        file_bytes = WriteRaw(dir.dir() + "/raw-write.bin", state);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        continue;
      }
      // The whole call, as the training loop is blocked by it (whatever it does inside).
      const std::string path = dir.save(state, o.keep);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      struct stat st {};
      if (stat(path.c_str(), &st) != 0)
        throw CheckpointError(path + ": saved but cannot stat (" + std::strerror(errno) + ")");
      file_bytes = st.st_size;
    }
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    sizes.push_back({{"param_bytes", bytes},
                     {"file_bytes", int64_t(file_bytes)},
                     {"seconds", seconds},
                     {"median_s", sorted[sorted.size() / 2]}});
  }
  return {
      {"dir", dir.dir()}, {"method", o.raw ? "raw" : "save"}, {"keep", o.keep}, {"sizes", sizes}};
}

int RunBenchCheckpointCommand(const std::vector<std::string>& args, int rank) {
  CheckpointBenchOptions o;
  std::vector<int> mib = {64};
  std::string json_path;
  po::options_description d("dlh-launch bench-checkpoint: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("dir", po::value(&o.dir), "checkpoint folder to write into (required; the files stay)")
    ("mb", po::value(&mib)->multitoken()->default_value(mib, "64"),
        "parameter MiB per checkpoint, one or more (momentum state adds as much again)")
    ("repeats", po::value(&o.repeats)->default_value(o.repeats), "saves timed per size; median")
    ("keep", po::value(&o.keep)->default_value(o.keep), "checkpoints kept, as train --keep")
    ("raw", "time a plain write(2) + fsync of the same arrays into DIR/raw-write.bin instead "
        "(the floor under any checkpoint format)")
    ("json", po::value(&json_path), "also write the results as JSON to this file");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.suffix = " (see dlh-launch bench-checkpoint --help)";
  syntax.ignore_extra_arguments = true;
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    if (rank == 0) std::cout << d << "\n";
    return kExitOk;
  }
  o.raw = vm.count("raw") > 0;
  if (o.dir.empty()) throw UsageError("bench-checkpoint: --dir is required");
  if (o.repeats < 1) throw UsageError("--repeats: must be at least 1");
  if (o.keep < 1) throw UsageError("--keep: must be at least 1");
  o.param_bytes.clear();
  for (int m : mib) {
    if (m < 1 || m > (1 << 20))
      throw UsageError("--mb: must be 1 to 1048576, got " + std::to_string(m));
    o.param_bytes.push_back(size_t(m) << 20);
  }
  if (rank != 0) return kExitOk;  // training checkpoints from rank 0 alone; so does this

  nlohmann::json r = RunCheckpointBench(o);
  std::printf("%s into %s (median of %d)\n",
              o.raw ? "plain write + fsync" : "checkpoint save (whole CheckpointDir::save call)",
              r["dir"].get<std::string>().c_str(), o.repeats);
  std::printf("%12s %14s %12s %10s\n", "param MiB", "file bytes", "median s", "GB/s");
  for (const auto& s : r["sizes"]) {
    const double file = s["file_bytes"], median = s["median_s"];
    std::printf("%12.0f %14.0f %12.3f %10.3f\n", double(s["param_bytes"]) / (1 << 20), file, median,
                file / median / 1e9);
  }
  if (!json_path.empty()) WriteFileAtomically(json_path, r.dump(2) + "\n");
  return kExitOk;
}

}  // namespace dlh

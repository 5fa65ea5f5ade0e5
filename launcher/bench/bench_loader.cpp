// DLH — data loader benchmark (see bench_loader.hpp).
#include "launcher/bench/bench_loader.hpp"

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/data/dataset.hpp"
#include "launcher/data/file_source.hpp"
#include "launcher/data/loader.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int RunBenchLoaderCommand(const std::vector<std::string>& args, int rank) {
  std::string data, mode = "stream", json_path;
  int64_t batch = 64, steps = 500;
  double step_ms = 0;
  int prefetch = -1;
  uint64_t seed = 1;
  po::options_description d("dlh-launch bench-loader: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("data", po::value(&data), "data set file (required)")
    ("data-mode", po::value(&mode)->default_value(mode), "memory or stream, as train's")
    ("batch", po::value(&batch)->default_value(batch), "samples per step")
    ("steps", po::value(&steps)->default_value(steps), "steps timed (a new epoch when one ends)")
    ("step-ms", po::value(&step_ms)->default_value(step_ms),
        "a training step's length: sleep this long after each batch, as if computing, and "
        "report how long next() still blocked (0: take batches as fast as they come)")
    ("prefetch", po::value(&prefetch), "batches prepared ahead (default as train: 8 streaming, "
        "2 in memory)")
    ("seed", po::value(&seed)->default_value(seed), "the data order's seed")
    ("json", po::value(&json_path), "also write the results as JSON to this file");
  // clang-format on
  SubcommandSyntax syntax;
  syntax.suffix = " (see dlh-launch bench-loader --help)";
  po::variables_map vm;
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    if (rank == 0) std::cout << d << "\n";
    return kExitOk;
  }
  if (data.empty()) throw UsageError("bench-loader: --data is required");
  if (mode != "memory" && mode != "stream")
    throw UsageError("--data-mode: expected memory or stream, got '" + mode + "'");
  if (prefetch < 0) prefetch = mode == "stream" ? 8 : 2;
  if (batch < 1 || steps < 1 || !(step_ms >= 0))
    throw UsageError("--batch and --steps must be positive, --step-ms not negative");
  if (rank != 0) return kExitOk;

  const auto opened = std::chrono::steady_clock::now();
  const bool stream = mode == "stream";
  Dataset ds = LoadDataset(data, /*with_images=*/!stream);
  std::unique_ptr<SampleSource> source;
  FileSource* file = nullptr;
  if (stream) {
    auto f = std::make_unique<FileSource>(data, "train", ds.train);
    file = f.get();
    source = std::move(f);
  } else {
    source = std::make_unique<MemorySource>(ds.train);
  }
  const double open_s = Seconds(opened);
  LoaderOptions o;
  o.global_batch = o.rank_batch = batch;
  o.seed = seed;
  o.prefetch = prefetch;
  Loader loader(*source, o, 0, 0);

  // The first batch is waited for whole (nothing was prefetched yet), and the next few while
  // the reads warm up (a cold disk queue, a fresh page cache); a long run sees the steady
  // state, the wait after kSettleSteps.
  constexpr int64_t kSettleSteps = 20;
  double waited = 0, first_wait = 0, steady_wait = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    const auto asked = std::chrono::steady_clock::now();
    Batch b = loader.next();
    const double w = Seconds(asked);
    (s == 0 ? first_wait : waited) += w;
    if (s >= kSettleSteps) steady_wait += w;
    if (step_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
  }
  const double total = Seconds(start);
  const double samples = double(steps * batch);
  const double sample_bytes = double(ds.train.shape.elements()) * (ds.train.stored_bytes ? 1 : 4);
  nlohmann::json r = {
      {"data", data},
      {"mode", mode},
      {"batch", batch},
      {"steps", steps},
      {"step_ms", step_ms},
      {"prefetch", prefetch},
      {"open_s", open_s},
      {"seconds", total},
      {"samples_per_s", samples / total},
      {"stored_mb_per_s", samples * sample_bytes / total / 1e6},
      {"first_wait_ms", 1e3 * first_wait},
      {"wait_ms_per_step", steps > 1 ? 1e3 * waited / double(steps - 1) : 0.0},
      {"steady_wait_ms_per_step",
       steps > kSettleSteps ? 1e3 * steady_wait / double(steps - kSettleSteps) : 0.0},
      {"file_bytes_read", file ? double(file->bytes_read()) : 0.0}};
  std::printf(
      "%s: %s, batch %lld: %.0f samples/s (%.1f MB/s of stored samples), opened in %.2f s; "
      "next() waited %.1f ms for the first batch, then %.3f ms per step (%.3f after %lld "
      "steps)%s\n",
      data.c_str(), mode.c_str(), (long long)batch, samples / total,
      samples * sample_bytes / total / 1e6, open_s, 1e3 * first_wait,
      steps > 1 ? 1e3 * waited / double(steps - 1) : 0.0,
      steps > kSettleSteps ? 1e3 * steady_wait / double(steps - kSettleSteps) : 0.0,
      (long long)kSettleSteps,
      step_ms > 0 ? (" with " + std::to_string(int(step_ms)) + " ms steps").c_str() : "");
  if (!json_path.empty()) WriteFileAtomically(json_path, r.dump(2) + "\n");
  return kExitOk;
}

}  // namespace dlh

// DLH — HDF5 checkpoints: atomic writes, validation, rotation.
// The file layout is documented in docs/reference/checkpoint.md and in checkpoint_format.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/thread_cpu.hpp"
#include "launcher/nn/named_array.hpp"

namespace dlh {

constexpr int64_t kCheckpointFormatVersion = 1;

// A split of the global batch that took effect at `step`: the steps from `step` on (0-based,
// the step that starts with `step` steps completed) gave rank r `batches[r]` samples.
struct SplitChange {
  int64_t step = 0;
  std::vector<int64_t> batches;
  bool operator==(const SplitChange& o) const { return step == o.step && batches == o.batches; }
  bool operator!=(const SplitChange& o) const { return !(*this == o); }
};

// Everything needed to continue training bit-identically.
struct TrainState {
  std::string spec_json;      // the spec text the run started with
  int64_t step = 0;           // global optimizer steps completed
  int64_t epoch = 0;          // loader cursor: epoch of the next batch
  int64_t step_in_epoch = 0;  // loader cursor: step within that epoch of the next batch
  uint64_t seed = 0;          // RNG: data order and dropout masks are pure functions of
                              // (seed, epoch) and (seed, rank, step, layer)
  int64_t world_size = 0;
  // Each rank's samples per step when a plan on several GPU types set them (world_size
  // entries); empty for the even split, whose files are written exactly as before it existed.
  std::vector<int64_t> rank_batches;
  // Every split the run trained with, oldest first, when it balanced its batches
  // (launcher/train/balancer.hpp) or replayed a history; empty otherwise (files as before).
  // Steps increase from the first entry; each entry has world_size batches summing to the
  // global batch; the last one is rank_batches, and its step is at most `step`.
  std::vector<SplitChange> split_history;
  int64_t samples_seen = 0;
  // The global batch and the peak learning rate (the schedule's `lr`) the run trained with
  // at this checkpoint: a resume with another global batch rescales the rate from them
  // (launcher/train/elastic.hpp). 0: not recorded (files written before they were).
  int64_t global_batch = 0;
  double lr = 0;
  // How the data set's inputs were transformed before the network saw them: each stored value
  // x became (x * input_scale - input_mean) / input_std (input_scale 1/255 for uint8 images),
  // with one mean and std, one per channel or one per element of a sample
  // (launcher/data/input_stats.hpp). A checkpoint used on its own (PyTorch, inference) must
  // apply the same. input_scale 0: not recorded (files written before it was).
  double input_scale = 0;
  std::vector<double> input_mean{0.0}, input_std{1.0};
  double elapsed_seconds = 0;               // training wall time before this checkpoint
  std::string optimizer;                    // "sgd" or "adam"
  std::vector<NamedArray> params;           // trained parameters, by layer
  std::vector<NamedArray> buffers;          // batchnorm running statistics
  std::vector<NamedArray> optimizer_state;  // momentum / adam moments, named like params + "/slot"
  // Stale-synchronous training's sums not yet applied, oldest first: "<step>/gradients" (the
  // summed gradients, forward order) and "<step>/sums" (loss, correct count, batch-norm
  // statistics) per step, <step> its cursor step (9 digits, from 0). `step` counts the steps
  // taken, so step - (their count) updates are in params. Empty otherwise.
  std::vector<NamedArray> in_flight;
  // The classes' names, index = label, as the data set trained on names them (its
  // /class_names): a prediction from this file alone names its classes. Empty: none
  // recorded (the data set names none, or a file from before them; such files are written
  // byte for byte as before).
  std::vector<std::string> class_names;
};

// Writes `state` to `path` atomically: a temporary file beside it, fsync, rename, fsync
// of the folder. A crash at any point leaves either the old file set or the new file.
// Throws CheckpointError. The checksum runs on a thread of its own beside the writes; where
// `checksum_cpu` is given, that thread's CPU time is added to it (the caller's own thread
// measures itself).
void SaveCheckpoint(const std::string& path, const TrainState& state,
                    CpuSeconds* checksum_cpu = nullptr);

// Reads and validates (format_version, checksum, required fields). Throws
// CheckpointError naming the file and what is wrong.
TrainState LoadCheckpoint(const std::string& path);

// The checkpoints of one run: DIR/ckpt-<step, 9 digits>.h5.
class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir);
  std::string path_for_step(int64_t step) const;
  std::vector<std::string> list_newest_first() const;  // complete files only (no .tmp)
  // Saves and then deletes the oldest files beyond `keep` (keep >= 1). `checksum_cpu`: as
  // for SaveCheckpoint.
  std::string save(const TrainState& state, int keep, CpuSeconds* checksum_cpu = nullptr);
  // Newest checkpoint that loads and validates; each rejected newer file is reported
  // through `warn` (may be empty) as "<file>: skipped: <reason>". Returns false when there
  // is none.
  bool load_newest_valid(TrainState* state, std::string* path,
                         const std::function<void(const std::string& message)>& warn) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace dlh

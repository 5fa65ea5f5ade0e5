// DLH — the checkpoint file's layout, and what writing (checkpoint_save.cpp) and reading
// (checkpoint_load.cpp) share of it: the checksum, the text forms of splits and name lists,
// the array groups. Internal to launcher/storage/checkpoint_*.cpp; everything else goes
// through checkpoint.hpp.
//
// Checkpoint layout, format_version 1
// ===================================
// One HDF5 file per checkpoint, DIR/ckpt-<step, zero-padded to 9 digits>.h5.
//
// Root attributes (all scalar):
//   format_version   int64    1 (kCheckpointFormatVersion); other values are refused
//   producer         string   "dlh"; other values are refused
//   step             int64    global steps completed (with in_flight, its updates are to come)
//   epoch            int64    loader cursor: epoch of the next batch
//   step_in_epoch    int64    loader cursor: step within that epoch of the next batch
//   seed             string   the uint64 seed in decimal ("18446744073709551615"): a
//                             string rather than an int64 so that h5dump shows the value the
//                             user gave, and all 64 bits round-trip without a sign flip
//   world_size       int64
//   samples_seen     int64
//   elapsed_seconds  double   training wall time before this checkpoint
//   optimizer        string   "sgd" or "adam"
//   rank_batches     string   optional: each rank's samples per step in rank order, as
//                             comma-separated runs "B" or "BxN" (N ranks of batch B):
//                             "96x2,32" is 96, 96, 32; world_size batches in all, each
//                             positive; written only when a plan on several GPU types set the split
//                             (absent: the even split). Builds before it refuse such a file
//                             (the checksum below covers it and they do not know it)
//   global_batch     int64    optional: the global batch (samples per step) the run trained
//                             with; written by every build since elastic resume (absent:
//                             written before; a resume then takes samples_seen / step)
//   lr               double   optional, written with global_batch: the peak learning rate
//                             (the schedule's lr) the run trained with at that batch
//   input_scale      double   optional, with input_mean and input_std: the model's inputs were
//   input_mean       double   (x * input_scale - input_mean) / input_std for the data set's
//   input_std        double   stored values x (input_scale 1/255 for uint8 images, else 1), so
//                             the file is usable on its own (absent: written before they were)
//   created_unix     int64    seconds since 1970 when written; informational, not checksummed
//                             and not required when reading
//   checksum         string   "crc32:<8 lowercase hex digits>" (see below)
//
// Datasets:
//   /spec                 scalar fixed-length UTF-8 string: the spec JSON the run started with
//   /params/<name>        float32 (IEEE, little-endian), the array's shape; contiguous layout,
//   /buffers/<name>       no chunking or compression. A name like "03.conv2d/weight" is a path:
//   /optimizer/<name>     /params/03.conv2d/weight (group 03.conv2d, dataset weight). An empty
//                         shape is a scalar dataset holding one value.
//   /order/params         scalar fixed-length strings: the names of the arrays of each group,
//   /order/buffers        in the order of TrainState's vectors, joined by "\n" ("" when empty).
//   /order/optimizer      HDF5 lists links alphabetically, so this is what keeps the order.
//                         (Datasets rather than attributes: attributes are capped at 64 KiB.)
//   /split_history        optional scalar fixed-length string: every split the run trained
//                         with (launcher/train/balancer.hpp), one line "STEP:BATCHES" per
//                         change, oldest first, BATCHES written like rank_batches:
//                         "0:64x2\n20:76,52" (from step 0 two ranks of 64, from step 20 76
//                         and 52). Steps increase, every line has world_size positive
//                         batches with one sum, the last is rank_batches (then required)
//                         and its step is at most `step`. Written only by runs that balance
//                         or replay a split (absent: files as before); a dataset, since a
//                         long run's history may outgrow an attribute.
//   /in_flight/<step>/gradients  optional (stale-synchronous training, SyncSpec): the summed
//   /in_flight/<step>/sums       gradients of the steps whose updates were still to come, and
//   /in_flight/<step>/own/<rank> their summed loss, correct count and batch-norm statistics,
//   /order/in_flight             and (own_gradient_first) every rank's own gradient of them,
//                                <step> the zero-padded 9-digit cursor step (from 0) each came
//                                from, oldest first; written only when there are any (absent:
//                                none, files as before). Builds before it refuse such a file
//                                (the checksum covers it).
//   /params, /buffers and /optimizer always exist, even when empty.
//
// Array names: non-empty, '/'-separated components that are neither empty, "." nor "..",
// no "\n" or NUL, unique within their group, and no name is the group of another ("a" and
// "a/b"). SaveCheckpoint refuses others.
//
// Checksum: zlib crc32 (initial value 0) over this byte stream, integers little-endian:
//   int64 format_version
//   uint64 byte length of the spec, the spec bytes
//   int64 step, int64 epoch, int64 step_in_epoch, uint64 seed, int64 world_size,
//   int64 samples_seen, the 8 bytes of elapsed_seconds (IEEE-754 double, little-endian)
//   uint64 byte length of optimizer, the optimizer bytes
//   only when rank_batches is present: uint64 "rank_batches" as text (its byte length, then
//     the 12 bytes), uint64 number of ranks, int64 each rank's batch
//   only when global_batch is present: "global_batch" as text, int64 global_batch, "lr" as
//     text, the 8 bytes of lr (so files written before it keep their checksum; builds before
//     it refuse a file that has it)
//   only when input_scale is present: "input" as text, then the 8 bytes each of input_scale,
//     input_mean and input_std
//   only when split_history is present: "split_history" as text, uint64 number of changes,
//     then per change int64 step, uint64 number of ranks, int64 each rank's batch
//   then for params, buffers and optimizer state, in that order:
//     uint64 number of arrays, then for each array in order:
//       uint64 byte length of the name, the name bytes, int32 rank, int32 dims[rank],
//       the float32 values (little-endian) in C order
//   only when in_flight is present: "in_flight" as text, then its arrays as above
// LoadCheckpoint recomputes it from what it read and refuses the file on a mismatch.
//
// Writing (through CommitAtomically, common/atomic_file.hpp): the file is written as
// "<path>.tmp.<pid>.<n>" beside its final name, flushed and fsync'ed, closed (and fsync'ed
// again), renamed over <path>, and the folder is fsync'ed. A crash leaves either the old
// file or the new one, and possibly a stale *.tmp.* file, which readers ignore and
// CheckpointDir::save removes when its writer's pid is gone (or is ours).
// CheckpointDir::save(state, keep) then deletes all but the `keep` newest ckpt-*.h5 files,
// always keeping the one just written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/storage/checkpoint.hpp"

namespace dlh {
namespace checkpoint_format {

inline constexpr char kProducer[] = "dlh";

// The array groups, in checksum order.
struct Section {
  const char* group;  // "params"
  const char* what;   // for messages: "params[3]"
  std::vector<NamedArray> TrainState::*arrays;
  // Written (and checksummed) only when it holds an array, so that files without it stay as
  // they were; a reader takes it as empty when absent.
  bool optional = false;
};
inline constexpr Section kSections[] = {
    {"params", "params", &TrainState::params},
    {"buffers", "buffers", &TrainState::buffers},
    {"optimizer", "optimizer_state", &TrainState::optimizer_state},
    {"in_flight", "in_flight", &TrainState::in_flight, true},
};

std::string Errno();                      // strerror(errno)
std::string Quote(const std::string& s);  // 'text'
// `path`: `message`. Messages from the h5 wrapper sometimes start with the file name already.
std::string WithPath(const std::string& path, const std::string& message);

// The checksum of the layout above, over everything but the checksum and created_unix.
uint32_t Checksum(const TrainState& s);
std::string FormatChecksum(uint32_t crc);  // "crc32:0123abcd"
bool ParseChecksum(const std::string& text, uint32_t* crc);

// Decimal digits only, no sign, at most UINT64_MAX.
bool ParseU64(const std::string& text, uint64_t* out);

// "96x2,32": runs of equal batches in rank order, as the rank_batches attribute holds them.
// Runs keep the text short (attributes are capped at 64 KiB; a mix of thousands of GPUs is
// two runs when its ranks come part by part).
std::string FormatRankBatches(const std::vector<int64_t>& batches);
// The reverse, strictly: runs "B" or "BxN" with B and N positive decimal integers below
// 2^31, no signs, spaces or empty items, at most `max_ranks` batches in all.
bool ParseRankBatches(const std::string& text, int64_t max_ranks, std::vector<int64_t>* out);

// "0:64x2\n20:76,52": the /split_history dataset's text.
std::string FormatSplitHistory(const std::vector<SplitChange>& history);
// The reverse: one "STEP:BATCHES" per line, at most `max_ranks` batches each. On failure
// `why` says which line.
bool ParseSplitHistory(const std::string& text, int64_t max_ranks, std::vector<SplitChange>* out,
                       std::string* why);
// What a history must be to belong to `s` (see the layout above); empty when it is.
std::string SplitHistoryProblem(const TrainState& s);

// The /order/<group> datasets: the arrays' names joined by "\n", and back.
std::string JoinNames(const std::vector<NamedArray>& arrays);
std::vector<std::string> SplitNames(const std::string& text);

}  // namespace checkpoint_format
}  // namespace dlh

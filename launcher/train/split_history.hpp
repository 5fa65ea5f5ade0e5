// DLH — the split history of a run: every split of the global batch it trained with and the
// step each took effect (SplitChange, launcher/storage/checkpoint.hpp). A run that balances
// its batches records it in checkpoints (/split_history) and in summary.json
// (balance.history); a run given the history with `--balance replay` trains with exactly
// those splits at exactly those steps, which makes its arithmetic that of the recording run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/storage/checkpoint.hpp"

namespace dlh {

using SplitHistory = std::vector<SplitChange>;

// The split in effect at `step`: the last change at or before it. `history` is non-empty
// and starts at or before `step` (CheckSplitHistory); throws Error otherwise.
const std::vector<int64_t>& SplitAt(const SplitHistory& history, int64_t step);

// Checks a history handed to this run: at least one entry, the first at step 0, steps
// increasing, `ranks` batches each, every batch in [1, max_batch], summing to `global`.
// Throws UsageError "<origin>[i]: ..." (origin names the file and field:
// "run/summary.json: balance.history").
void CheckSplitHistory(const SplitHistory& history, int ranks, int64_t global, int64_t max_batch,
                       const std::string& origin);

// [{"step": 0, "rank_batches": [64, 64]}, ...]: summary.json's balance.history.
nlohmann::json SplitHistoryJson(const SplitHistory& history);

// The history a run recorded, from its summary.json (balance.history) or one of its
// checkpoints (a path ending in .h5: /split_history). Sets *origin to "<path>: balance.history" or
// "<path>: split_history" for CheckSplitHistory's messages. Throws UsageError naming the
// file and field: unreadable, not JSON, no history, an entry of the wrong shape; a
// checkpoint that does not load says why (exit code 2 like every input of the command line).
SplitHistory ReadSplitHistory(const std::string& path, std::string* origin);

}  // namespace dlh

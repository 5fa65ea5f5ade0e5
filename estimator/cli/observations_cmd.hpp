// DLH — `dlh-estimate observations` and `refit`: the observation store (docs/reference/
// observations.md) listed, summarised per GPU type, checked and pruned; a calibration refitted
// with the jobs it has seen as extra rows.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// observations list|summary|check|prune (--store DIR | --cluster FILE) [--keep N]
// [--older-than T]. A damaged or foreign record is one warning line (file and field) and is
// skipped; check exits 1 when there is any. A missing or unsafe store: one line, exit 2.
int ObservationsCommand(const std::vector<std::string>& args);

// refit CALIBRATION --store DIR --out F [--gpu TYPE] [--all]: the calibration's samples plus
// one row per matching record (its features, per-rank batch, median step less the
// allreduce), refitted; prints the old and the new fit's quality.
int RefitCommand(const std::vector<std::string>& args);

}  // namespace dlh

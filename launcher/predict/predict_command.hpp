// DLH — `dlh-launch predict CHECKPOINT --data FILE`: a trained model applied to a data set's
// split on the CPU, one process, no MPI. Writes each sample's class probabilities (CSV) and,
// where the split is labelled, results.json (results.hpp): the accuracy, the confusion
// matrix, per-class precision/recall/F1, the pairs most confused and the misclassified
// samples the report draws. The network, its trained values and the inputs' normalisation
// all come from the checkpoint, so a model is usable without the run that made it.
#pragma once

#include <string>
#include <vector>

#include "launcher/storage/checkpoint.hpp"

namespace dlh {

// A checkpoint file, or the newest valid checkpoint of a run folder (RUN/checkpoints) or of
// a checkpoints folder; `*path` is the file used. Damaged newer files are passed over with a
// warning ("dlh-launch: COMMAND: ..."). Throws CheckpointError.
TrainState LoadTrainedModel(const std::string& where, std::string* path, const char* command);

// Returns an exit code; throws UsageError, DataError, CheckpointError, SpecError.
int RunPredictCommand(const std::vector<std::string>& args);

}  // namespace dlh

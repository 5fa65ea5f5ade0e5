// DLH — the signals a training run reacts to: SIGTERM and SIGINT (checkpoint, then
// stop) and SIGUSR1 (Slurm's pre-timeout signal, `--signal=B:USR1@...`: checkpoint, and
// continue unless --stop-on-usr1). The handler only records the signal; the training
// loop acts on it at the next step boundary, agreed by all ranks.
#pragma once

namespace dlh {

void InstallSignalHandlers();
// The most recent signal received since the last call (0 when none); clears it.
int TakePendingSignal();

}  // namespace dlh

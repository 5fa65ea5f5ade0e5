// DLH — where `dlh-launch run` puts its program's records (run_records.hpp): the side
// effects around the pure RunRecorder. Every rank follows its own program's lines and the
// signals it passed on; rank 0 appends the records to RUN_DIR/metrics.jsonl as they come
// (flushed per line, so `dlh-report --watch` sees a program's run live) and writes
// summary.json when the programs have ended.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "launcher/run/program_energy.hpp"
#include "launcher/run/progress.hpp"
#include "launcher/run/run_records.hpp"
#include "launcher/train/metrics.hpp"

namespace dlh {

class RunRecordWriter {
 public:
  // Rank 0 opens RUN_DIR/metrics.jsonl for appending (a resumed run adds to it); throws
  // Error when it cannot. `unix_offset`: Unix seconds minus the progress log's clock.
  // `energy`: this rank's meters (program_energy.hpp), read into rank 0's step records and
  // at the end; it must outlive the writer.
  RunRecordWriter(RunContext context, int rank, const std::string& run_dir, double unix_offset,
                  ProgramEnergy* energy);

  // After each read of the progress pipe: its new lines and the signals passed on since.
  void Follow(ProgressLog* log);

  // Collective, once every rank's program ended well or obeyed a stop: every rank's figures
  // to rank 0, which appends the end record and writes summary.json atomically. `in`: the
  // summary's inputs but context, rank0, ranks, energy and ended_unix, filled here. A stop
  // the program obeyed (`in.stop_signal`, else a SIGUSR1 it was sent) is not finished.
  // Returns the summary's "energy" on rank 0 (null on the others).
  nlohmann::json Finish(MPI_Comm comm, RunSummaryInputs in, const ProgressLog& log);

 private:
  void Write(const std::vector<nlohmann::json>& records);

  RunContext context_;
  RunRecorder recorder_;
  int rank_;
  std::string run_dir_;
  double unix_offset_;
  ProgramEnergy* energy_;
  bool usr1_ = false;
  std::unique_ptr<MetricsLog> log_;  // rank 0
};

}  // namespace dlh

// DLH replay — a job trace: what users asked for and what their jobs train.
//
// Two sources: a CSV file in the columns `sacct --parsable2 --delimiter=,` prints, with
// optional DLH columns (docs/reference/replay.md, "The trace file"), read by trace_csv.cpp;
// or the generator (trace_generator.cpp), whose sizes, durations and arrivals follow the
// published characterisations of real GPU clusters (Philly, Helios, PAI; cited there).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "estimator/replay/workload.hpp"

namespace dlh::replay {

struct TraceJob {
  std::string id;       // JobID
  double submit_s = 0;  // seconds after the trace's first submission
  // The user's own request.
  int units = 0;            // GPUs asked for in all (a node type's units: ranks on CPU nodes)
  int nodes = 0;            // nodes asked for; 0: as many as the count needs
  std::string device_type;  // the GPU type named (gres/gpu:TYPE); "": any
  double limit_s = 0;       // the time limit asked for; 0: none (UNLIMITED)
  double elapsed_s = 0;     // End - Start as recorded; 0: not run or unknown
  // What it trains (the DLH columns); empty network and spec: not given.
  std::string network;    // a catalogue network, "cnn-32x1:cifar10" (workload.hpp)
  std::string spec;       // or a spec file, resolved against the trace's folder
  int64_t samples = 0;    // training samples per epoch; 0: the network's data set's
  int epochs = 0;         // 0: not given
  double deadline_s = 0;  // after submission; 0: none
  int line = 0;           // the trace's line (0: generated), for messages
};

struct Trace {
  std::vector<TraceJob> jobs;
  std::string origin;  // the file, or "generated"
  // Where the request and the training are in the file (1-based; 0: generated or absent),
  // for messages about a row that reads well but cannot be replayed on the cluster.
  int tres_column = 0, network_column = 0, spec_column = 0;
  std::string tres_name;           // ReqTRES or AllocTRES, as the header spells it
  int skipped = 0;                 // rows left out: job steps, jobs without GPUs, never started
  std::vector<std::string> notes;  // why, for the first few
};

// ---- the CSV file (trace_csv.cpp) ----

// Parses a trace. `origin` names it in messages; relative Spec paths are resolved against
// `base_dir`. Throws UsageError "ORIGIN:LINE:COLUMN: FIELD: what is wrong" for bad input.
Trace ParseTraceCsv(const std::string& text, const std::string& origin,
                    const std::string& base_dir);
// Reads and parses a file (UsageError "PATH: cannot read: why" when it cannot be read).
Trace ReadTraceCsv(const std::string& path);
// The trace in the same format: sacct's columns (Start, End Unknown for jobs not yet run)
// and the DLH columns. Submission times are written from 2025-01-01T00:00:00.
std::string TraceCsv(const Trace& trace);

// ---- the generator (trace_generator.cpp) ----

struct GeneratorOptions {
  int jobs = 1000;
  uint64_t seed = 1;
  // Offered load: the users' own requests' GPU-seconds over the capacity's GPU-seconds
  // across the span of arrivals. Sets the arrival rate.
  double load = 0.8;
  // Deadlines: a share of jobs has one, a multiple of the job's best-case time (its fastest
  // allocation on the empty cluster), log-uniform between lo and hi.
  double deadline_share = 0.75;
  double deadline_lo = 1.25, deadline_hi = 10;
  double type_share = 0.5;  // users who name a GPU type in their request
};

Trace GenerateTrace(const GeneratorOptions& options, Workload& workload);

// A network, samples and epochs whose predicted time on `units` devices of node type `pool`
// comes close to `duration_s`: a member of a family drawn with `rng` (images or flat
// features), trained on the smallest catalogue data set that needs at most 300 epochs. Used
// by the generator, and for a CSV row without DLH columns (its elapsed time).
Training MatchTraining(Workload& workload, int units, int pool, double duration_s,
                       std::mt19937_64& rng);

}  // namespace dlh::replay

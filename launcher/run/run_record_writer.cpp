// DLH — where `dlh-launch run` puts its program's records (see run_record_writer.hpp).
#include "launcher/run/run_record_writer.hpp"

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <vector>

#include "common/atomic_file.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/run/child.hpp"

namespace dlh {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double Seconds(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }

}  // namespace

RunRecordWriter::RunRecordWriter(RunContext context, int rank, const std::string& run_dir,
                                 double unix_offset, ProgramEnergy* energy)
    : context_(context),
      recorder_(std::move(context)),
      rank_(rank),
      run_dir_(run_dir),
      unix_offset_(unix_offset),
      energy_(energy) {
  if (rank_ == 0) log_ = std::make_unique<MetricsLog>(run_dir_ + "/metrics.jsonl");
}

void RunRecordWriter::Write(const std::vector<nlohmann::json>& records) {
  if (!log_) return;
  for (const nlohmann::json& r : records) log_->write(r);
}

void RunRecordWriter::Follow(ProgressLog* log) {
  const std::string& device = log->described().device;
  for (const ProgressEvent& e : log->TakeEvents()) {
    std::vector<nlohmann::json> records = recorder_.Take(e, device, e.time + unix_offset_);
    if (log_ && energy_ && e.kind == ProgressEvent::Kind::kStep)
      for (nlohmann::json& r : records)
        if (!r.contains("event")) energy_->AddTo(device, &r);  // the step's record
    Write(records);
  }
  for (int s : TakeReceivedSignals()) {
    usr1_ = usr1_ || s == SIGUSR1;
    recorder_.Signal(s, UnixNow());
  }
}

nlohmann::json RunRecordWriter::Finish(MPI_Comm comm, RunSummaryInputs in, const ProgressLog& log) {
  // The program's processes, reaped by now: their CPU time over the run and peak memory.
  RankFigures mine = recorder_.Figures();
  struct rusage children {};
  if (getrusage(RUSAGE_CHILDREN, &children) == 0) {
    const double wall_s = UnixNow() - context_.launch_unix;
    if (wall_s > 0)
      mine.cpu_cores_busy = (Seconds(children.ru_utime) + Seconds(children.ru_stime)) / wall_s;
    mine.peak_rss_mib = double(children.ru_maxrss) / 1024;  // KiB
  }
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  double figures[RankFigures::kFigures];
  mine.ToArray(figures);
  std::vector<double> all(rank_ == 0 ? RankFigures::kFigures * size_t(size) : 0);
  MPI_CHECK(MPI_Gather(figures, RankFigures::kFigures, MPI_DOUBLE, all.data(),
                       RankFigures::kFigures, MPI_DOUBLE, 0, comm));
  // Every rank's energy, by the meter of the device its program said it ran on.
  RankEnergy my_energy;
  my_energy.why = "not measured";
  if (energy_) my_energy = energy_->Final(log.described().device);
  const std::vector<std::string> energies = mpi::AllGatherStrings(comm, RankEnergyText(my_energy));
  if (rank_ != 0) return nullptr;
  if (in.stop_signal == 0 && usr1_) in.stop_signal = SIGUSR1;
  in.finished = in.finished && in.stop_signal == 0;
  in.context = &context_;
  in.rank0 = &recorder_;
  in.device = log.described().device;
  for (int r = 0; r < size; ++r)
    in.ranks.push_back(RankFigures::FromArray(&all[RankFigures::kFigures * size_t(r)]));
  in.ended_unix = UnixNow();
  std::vector<RankEnergy> rank_energy;
  double samples = 0;
  for (size_t r = 0; r < energies.size(); ++r) {
    rank_energy.push_back(RankEnergyFromText(energies[r]));
    // The run's samples: every rank's, when each of its step lines gave them.
    samples = samples >= 0 && in.ranks[r].samples > 0 ? samples + in.ranks[r].samples : -1;
  }
  in.energy =
      ProgramEnergySummary(rank_energy, samples > 0 ? int64_t(samples) : 0,
                           energy_ ? energy_->Seconds() : in.ended_unix - context_.launch_unix);
  Write(recorder_.End(in.finished, in.stop_signal, in.device, in.ended_unix));
  try {
    WriteFileAtomically(run_dir_ + "/summary.json", RunSummary(in).dump(2) + "\n");
  } catch (const std::exception& e) {  // the program's work is done: a warning, not a failure
    std::fprintf(stderr, "dlh-launch: run: warning: summary.json not written: %s\n", e.what());
  }
  return in.energy;
}

}  // namespace dlh

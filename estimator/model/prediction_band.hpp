// DLH estimator — the prediction band of a whole job, and the Slurm time limit made from it
// (issue 40, "Predictions with an interval").
//
// The band. A time prediction's error is a factor: r = measured / predicted, and ln r is
// taken as normal with mean 0 and standard deviation sigma. The step's sigma comes with its
// speed (DeviceSpeed::log_sigma: the calibration's cross-validated spread, a transfer's
// added error, ...); the other phases have their own, stated below. The band's upper end is
// the time the job stays under with 90% confidence, one-sided: a part predicted at t has its
// upper end t exp(z sigma), z = 1.2816 (the standard normal's 90% quantile). The parts:
//   warm-up, steps, evaluations   the step's sigma: all three run at the step's speed, and
//                                 its error is the model's (one calibration, one transfer),
//                                 so every step of a job errs the same way: it does not
//                                 average out over the steps
//   start-up                      kStartupLogSigma
//   staging, data, checkpoints    kIoLogSigma
// The parts' errors come from different sources and are taken as independent: their
// excesses over the prediction add in quadrature,
//   upper = total + sqrt( sum over parts of (t_p (exp(z sigma_p) - 1))^2 )
// exact for a job of one part; for several, a normal approximation of the sum of the excesses
// (it lies between the largest part's own upper end and the sum of all of them). With every
// sigma 0 the band is the prediction itself.
//
// The time limit, in whole minutes (Slurm's unit), rounded up:
//   limit >= upper + room,  room = max(kMinRoomSeconds, kRoomFraction x upper)
// The room covers what the model leaves out around the job, in proportion to it rather than
// a fixed grace: the node's prolog and epilog, the batch script's own work around srun (its
// report, a requeue), Slurm's own timing. For a job predicted over two minutes, the limit
// is at most 1.5x the prediction (whole minutes, rounded down) wherever that still holds the
// band's upper end: the room shrinks first (Slurm ends a job over its limit only at its next
// check, every 30 s, which leaves a little room of its own). Without that, whole minutes
// alone would put jobs of 2-4 minutes over 1.5x. A band wider than that cannot be capped;
// its limit is then the minute, from the least that holds the upper end up to the one with
// the whole room, that the job most likely ends within 1.5x of (ln r normal with the sigma
// the band implies; ties to more room), so the room never costs a minute the job is
// unlikely to need. When the
// job script asks Slurm for a signal before the limit (sbatch --signal, as
// share/examples/train.sbatch does to checkpoint and requeue), a signal may come up to
// kSignalEarlySeconds before the time asked for (sbatch(1)), so
//   limit >= upper + stop + kStopSlackSeconds + kSignalEarlySeconds
// (stop: JobPhases::stop_s, the step under way and one checkpoint written whole), and the
// signal's lead is the stop and its slack, lead = stop + kStopSlackSeconds (whole seconds):
// the signal comes as late as leaves the job time to stop, so whatever the whole minutes
// add goes to a job running a little past its band, which may then still finish without
// a requeue. A job inside its band is never signalled (the earliest signal, limit - lead -
// kSignalEarlySeconds, is after the upper end); a job past it that is signalled has at
// least the stop's time to checkpoint before the limit. Every job ends inside its limit
// while it stays inside its band; with a signal, past it too (it stops).
#pragma once

#include <string>

#include "estimator/model/job_time.hpp"

namespace dlh {

constexpr double kBandZ = 1.2816;  // one-sided 90%: P(ln r <= z sigma) = 0.9
// Start-up (srun, MPI/NCCL, CUDA context): a site measures one figure for every job shape
// (runtime.startup_s), and BENCHMARKS.md "Whole jobs" saw 0.2-0.7 s against a site figure of
// 0.63 s, and 0.63 s against local.json's 2 s from another host: a factor of 2-3 either way,
// sigma ln(3) / 2 ~ 0.5. An assumption of the same size as those, not a fit.
constexpr double kStartupLogSigma = 0.5;
// Reading the data set, staging and checkpoints: file-system rates (runtime.read_gbs,
// write_gbs) vary with the load others put on shared storage; assumed a factor of about 2
// at 90% (sigma 0.5), not measured.
constexpr double kIoLogSigma = 0.5;

// Room after the band's upper end: a twentieth of the job, at least 15 s.
constexpr double kRoomFraction = 0.05;
constexpr double kMinRoomSeconds = 15;
// sbatch(1), --signal: "the signal may be sent up to 60 seconds earlier than specified".
// Measured on the local Slurm 22.05 test cluster (share/slurm/start-cluster.sh, 2026-11-28):
// jobs with a 2-minute limit asking B:USR1@30 and @47 got it 32 s and 63 s before the
// limit, 2 s and 16 s early (slurmctld looks every 30 s).
constexpr double kSignalEarlySeconds = 60;
// After the ranks stop: srun's teardown, the script's final report and `scontrol requeue`.
constexpr double kStopSlackSeconds = 10;
// The cap on the room: kMostOfPrediction x the band's lower end (the prediction divided by
// the upper end's ratio to it), for jobs over kSqueezeAboveSeconds.
constexpr double kMostOfPrediction = 1.5;
constexpr double kSqueezeAboveSeconds = 120;
// The largest lead sbatch --signal accepts.
constexpr int kMaxSignalLead = 65535;

// The 90% upper end of the job's time (see above); `step_log_sigma` <= 0 counts as 0.
double UpperEnd(const JobPhases& phases, double step_log_sigma);

struct TimeLimit {
  long minutes = 0;       // at least 1, at most 100 years
  int signal_lead_s = 0;  // with a signal: its lead in whole seconds; 0: no signal
  double seconds() const { return 60.0 * double(minutes); }
};

// The limit of a job predicted as `phases` with the band's upper end `upper_s` (see above);
// `signal`: the job script asks for a signal before the limit.
TimeLimit TimeLimitFor(const JobPhases& phases, double upper_s, bool signal);

// Slurm's form of whole minutes: "D-HH:MM:SS" or "HH:MM:SS".
std::string SlurmMinutes(long minutes);

// "1m52s (90% <= 2m20s)"; the prediction alone when the band is not known (upper <= total).
std::string BandText(double total_s, double upper_s);

// A step speed's uncertainty for people: ", 90% <= +12%" (exp(z sigma) - 1); "" for 0.
std::string SpreadText(double log_sigma);

}  // namespace dlh

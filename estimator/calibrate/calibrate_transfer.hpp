// DLH estimator — does a calibration describe this machine, and if not, can it be carried
// here? (check-calibration, `make demo`; issue 40.)
//
// A calibration records a probe of its machine (launcher/probe/host_probe.hpp). Against the
// host's own probe it either
//   matches    the engine fingerprint is this build's, and the probes agree within the
//              tolerances below (what the probe's own run-to-run spread allows);
//   transfers  the engine is this build's but the machine differs in speed: the time
//              model's terms are scaled by the probes' measured ratios (wave_scaling.hpp:
//              compute terms by the sgemm ratio, memory terms by the bandwidth ratio), with
//              an added uncertainty; or
//   is refused another engine, no probe recorded, another OpenBLAS core type (other kernels,
//              whose speeds do not scale by one ratio), another thread count than the
//              calibration's (fewer cores than it used, or other than all of them for a
//              calibration made at all the cores), ratios outside a sane range, or (a CPU)
//              ratios far apart: another balance of compute and memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "estimator/model/time_model.hpp"
#include "estimator/model/wave_scaling.hpp"

namespace dlh {

// How far the host's probe may differ from the recorded one and still "match": a few times
// the probe's run-to-run spread on a shared 2-core host (sgemm 3%, bandwidth 5% between
// interleaved runs, 2026-11-28), well under the 25% that hosts of one kind differ by.
struct ProbeTolerance {
  double sgemm = 0.10;
  double memory = 0.15;
};

// Ratios beyond [1/kMaxTransferRatio, kMaxTransferRatio] are refused: past a factor of 3 the
// host is another class of machine (other caches, another vector width), whose step time no
// longer follows two rates. Within it the transfer was measured as far as x0.35 (a CPU quota
// of 0.3 cores): validation MAPE 8-12% transferred, 61-65% not (BENCHMARKS.md).
constexpr double kMaxTransferRatio = 3.0;

// A CPU calibration whose probe ratios part by more than this (FLOP/s over bandwidth, or the
// reverse) is refused too: the transfer takes the host for the calibration's machine at
// another speed, and a speed change (a quota, a clock, a busier or a quieter host) moves
// compute and memory together (a CFS quota of 0.75 cores: FLOP/s x0.63, bandwidth x0.76,
// apart by x1.2; transferred MAPE 6.9%). An Intel Xeon VM carried the shipped Cooperlake
// calibration of another host at FLOP/s x1.80 and bandwidth x0.45, x4.0 apart: MAPE 103.9%
// transferred, 50.8% as it was, 12.7% calibrated there (make bench, 2026-12-07): another
// balance of compute and memory, which no two rates carry. Chosen between those two.
constexpr double kMaxTransferSpread = 2.5;

// The added uncertainty of a transfer (TransferLogSigma): a base, and a part per unit of
// |ln ratio|. Measured (2026-11-28, 2 cores, CPU quotas of 0.5 and 0.3 cores, six transfers
// of one calibration, each judged on the 7 validation models): a transfer errs on every
// model alike, by the mean of ln(measured / predicted), which ranged over -0.12 .. +0.085
// with a standard deviation of 0.08, no larger at x0.35 than at x0.74.
constexpr double kTransferBaseLogSigma = 0.07;
constexpr double kTransferLogSigmaPerLogRatio = 0.03;

// Whether a CPU transfer also divides the fixed terms (the per-step overhead and the
// per-layer costs) by the sgemm ratio. On a CPU they are work of the same cores (the thread
// pool's hand-offs, the loops around each layer), unlike a GPU's kernel launches, which the
// host sets. Measured on the same six transfers: validation MAPE 9.7% on average scaled,
// 10.5% kept (the overhead is 2.3 ms of 55-1000 ms steps, so the choice moves little).
constexpr bool kTransferScalesFixedTerms = true;

enum class CalibrationFit { kMatches, kTransfers, kRefused };

struct CalibrationCheck {
  CalibrationFit fit = CalibrationFit::kRefused;
  std::string why;       // kRefused: the reason; else what was compared
  SpeedRatio ratio;      // host / calibration
  double log_sigma = 0;  // kTransfers: the added uncertainty (of ln t)
  // A CPU calibration whose OpenBLAS ran the other core type of one kernel family (Zen
  // there, Haswell here): one sgemm kernel, blocked otherwise. Never a match; of two
  // transfers the one made with this host's own kernels is taken (check-calibration).
  bool other_kernels = false;
};

// Compares calibration `c` (read from `origin`, which messages name) with `host_probe` (the
// host's probe JSON, read from `host_origin`) and this build's engine. Throws ProbeError
// naming the origin and the field for a damaged probe, in either.
CalibrationCheck CheckCalibrationAgainst(const Calibration& c, const std::string& origin,
                                         const nlohmann::json& host_probe,
                                         const ProbeTolerance& tolerance = {},
                                         const std::string& host_origin = "this host's probe");

// The added uncertainty of a transfer by `ratio`, as a standard deviation of ln(measured /
// predicted): grows with how far the ratios reach (see the .cpp for the measurement).
double TransferLogSigma(SpeedRatio ratio);

// `c` carried to the host: coefficients scaled (ScaleCoefficients), the samples' seconds
// scaled as their predictions were (so that a refit keeps the transfer), their energy
// dropped (not measured here), probe = host_probe, host = the probe's host, transferred_from
// = "<from>, <c.host>", transfer_log_sigma = check.log_sigma.
Calibration TransferCalibration(const Calibration& c, const CalibrationCheck& check,
                                const nlohmann::json& host_probe, const std::string& from,
                                bool scale_fixed_terms = kTransferScalesFixedTerms);

// "FLOP/s x0.81, bandwidth x0.93 (added uncertainty ±9%)"
std::string TransferText(const CalibrationCheck& check);

}  // namespace dlh

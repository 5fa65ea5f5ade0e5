// Tests of the device probe read back (launcher/probe/probe_record.cpp), a calibration's
// probe in the file format (time_model.cpp), and the check and transfer of a calibration
// against a host's probe (estimator/calibrate/calibrate_transfer.cpp).
#include "estimator/calibrate/calibrate_transfer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "estimator/model/engine_fingerprint.hpp"
#include "launcher/probe/host_probe.hpp"
#include "launcher/probe/probe_record.hpp"

namespace dlh {
namespace {

using nlohmann::json;

json CpuProbe(double gflops, double gbs, const std::string& core = "Haswell") {
  return json{{"kind", "cpu"},
              {"taken", "2026-11-28T10:00:00Z"},
              {"host", "AMD EPYC, 2 cores"},
              {"blas_core", core},
              {"threads", 2},
              {"sgemm_gflops", gflops},
              {"sgemm_gflops_by_threads", {gflops / 2, gflops}},
              {"memory_gbs", gbs},
              {"memory_gbs_by_threads", {gbs * 0.8, gbs}},
              {"seconds", 3.1}};
}

Calibration CpuCalibration() {
  Calibration c;
  c.device = "cpu";
  c.host = "AMD EPYC, 2 cores";
  c.threads = 2;
  c.created = "2026-11-28T10:00:00Z";
  c.engine = EngineFingerprint("cpu");
  c.model.device = "cpu";
  c.model.coef = {1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 6e-9, 7e-9, 8e-5, 9e-5, 0, 0};
  c.probe = CpuProbe(200, 20);
  TimingSample s;
  s.model = "base";
  s.batch = 64;
  s.features.conv_flops_fwd = 1e7;
  s.features.dense_flops_fwd = 1e6;
  s.features.activation_elements = 1e5;
  s.features.params = 1e5;
  s.features.conv_layers = 2;
  s.features.dense_layers = 1;
  s.seconds = c.model.seconds(s.features, s.batch);
  s.joules = 2;
  c.samples.push_back(s);
  return c;
}

std::string ProbeProblem(const json& j) {
  try {
    ReadProbe(j, "cal.json: probe");
  } catch (const ProbeError& e) {
    return e.what();
  }
  return "";
}

TEST(ProbeRecord, ReadsACpuProbe) {
  const ProbeRecord p = ReadProbe(CpuProbe(200, 20), "p");
  EXPECT_EQ(p.kind, "cpu");
  EXPECT_EQ(p.blas_core, "Haswell");
  EXPECT_EQ(p.threads, 2);
  EXPECT_DOUBLE_EQ(p.SgemmAt(1), 100);
  EXPECT_DOUBLE_EQ(p.SgemmAt(2), 200);
  EXPECT_DOUBLE_EQ(p.SgemmAt(8), 200);  // more threads than measured: the last count
  EXPECT_DOUBLE_EQ(p.MemoryAt(1), 16);
}

// A probe with the cache triad (host_probe.hpp); one without reads as not measured.
json WithCache(json probe, double gbs) {
  probe["cache_gbs"] = gbs;
  probe["cache_gbs_by_threads"] = {gbs * 0.5, gbs};
  return probe;
}

TEST(ProbeRecord, ReadsTheCacheTriadWhereThereIsOne) {
  EXPECT_DOUBLE_EQ(ReadProbe(CpuProbe(200, 20), "p").CacheAt(2), 0);
  const ProbeRecord p = ReadProbe(WithCache(CpuProbe(200, 20), 180), "p");
  EXPECT_DOUBLE_EQ(p.CacheAt(1), 90);
  EXPECT_DOUBLE_EQ(p.CacheAt(2), 180);
  json j = WithCache(CpuProbe(200, 20), 180);
  j.erase("cache_gbs_by_threads");
  EXPECT_EQ(ProbeProblem(j), "cal.json: probe.cache_gbs_by_threads: required");
}

TEST(ProbeRecord, ReadsAGpuProbe) {
  const json g{{"kind", "cuda"},        {"taken", "2026-11-28T10:00:00Z"},
               {"name", "NVIDIA H100"}, {"sm_count", 132},
               {"sm_clock_mhz", 1980},  {"memory_clock_mhz", 2619},
               {"gemm_tflops", 51.0},   {"conv_tflops", 80.5},
               {"memory_gbs", 2900.0},  {"seconds", 2.5}};
  const ProbeRecord p = ReadProbe(g, "p");
  EXPECT_EQ(p.name, "NVIDIA H100");
  EXPECT_EQ(p.sm_count, 132);
  EXPECT_DOUBLE_EQ(p.conv_tflops, 80.5);
}

TEST(ProbeRecord, DamageIsOneLineNamingTheField) {
  json j = CpuProbe(200, 20);
  j["sgemm_gflops"] = "fast";
  EXPECT_EQ(ProbeProblem(j),
            "cal.json: probe.sgemm_gflops: must be a positive number, got \"fast\"");
  j = CpuProbe(200, 20);
  j["memory_gbs_by_threads"] = {1.0};
  EXPECT_EQ(ProbeProblem(j),
            "cal.json: probe.memory_gbs_by_threads: must be an array of 2 positive numbers (one "
            "per thread count), got an array of 1 item");
  j = CpuProbe(200, 20);
  j["sgemm_gflops_by_threads"][1] = -3;
  EXPECT_EQ(ProbeProblem(j),
            "cal.json: probe.sgemm_gflops_by_threads[1]: must be a positive number, got -3");
  j = CpuProbe(200, 20);
  j.erase("blas_core");
  EXPECT_EQ(ProbeProblem(j), "cal.json: probe.blas_core: required");
  j["kind"] = "tpu";
  EXPECT_EQ(ProbeProblem(j), "cal.json: probe.kind: must be \"cpu\" or \"cuda\", got \"tpu\"");
  EXPECT_EQ(ProbeProblem(json::array()),
            "cal.json: probe: must be a JSON object, got an empty array");
  try {
    ReadProbe(json{{"kind", "cpu"}}, "probe.json:");
  } catch (const ProbeError& e) {
    EXPECT_STREQ(e.what(), "probe.json: taken: required");
  }
  j = CpuProbe(200, 20);
  j["threads"] = 0;
  EXPECT_NE(ProbeProblem(j).find("probe.threads: must be an integer from 1"), std::string::npos);
}

TEST(ProbeRecord, TheLiveProbeFollowsItsOwnSchema) {
  ProbeOptions o;
  o.threads = 1;
  o.budget_s = 0.2;
  const json live = ProbeCpu(o);
  const ProbeRecord p = ReadProbe(live, "live");
  EXPECT_EQ(p.threads, 1);
  EXPECT_EQ(p.host, HostCpuDescription());
  EXPECT_GT(p.sgemm_gflops, 0);
  EXPECT_GT(p.memory_gbs, 0);
  EXPECT_THROW(ProbeDevice("tpu", o), UsageError);
  o.threads = -1;
  EXPECT_THROW(ProbeCpu(o), UsageError);
}

TEST(CalibrationFile, ProbeAndTransferRoundTripAndOldFilesLoad) {
  Calibration c = CpuCalibration();
  c.transferred_from = "cpu.json, AMD EPYC, 2 cores";
  c.transfer_log_sigma = 0.08;
  const Calibration back = CalibrationFromJson(CalibrationToJson(c), "cal.json");
  EXPECT_EQ(back.probe, c.probe);
  EXPECT_EQ(back.transferred_from, c.transferred_from);
  EXPECT_DOUBLE_EQ(back.transfer_log_sigma, 0.08);

  json old = CalibrationToJson(CpuCalibration());
  old.erase("probe");
  const Calibration plain = CalibrationFromJson(old, "old.json");
  EXPECT_TRUE(plain.probe.is_null());
  EXPECT_EQ(plain.transferred_from, "");
  EXPECT_FALSE(CalibrationToJson(plain).contains("transferred_from"));

  json bad = CalibrationToJson(c);
  bad["probe"] = 3;
  EXPECT_THROW(CalibrationFromJson(bad, "cal.json"), EstimateError);
  bad = CalibrationToJson(c);
  bad.erase("transferred_from");  // the pair comes together
  EXPECT_THROW(CalibrationFromJson(bad, "cal.json"), EstimateError);
}

TEST(CalibrationCheck, SameProbeWithinToleranceMatches) {
  const Calibration c = CpuCalibration();
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20)).fit,
            CalibrationFit::kMatches);
  // 8% slower sgemm, 12% more bandwidth: within 10% and 15%.
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", CpuProbe(184, 22.4)).fit,
            CalibrationFit::kMatches);
}

// Where both probes have the cache triad, the memory terms go by it: the triad beyond the
// cache may switch speeds on a host whose steps do not follow it.
TEST(CalibrationCheck, TheCacheTriadDecidesWhereBothHaveOne) {
  Calibration c = CpuCalibration();
  c.probe = WithCache(CpuProbe(200, 20), 180);
  // The memory triad 1.5x, the cache triad the same: matches.
  CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", WithCache(CpuProbe(200, 30), 185));
  EXPECT_EQ(k.fit, CalibrationFit::kMatches) << k.why;
  EXPECT_NE(k.why.find("cache 185.0 GB/s here, 180.0 there"), std::string::npos) << k.why;
  // The cache triad slower: transfers by its ratio.
  k = CheckCalibrationAgainst(c, "cal.json", WithCache(CpuProbe(200, 20), 90));
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers) << k.why;
  EXPECT_DOUBLE_EQ(k.ratio.bandwidth, 0.5);
  // The host's probe without one: the memory triad, as before.
  k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 30));
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers) << k.why;
  EXPECT_DOUBLE_EQ(k.ratio.bandwidth, 1.5);
}

TEST(CalibrationCheck, AnotherSpeedTransfersByTheMeasuredRatios) {
  Calibration c = CpuCalibration();
  c.optimizer_update.params = 1000;
  c.optimizer_update.sgd_s = 0.05e-9;
  c.optimizer_update.momentum_s = 0.1e-9;
  c.optimizer_update.adam_s = 0.9e-9;
  c.activation_cost.values = 65536;
  c.activation_cost.gelu_forward_s = 3e-9;
  c.activation_cost.gelu_backward_s = 5e-9;
  c.activation_cost.silu_forward_s = 1e-9;
  c.activation_cost.silu_backward_s = 2e-9;
  const json here = CpuProbe(100, 18);  // half the FLOP/s, 0.9 the bandwidth
  const CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", here);
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers) << k.why;
  EXPECT_DOUBLE_EQ(k.ratio.flops, 0.5);
  EXPECT_DOUBLE_EQ(k.ratio.bandwidth, 0.9);
  EXPECT_NEAR(k.log_sigma, kTransferBaseLogSigma + kTransferLogSigmaPerLogRatio * std::log(2),
              1e-12);
  EXPECT_NE(TransferText(k).find("FLOP/s x0.50, bandwidth x0.90 (added uncertainty"),
            std::string::npos);

  const Calibration t = TransferCalibration(c, k, here, "cal.json", /*scale_fixed_terms=*/true);
  for (int i = 0; i < kTimeTerms; ++i) {
    const double want = TimeTermRate(i) == TermRate::Memory ? 1 / 0.9 : 2;
    EXPECT_NEAR(t.model.coef[size_t(i)], c.model.coef[size_t(i)] * want,
                1e-12 * c.model.coef[size_t(i)])
        << i;
  }
  // An optimizer's update moves with the bandwidth (optimizer_cost.hpp).
  EXPECT_NEAR(t.optimizer_update.adam_s, 0.9e-9 / 0.9, 1e-21);
  EXPECT_NEAR(t.optimizer_update.sgd_s, 0.05e-9 / 0.9, 1e-21);
  // GELU and SiLU with the FLOP/s: erf and exp are arithmetic (activation_cost.hpp).
  EXPECT_NEAR(t.activation_cost.gelu_forward_s, 3e-9 * 2, 1e-21);
  EXPECT_NEAR(t.activation_cost.silu_backward_s, 2e-9 * 2, 1e-21);
  EXPECT_EQ(t.activation_cost.values, 65536);
  const Calibration kept = TransferCalibration(c, k, here, "cal.json", false);
  EXPECT_DOUBLE_EQ(kept.model.coef[0], c.model.coef[0]);  // the overhead as measured
  EXPECT_DOUBLE_EQ(kept.model.coef[1], c.model.coef[1] * 2);
  EXPECT_EQ(t.probe, here);
  EXPECT_EQ(t.transferred_from, "cal.json, AMD EPYC, 2 cores");
  EXPECT_DOUBLE_EQ(t.transfer_log_sigma, k.log_sigma);
  // The samples moved with the model, so that a refit keeps the transfer; energy not known.
  ASSERT_EQ(t.samples.size(), 1u);
  EXPECT_NEAR(t.samples[0].seconds, t.model.seconds(t.samples[0].features, 64), 1e-12);
  EXPECT_EQ(t.samples[0].joules, -1);
}

// OpenBLAS's Zen target runs Haswell's sgemm kernel with blocking of its own: carried by the
// probes' ratios, never a match, even where the probes agree.
TEST(CalibrationCheck, ZenAndHaswellKernelsTransferAndNeverMatch) {
  const Calibration c = CpuCalibration();  // Haswell
  CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(100, 10, "Zen"));
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers) << k.why;
  EXPECT_DOUBLE_EQ(k.ratio.flops, 0.5);
  EXPECT_NE(k.why.find("OpenBLAS's Zen kernels here, its Haswell kernels there"), std::string::npos)
      << k.why;
  k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20, "Zen"));
  EXPECT_EQ(k.fit, CalibrationFit::kTransfers) << k.why;
  EXPECT_DOUBLE_EQ(k.ratio.flops, 1.0);
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20)).fit,
            CalibrationFit::kMatches);
  // And back: a Zen calibration on a Haswell host.
  Calibration zen = CpuCalibration();
  zen.probe = CpuProbe(200, 20, "Zen");
  EXPECT_EQ(CheckCalibrationAgainst(zen, "cal.json", CpuProbe(300, 20)).fit,
            CalibrationFit::kTransfers);
  EXPECT_EQ(CheckCalibrationAgainst(zen, "cal.json", CpuProbe(200, 20, "SkylakeX")).fit,
            CalibrationFit::kRefused);
}

TEST(CalibrationCheck, ATransferOfATransferAddsItsUncertainty) {
  Calibration c = CpuCalibration();
  c.transferred_from = "first.json, X";
  c.transfer_log_sigma = 0.1;
  const json here = CpuProbe(100, 20);
  const CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", here);
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers);
  const Calibration t = TransferCalibration(c, k, here, "cal.json");
  EXPECT_NEAR(t.transfer_log_sigma, std::hypot(0.1, k.log_sigma), 1e-12);
}

TEST(CalibrationCheck, RefusedWhereNoTransferIsTrustworthy) {
  Calibration c = CpuCalibration();
  // Another OpenBLAS core type.
  CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20, "SkylakeX"));
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("Haswell kernels there and its SkylakeX kernels here"), std::string::npos);
  // Ratios beyond the range.
  k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(50, 20));
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("beyond the factor of 3"), std::string::npos) << k.why;
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 70)).fit,
            CalibrationFit::kRefused);
  // A GPU probe for a CPU calibration.
  json gpu{{"kind", "cuda"},      {"taken", "t"},        {"name", "H100"},       {"sm_count", 132},
           {"gemm_tflops", 50.0}, {"conv_tflops", 80.0}, {"memory_gbs", 3000.0}, {"seconds", 2.0}};
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", gpu).fit, CalibrationFit::kRefused);
  // No probe recorded.
  c.probe = nullptr;
  k = CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20));
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("records no probe"), std::string::npos);
  // Another engine: refused before any probe is read.
  c = CpuCalibration();
  c.engine = "000000000000";
  k = CheckCalibrationAgainst(c, "cal.json", nullptr);
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("measured with engine 000000000000"), std::string::npos);
}

TEST(CalibrationCheck, ADamagedProbeNamesTheFileAndField) {
  Calibration c = CpuCalibration();
  c.probe["memory_gbs"] = nullptr;
  try {
    CheckCalibrationAgainst(c, "cal.json", CpuProbe(200, 20));
    FAIL() << "no error";
  } catch (const ProbeError& e) {
    EXPECT_STREQ(e.what(), "cal.json: probe.memory_gbs: must be a positive number, got null");
  }
}

TEST(CalibrationCheck, AnotherThreadCountIsRefused) {
  Calibration c = CpuCalibration();  // 2 threads
  json one_core = CpuProbe(200, 20);
  one_core["threads"] = 1;
  one_core["sgemm_gflops_by_threads"] = {200.0};
  one_core["memory_gbs_by_threads"] = {20.0};
  CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", one_core);
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("calibrated at 2 threads, this host runs 1"), std::string::npos) << k.why;
  // Made at all the cores of a 2-core host: a 4-core host runs 4 threads.
  c.threads = 0;
  json four = CpuProbe(200, 20);
  four["threads"] = 4;
  four["sgemm_gflops_by_threads"] = {100.0, 200.0, 300.0, 400.0};
  four["memory_gbs_by_threads"] = {16.0, 20.0, 22.0, 23.0};
  k = CheckCalibrationAgainst(c, "cal.json", four);
  EXPECT_EQ(k.fit, CalibrationFit::kRefused);
  EXPECT_NE(k.why.find("(all the cores there), this host runs 4"), std::string::npos) << k.why;
  // Made at 2 threads given: a 4-core host runs them too, compared at 2.
  c.threads = 2;
  EXPECT_EQ(CheckCalibrationAgainst(c, "cal.json", four).fit, CalibrationFit::kMatches);
}

TEST(CalibrationCheck, ComparesAtTheCalibrationsThreads) {
  Calibration c = CpuCalibration();
  c.threads = 1;  // timed at 1 thread: the probes' 1-thread rates are compared
  json here = CpuProbe(200, 20);
  here["sgemm_gflops_by_threads"][0] = 50.0;  // half of the recorded 100 at 1 thread
  const CalibrationCheck k = CheckCalibrationAgainst(c, "cal.json", here);
  ASSERT_EQ(k.fit, CalibrationFit::kTransfers);
  EXPECT_DOUBLE_EQ(k.ratio.flops, 0.5);
  EXPECT_DOUBLE_EQ(k.ratio.bandwidth, 1);
}

}  // namespace
}  // namespace dlh

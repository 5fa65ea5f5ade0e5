// `dlh-estimate refit` on a GPU calibration (estimator/calibrate/refit.hpp): the jobs of the
// calibration's GPU, and the GPU layer model that plans the type fitted again with them. The
// jobs are the H100 validation models with the step times the lent H100 measured for them
// (share/gpu/results/h100-80gb-hbm3-validation.json), as the CUDA engine's records would
// hold them.
#include "estimator/calibrate/refit.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/spec_json.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/gpu_model_layers.hpp"
#include "estimator/model/features.hpp"
#include "estimator/observe/model_key.hpp"
#include "tests/util/repo_file.hpp"

namespace dlh {
namespace {

using test::RepoFile;

const char* kH100 = "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79 GiB)";

// A job's record as the built-in trainer on a GPU writes it: the plan's features, the spec.
Observation GpuJob(const TrainSpec& spec, int64_t batch, double step_s, const std::string& device) {
  Observation r;
  r.created = "2026-12-02T12:00:00Z";
  r.command = "train";
  r.model_name = spec.name;
  r.spec = nlohmann::json::parse(SpecToJson(spec, "unknown").dump());
  r.features = FeaturesRecordJson(ComputeFeatures(spec));
  r.model_key = FeaturesModelKey(ComputeFeatures(spec));
  r.gpu_type = "h100";
  r.device = device;
  r.gpus_per_node = 1;
  r.per_rank_batch = r.global_batch = batch;
  r.step_s = step_s;
  r.steps = 100;
  r.total_s = 100 * step_s;
  return r;
}

// The saved H100 measurements of the validation models, as records of jobs.
std::vector<Observation> MeasuredJobs(const std::string& device) {
  std::map<std::string, TrainSpec> specs;
  for (const SweepEntry& e : GpuValidationModels()) specs.emplace(e.spec.name, e.spec);
  std::vector<Observation> out;
  const Calibration measured =
      LoadCalibration(RepoFile("share/gpu/results/h100-80gb-hbm3-validation.json"));
  for (const TimingSample& s : measured.samples)
    out.push_back(GpuJob(specs.at(s.model), s.batch, s.seconds, device));
  return out;
}

TEST(Refit, ARecordsGpuIsTheNameInItsDevice) {
  EXPECT_EQ(RecordGpuName(kH100), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(RecordGpuName("cuda:1 (NVIDIA A100-SXM4-80GB)"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(RecordGpuName("cpu"), "");
  EXPECT_EQ(RecordGpuName("cpu, pipeline stage 1 of 2 (layers 0-3)"), "");
  // The CUDA engine's name before 2026-12-02 ("NAME (GPU 0, ...)") read as no GPU.
  EXPECT_EQ(RecordGpuName("NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 79 GiB)"), "");
}

TEST(Refit, AGpuCalibrationLearnsItsGpusJobsInTheLayerModel) {
  const Calibration cal = LoadCalibration(RepoFile("share/calibration/h100-80gb-hbm3.json"));
  ASSERT_TRUE(cal.gpu_layer_model.present);
  std::vector<Observation> records = MeasuredJobs(kH100);
  const size_t jobs = records.size();
  ASSERT_GE(jobs, 10u);
  // Not this calibration's: another GPU, and a CPU job of the same model.
  records.push_back(records.front());
  records.back().device = "cuda:0 (NVIDIA A100-SXM4-80GB, sm_80, 79 GiB)";
  records.push_back(records.front());
  records.back().device = "cpu";
  records.back().gpus_per_node = 0;

  RefitReport report;
  RefitOptions o;
  o.folds = 2;  // the fits' cross-validation is not what is tested (5 folds: 9 s here)
  const Calibration refit = RefitCalibration(cal, records, o, "test", &report);
  EXPECT_EQ(report.added, int(jobs));
  EXPECT_EQ(report.skipped, 2);
  EXPECT_EQ(refit.samples.size(), cal.samples.size() + jobs);
  EXPECT_EQ(refit.samples.back().model, "observed " + records[jobs - 1].model_name);

  const LayerRefit& l = report.layers;
  ASSERT_TRUE(l.done) << l.why_not;
  EXPECT_EQ(l.sweep_rows, int(cal.samples.size()));
  EXPECT_EQ(l.observed_rows, int(jobs));
  EXPECT_EQ(l.fit.samples, int(cal.samples.size() + jobs));
  // The jobs taught it: on them the refitted model errs less than the one fitted without them.
  EXPECT_LT(l.new_observed_mape, l.old_observed_mape);
  const StoredGpuLayerModel& m = refit.gpu_layer_model;
  EXPECT_TRUE(m.present);
  EXPECT_NE(m.params.step_s, cal.gpu_layer_model.params.step_s);
  EXPECT_EQ(m.samples, l.fit.samples);
  EXPECT_NE(m.fitted_to.find(std::to_string(jobs) + " observed jobs"), std::string::npos)
      << m.fitted_to;
  // Its band keeps the validation error measured outside every fit.
  EXPECT_EQ(m.validation_mape, cal.gpu_layer_model.validation_mape);
  EXPECT_EQ(m.peaks.sms, cal.gpu_layer_model.peaks.sms);

  // A later gpu-layers reads the refit file: its observed rows are counted, not rebuilt.
  int observed = 0;
  EXPECT_EQ(GpuSamplesWithLayers(refit.samples, "refit.json", &observed).size(),
            cal.samples.size());
  EXPECT_EQ(observed, int(jobs));
}

TEST(Refit, OnlyTheTypeAskedFor) {
  const Calibration cal = LoadCalibration(RepoFile("share/calibration/h100-80gb-hbm3.json"));
  std::vector<Observation> records = MeasuredJobs(kH100);
  records.front().gpu_type = "h100-pcie";
  for (Observation& r : records) r.spec = nullptr;  // the linear model's rows only: no layer fit
  RefitOptions o;
  o.gpu = "h100";
  o.folds = 2;
  RefitReport report;
  RefitCalibration(cal, records, o, "test", &report);
  EXPECT_EQ(report.added, int(records.size()) - 1);
  EXPECT_EQ(report.skipped, 1);
}

TEST(Refit, RecordsWithoutSpecsLeaveTheLayerModelAsItWas) {
  const Calibration cal = LoadCalibration(RepoFile("share/calibration/h100-80gb-hbm3.json"));
  std::vector<Observation> records = MeasuredJobs(kH100);
  for (Observation& r : records) r.spec = nullptr;
  RefitReport report;
  const Calibration refit = RefitCalibration(cal, records, RefitOptions{}, "test", &report);
  EXPECT_EQ(report.added, int(records.size()));  // the linear model takes them
  EXPECT_FALSE(report.layers.done);
  EXPECT_EQ(report.layers.observed_without, int(records.size()));
  EXPECT_NE(report.layers.why_not, "");
  EXPECT_EQ(refit.gpu_layer_model.params.step_s, cal.gpu_layer_model.params.step_s);
  EXPECT_EQ(refit.gpu_layer_model.fitted_to, cal.gpu_layer_model.fitted_to);
}

TEST(Refit, ASweepOfAnotherVersionKeepsItsLayerModelAndGetsTheLinearRefit) {
  Calibration cal = LoadCalibration(RepoFile("share/calibration/h100-80gb-hbm3.json"));
  cal.samples.front().model = "conv9-f1-from-another-version";  // no layers to rebuild
  const std::vector<Observation> records = MeasuredJobs(kH100);
  RefitOptions o;
  o.folds = 2;
  RefitReport report;
  const Calibration refit = RefitCalibration(cal, records, o, "old.json", &report);
  EXPECT_EQ(report.added, int(records.size()));
  EXPECT_FALSE(report.layers.done);
  EXPECT_NE(report.layers.why_not.find("conv9-f1-from-another-version"), std::string::npos)
      << report.layers.why_not;
  EXPECT_EQ(refit.gpu_layer_model.params.step_s, cal.gpu_layer_model.params.step_s);
}

TEST(Refit, TheEngineNameOfOlderRecordsIsNoGpusJob) {
  // Records the CUDA engine wrote before its device read "cuda:N (...)": their GPU cannot be
  // told, so they are left to --all.
  const Calibration cal = LoadCalibration(RepoFile("share/calibration/h100-80gb-hbm3.json"));
  const std::vector<Observation> records =
      MeasuredJobs("NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 79 GiB)");
  RefitOptions o;
  o.folds = 2;
  RefitReport report;
  RefitCalibration(cal, records, o, "test", &report);
  EXPECT_EQ(report.added, 0);
  RefitOptions all = o;
  all.all = true;
  RefitReport taken;
  RefitCalibration(cal, records, all, "test", &taken);
  EXPECT_EQ(taken.added, int(records.size()));
  EXPECT_TRUE(taken.layers.done);
}

}  // namespace
}  // namespace dlh

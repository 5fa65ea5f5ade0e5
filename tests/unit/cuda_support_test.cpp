// Tests of what the CUDA engine can train (common/cuda_support.hpp), and that the recommender
// then keeps such a spec off real GPUs (estimator/recommend/recommender.cpp).
#include "common/cuda_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/features.hpp"
#include "estimator/recommend/recommender.hpp"
#include "tests/util/repo_file.hpp"

namespace dlh {
namespace {

using dlh::test::RepoFile;

// A small CNN; `layer` (JSON) goes after the first conv2d, `extra` among the top-level keys.
TrainSpec Spec(const std::string& layer, const std::string& extra = "") {
  return ParseSpec(R"({
    "name": "small",
    "input": {"channels": 1, "height": 28, "width": 28},
    "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
      )" + layer + R"(
      {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},)" +
                       extra + R"(
    "batch_size": 256,
    "epochs": 2,
    "dataset": "x.h5"
  })",
                   "small.json", "");
}

TEST(CudaSupport, TheKindsTheEngineRuns) {
  EXPECT_EQ(CudaEngineUnsupported(Spec(R"({"type": "relu"},)")), "");
  EXPECT_EQ(
      CudaEngineUnsupported(Spec(R"({"type": "batchnorm"}, {"type": "dropout", "rate": 0.1},)")),
      "");
  EXPECT_EQ(CudaEngineUnsupported(Spec(R"({"type": "relu"},)", R"("label_smoothing": 0,)")), "");
}

TEST(CudaSupport, EachNewKindIsNamedWithItsField) {
  for (const char* layer : {R"({"type": "gelu"},)", R"({"type": "silu"},)",
                            R"({"type": "avgpool2d", "kernel": 3, "stride": 1, "padding": 1},)",
                            R"({"type": "residual", "layers": [{"type": "relu"}]},)"}) {
    const TrainSpec spec = Spec(layer);
    EXPECT_EQ(CudaEngineUnsupported(spec),
              "small.json: layers[1]: " + std::string(LayerKindName(spec.layers[1].kind)) +
                  " is not supported by the CUDA engine yet")
        << layer;
  }
  // globalavgpool2d ends the spatial part: a spec of its own.
  const TrainSpec gap = ParseSpec(R"({"input": {"channels": 2, "height": 4, "width": 4},
    "classes": 3, "layers": [{"type": "globalavgpool2d"}, {"type": "flatten"},
    {"type": "dense", "units": 3}], "optimizer": {"type": "sgd", "lr": 0.1},
    "batch_size": 4, "epochs": 1, "dataset": "d.h5"})",
                                  "gap.json", "");
  EXPECT_EQ(CudaEngineUnsupported(gap),
            "gap.json: layers[0]: globalavgpool2d is not supported by the CUDA engine yet");
}

// Stale-synchronous training stages the gradients through the host on a GPU, written
// without one: refused there, naming the field, until the GPU check has run it.
TEST(CudaSupport, StaleSyncIsNamedUntilVerified) {
  const TrainSpec stale =
      Spec(R"({"type": "relu"},)", R"("sync": {"mode": "stale_sync", "staleness": 2},)");
  EXPECT_EQ(CudaEngineUnsupported(stale),
            "small.json: sync.mode: \"stale_sync\" is not supported by the CUDA engine yet (its "
            "gradients staged through the host have not run on a GPU)");
  EXPECT_EQ(CudaEngineUnsupported(
                Spec(R"({"type": "relu"},)", R"("sync": {"mode": "local_sgd", "period": 4},)")),
            "");
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "1", 1), 0);
  EXPECT_EQ(CudaEngineUnsupported(stale), "");
  ASSERT_EQ(unsetenv("DLH_TEST_CUDA_UNVERIFIED"), 0);
}

// A pipeline's stages on GPUs (launcher/engine/cuda/cuda_pipeline.cpp) were written without
// one: refused there, naming the field, until the GPU check's pipeline row has run.
TEST(CudaSupport, PipelineIsNamedUntilVerified) {
  const TrainSpec piped =
      Spec(R"({"type": "relu"},)", R"("parallel": {"pipeline_stages": 2, "micro_batches": 4},)");
  EXPECT_EQ(CudaEngineUnsupported(piped),
            "small.json: parallel.pipeline_stages: a pipeline is not supported by the CUDA engine "
            "yet (its stages on GPUs have not run on one)");
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "1", 1), 0);
  EXPECT_EQ(CudaEngineUnsupported(piped), "");
  ASSERT_EQ(unsetenv("DLH_TEST_CUDA_UNVERIFIED"), 0);
}

TEST(CudaSupport, LabelSmoothingIsNamed) {
  EXPECT_EQ(CudaEngineUnsupported(Spec(R"({"type": "relu"},)", R"("label_smoothing": 0.1,)")),
            "small.json: label_smoothing: 0.1 is not supported by the CUDA engine yet (its loss's "
            "smoothing has not run on a GPU)");
}

// The GPU check trains what is built but unverified (DLH_TEST_CUDA_UNVERIFIED=1); only "1"
// counts, and a block's paths are looked into.
TEST(CudaSupport, TheGpuCheckMayTrainWhatIsUnverified) {
  const TrainSpec spec =
      Spec(R"({"type": "residual", "layers": [{"type": "gelu"}]},)", R"("label_smoothing": 0.1,)");
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "yes", 1), 0);
  EXPECT_EQ(CudaEngineUnsupported(spec),
            "small.json: layers[1]: residual is not supported by the CUDA engine yet");
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "1", 1), 0);
  EXPECT_EQ(CudaEngineUnsupported(spec), "");
  ASSERT_EQ(unsetenv("DLH_TEST_CUDA_UNVERIFIED"), 0);
}

Job JobOf(const TrainSpec& spec) {
  Job job;
  job.spec = spec;
  job.features = ComputeFeatures(job.spec);
  job.samples = 60000;
  job.epochs = 2;
  job.top = 0;
  return job;
}

// Every type of the example cluster has a compute capability: a residual spec is planned on
// none of them, and the error names each with the spec's field.
TEST(CudaSupport, RecommenderKeepsUnsupportedSpecsOffGpus) {
  const Cluster c = LoadCluster(RepoFile("share/cluster/example.json"));
  const Job job = JobOf(Spec(R"({"type": "residual", "layers": [{"type": "relu"}]},)"));
  try {
    Recommend(job, c);
    ADD_FAILURE() << "a residual spec was planned on GPUs";
  } catch (const EstimateError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a100 (small.json: layers[1]: residual is not supported by the CUDA "
                        "engine yet)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("v100 (compute capability 7.0"), std::string::npos) << what;
  }
  // The same spec without the block is planned there as before.
  EXPECT_TRUE(Recommend(JobOf(Spec(R"({"type": "relu"},)")), c).feasible);
}

// A network no GPU of the example cluster holds whole: its GPUs (real compute capabilities)
// get no pipeline plan while the CUDA engine's pipeline is unverified, and the refusal says
// why; with the GPU check's switch they get one, as CPU-rank types always do.
TEST(CudaSupport, RecommenderPlansNoGpuPipelineUntilVerified) {
  Cluster c = LoadCluster(RepoFile("share/cluster/example.json"));
  Job job = JobOf(ParseSpec(R"({"input": {"channels": 1, "height": 28, "width": 28},
      "classes": 10, "layers": [{"type": "flatten"}, {"type": "dense", "units": 4096},
      {"type": "relu"}, {"type": "dense", "units": 4096}, {"type": "relu"},
      {"type": "dense", "units": 4096}, {"type": "relu"}, {"type": "dense", "units": 10}],
      "optimizer": {"type": "sgd", "lr": 0.01,
      "momentum": 0.9}, "batch_size": 64, "epochs": 1, "dataset": "x.h5"})",
                            "big.json", ""));
  const double whole = TrainingMemoryBytes(job.features, 1, 1, MemoryEngine::kDevice);
  for (GpuType& g : c.gpu_types) g.memory_gb = 0.65 * whole / 0.9e9;
  try {
    Recommend(job, c);
    ADD_FAILURE() << "a pipeline was planned on GPUs whose engine has not run one";
  } catch (const EstimateError& e) {
    EXPECT_NE(std::string(e.what()).find("no pipeline was tried: big.json: "
                                         "parallel.pipeline_stages: a pipeline is not supported"),
              std::string::npos)
        << e.what();
  }
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "1", 1), 0);
  Recommendation rec;
  EXPECT_NO_THROW(rec = Recommend(job, c));
  ASSERT_EQ(unsetenv("DLH_TEST_CUDA_UNVERIFIED"), 0);
  ASSERT_TRUE(rec.feasible);
  EXPECT_EQ(rec.ranked.front().pipeline_stages, 2);
}

// The local cluster's CPU-rank types (no compute capability) train it on the CPU engine.
TEST(CudaSupport, RecommenderPlansUnsupportedSpecsOnCpuRankTypes) {
  const Cluster c = LoadCluster(RepoFile("share/cluster/local.json"));
  const Recommendation rec =
      Recommend(JobOf(Spec(R"({"type": "gelu"},)", R"("label_smoothing": 0.1,)")), c);
  EXPECT_TRUE(rec.unrunnable_types.empty());
  EXPECT_FALSE(rec.ranked.empty());
}

// bf16 and the TF32 switches: the CUDA engine's are built without a GPU (refused, as the
// new kinds), and the CPU engine refuses bf16 for good, naming the field; TF32 only allows
// a GPU format, so the CPU's fp32 honours every setting.
TEST(CudaSupport, PrecisionIsNamed) {
  const TrainSpec bf16 = Spec(R"({"type": "relu"},)", R"("precision": "bf16",)");
  EXPECT_EQ(CudaEngineUnsupported(bf16),
            "small.json: precision: \"bf16\" is not supported by the CUDA engine yet (its bf16 "
            "path has not run on a GPU)");
  EXPECT_EQ(CpuEngineUnsupported(bf16),
            "small.json: precision: \"bf16\" needs the CUDA engine; the CPU engine trains in fp32 "
            "only (set \"precision\": \"fp32\" to train this spec on the CPU)");
  const TrainSpec strict = Spec(R"({"type": "relu"},)", R"("tf32": "none",)");
  EXPECT_EQ(CudaEngineUnsupported(strict),
            "small.json: tf32: \"none\" is not supported by the CUDA engine yet (it has not run on "
            "a GPU)");
  EXPECT_EQ(CpuEngineUnsupported(strict), "");
  const TrainSpec plain =
      Spec(R"({"type": "relu"},)", R"("precision": "fp32", "tf32": "convolutions",)");
  EXPECT_EQ(CudaEngineUnsupported(plain), "");
  EXPECT_EQ(CpuEngineUnsupported(plain), "");
  ASSERT_EQ(setenv("DLH_TEST_CUDA_UNVERIFIED", "1", 1), 0);
  EXPECT_EQ(CudaEngineUnsupported(bf16), "");
  EXPECT_NE(CpuEngineUnsupported(bf16), "");  // not a matter of checking
  ASSERT_EQ(unsetenv("DLH_TEST_CUDA_UNVERIFIED"), 0);
}

// A bf16 spec on the local cluster: its CPU-rank types cannot train it, so nothing is
// planned, and the error says why for each.
TEST(CudaSupport, RecommenderKeepsBf16OffCpuRankTypes) {
  const Cluster c = LoadCluster(RepoFile("share/cluster/local.json"));
  try {
    Recommend(JobOf(Spec(R"({"type": "relu"},)", R"("precision": "bf16",)")), c);
    ADD_FAILURE() << "a bf16 spec was planned on CPU ranks";
  } catch (const EstimateError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("alpha (small.json: precision: \"bf16\" needs the CUDA engine"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace dlh

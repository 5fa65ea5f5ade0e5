// Tests of the recommendation page (dlh-estimate recommend --html) and of the candidates it
// needs from the recommender: a real recommendation on the shipped example cluster rendered
// and read back (the charts' data-points, the chosen allocation, the deadline rule, one
// step-time chart per GPU type), the allocations left out and why, the measured steps of a
// calibration drawn on their GPU type's line, and an impossible deadline.
#include "estimator/recommend/recommend_html.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/duration.hpp"
#include "common/svg_chart.hpp"
#include "tests/util/repo_file.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

using dlh::test::RepoFile;

// The Fashion-MNIST example for 8 epochs by 3 hours, as estimate_cli.sh asks the CLI.
Job FashionJob() {
  Job job;
  job.spec = LoadSpec(RepoFile("share/examples/fashion-mnist.json"));
  job.features = ComputeFeatures(job.spec);
  job.samples = 60000;
  job.epochs = 8;
  job.deadline_s = 3 * 3600;
  return job;
}

// The <svg> chart whose own title (its first <title>) is `title`; "" when there is none.
std::string ChartTitled(const std::string& html, const std::string& title) {
  const std::string want = "<title>" + svg::Escape(title) + "</title>";
  for (size_t at = html.find("<svg class=\"dlh-chart\""); at != std::string::npos;
       at = html.find("<svg class=\"dlh-chart\"", at + 1)) {
    const std::string chart = html.substr(at, html.find("</svg>", at) + 6 - at);
    if (chart.compare(chart.find("<title>"), want.size(), want) == 0) return chart;
  }
  return "";
}

int DataPoints(const std::string& chart) {
  const std::string key = "data-points=\"";
  const size_t at = chart.find(key);
  return at == std::string::npos ? -1 : std::stoi(chart.substr(at + key.size()));
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RecommendHtml, ExampleClusterPageShowsTheDecision) {
  Job job = FashionJob();
  KeepCandidatesForPage(&job);
  const Cluster cluster = LoadCluster(RepoFile("share/cluster/example.json"));
  const Recommendation rec = Recommend(job, cluster);
  ASSERT_TRUE(rec.feasible);
  const std::string html =
      RecommendationHtml(job, cluster, rec, LoadSpeedCalibrations(cluster, rec));

  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Self-contained: nothing to run, nothing fetched.
  for (const char* absent : {"<script", "src=", "<link", "@import", "url("})
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;

  // Every kept candidate, the ones left out and the chosen one are points.
  const std::string candidates = ChartTitled(html, "candidates: time vs energy");
  ASSERT_FALSE(candidates.empty());
  EXPECT_GT(DataPoints(candidates), 0);
  EXPECT_EQ(DataPoints(candidates), int(rec.ranked.size() + rec.rejected.size() + 1));
  const std::string chosen = svg::Escape(AllocationName(rec.ranked.front()));
  EXPECT_NE(html.find("<h2>Chosen: " + chosen + "</h2>"), std::string::npos) << chosen;
  EXPECT_NE(candidates.find(">chosen</text>"), std::string::npos);  // its legend entry
  EXPECT_NE(candidates.find(chosen + ": "), std::string::npos);     // its tooltip
  EXPECT_NE(candidates.find("deadline " + HumanDuration(job.deadline_s)), std::string::npos);
  EXPECT_NE(html.find(svg::Escape(rec.ranked.front().why)), std::string::npos);
  EXPECT_NE(html.find("<td>time limit</td><td>" + SlurmTimeLimit(job, rec.ranked.front()) +
                      ": the prediction&#39;s 90% upper end ("),
            std::string::npos);
  EXPECT_EQ(html.find("grace"), std::string::npos);

  // One step-time chart per GPU type the recommender used. The example's h100 names its
  // calibration: its line is that time model, and the other types scale it by their peaks.
  EXPECT_EQ(Count(html, ": step time vs local batch</title>"), rec.speeds.size());
  ASSERT_EQ(rec.speeds.size(), 4u);
  for (const auto& [gpu, speed] : rec.speeds) {
    const std::string chart = ChartTitled(html, gpu + ": step time vs local batch");
    ASSERT_FALSE(chart.empty()) << gpu;
    EXPECT_GE(DataPoints(chart), 2) << gpu;
  }
  EXPECT_EQ(Count(html, "so the line is the roofline model: "), 0u);
  EXPECT_EQ(Count(html, "The line is the time model of "), 1u);
  EXPECT_EQ(Count(html, "by the ratio of the peaks"), 3u);

  // The ranking table has a row per kept candidate, best first.
  for (size_t i = 0; i < rec.ranked.size(); ++i)
    EXPECT_NE(html.find("<tr><td>" + std::to_string(i + 1) + (i == 0 ? " (chosen)" : "") +
                        "</td><td>" + svg::Escape(AllocationName(rec.ranked[i])) + "</td>"),
              std::string::npos)
        << i;
}

TEST(RecommendHtml, KeepingCandidatesForThePageKeepsTheChoice) {
  const Cluster cluster = LoadCluster(RepoFile("share/cluster/example.json"));
  Job plain = FashionJob();
  plain.samples = 6000000;
  // A deadline the least-energy allocation without one misses (by the margin): some
  // allocations are then left out for time.
  plain.deadline_s = 0;
  plain.deadline_s = Recommend(plain, cluster).ranked.front().total_s;
  Job page = plain;
  KeepCandidatesForPage(&page);
  EXPECT_EQ(page.rejected, 200);
  EXPECT_EQ(page.top, 200);
  const Recommendation a = Recommend(plain, cluster), b = Recommend(page, cluster);
  ASSERT_TRUE(a.feasible && b.feasible);
  EXPECT_EQ(AllocationName(a.ranked.front()), AllocationName(b.ranked.front()));
  EXPECT_EQ(a.ranked.front().why, b.ranked.front().why);
  EXPECT_EQ(a.ranked.size(), 10u);
  EXPECT_TRUE(a.rejected.empty());
  ASSERT_FALSE(b.rejected.empty());
  // Left out, best by the objective first, each saying why.
  for (size_t i = 0; i < b.rejected.size(); ++i) {
    const Allocation& r = b.rejected[i];
    EXPECT_TRUE(r.fits_memory);
    EXPECT_FALSE(r.meets_deadline);
    EXPECT_GT(r.total_s * 1.1, plain.deadline_s);
    EXPECT_EQ(r.why.rfind("misses the ", 0), 0u) << r.why;
    EXPECT_NE(r.why.find(" deadline: "), std::string::npos) << r.why;
    if (i > 0) {
      EXPECT_LE(b.rejected[i - 1].energy_j, r.energy_j);
    }
  }
  EXPECT_LE(int(b.rejected.size()) + int(b.ranked.size()), b.candidates);
}

TEST(RecommendHtml, AllocationsOutOfMemoryAreKeptWithTheirReason) {
  Job job = FashionJob();
  job.deadline_s = 0;
  // One sample more than an a100 (40 GB, 90% usable; the smallest type the engine runs) holds:
  // one a100 alone is out of memory.
  const int slots = 1;  // sgd with momentum
  int64_t fits = 1;
  while (TrainingMemoryBytes(job.features, fits * 2, slots, MemoryEngine::kDevice) <= 0.9 * 40e9)
    fits *= 2;
  for (int64_t step = fits / 2; step > 0; step /= 2)
    if (TrainingMemoryBytes(job.features, fits + step, slots, MemoryEngine::kDevice) <= 0.9 * 40e9)
      fits += step;
  job.spec.batch_size = int(fits + 1);
  job.samples = 10 * job.spec.batch_size;
  job.epochs = 1;
  KeepCandidatesForPage(&job);
  const Cluster cluster = LoadCluster(RepoFile("share/cluster/example.json"));
  const Recommendation rec = Recommend(job, cluster);
  bool a100_alone = false;
  for (const Allocation& r : rec.rejected) {
    EXPECT_FALSE(r.fits_memory);
    EXPECT_GT(r.total_s, 0);
    EXPECT_GT(r.energy_j, 0);
    EXPECT_EQ(r.why.rfind("out of memory: ", 0), 0u) << r.why;
    if (AllocationName(r) == "1x1 a100 (b" + std::to_string(fits + 1) + ")") {
      a100_alone = true;
      EXPECT_NE(
          r.why.find("GB per GPU at batch " + std::to_string(fits + 1) + ", 36 GB usable on a100"),
          std::string::npos)
          << r.why;
    }
  }
  EXPECT_TRUE(a100_alone);
  const std::string html =
      RecommendationHtml(job, cluster, rec, LoadSpeedCalibrations(cluster, rec));
  EXPECT_NE(ChartTitled(html, "candidates: time vs energy").find(">out of memory</text>"),
            std::string::npos);
}

// A calibration holding steps of the job's own model: they are drawn on its type's line, and
// a type scaled from it gets the line alone.
TEST(RecommendHtml, MeasuredStepsOfThisModelArePlotted) {
  test::TempDir dir("recommend-html");
  Job job = FashionJob();
  job.deadline_s = 0;
  Calibration cal = LoadCalibration(RepoFile("share/calibration/cpu.json"));
  const size_t sweep = cal.samples.size();
  for (int64_t b : {16, 64, 256}) {
    TimingSample s;
    s.model = "fashion-cnn-b" + std::to_string(b);
    s.features = job.features;
    s.batch = b;
    s.seconds = 1.05 * cal.model.seconds(job.features, b);
    cal.samples.push_back(s);
  }
  SaveCalibration(dir / "cal.json", cal);
  std::string text;
  {
    std::ifstream in(RepoFile("share/cluster/local.json"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // alpha and beta alone: the CPU node type would plot its own calibration too.
  nlohmann::json gpus_only = nlohmann::json::parse(text);
  gpus_only.erase("cpu_node_types");
  text = gpus_only.dump();
  const std::string from = "../calibration/cpu.json";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "cal.json");
  const Cluster cluster = ParseCluster(text, dir / "cluster.json", dir.path());
  KeepCandidatesForPage(&job);
  const Recommendation rec = Recommend(job, cluster);
  const auto calibrations = LoadSpeedCalibrations(cluster, rec);
  ASSERT_EQ(calibrations.size(), 1u);  // beta's speed is scaled from alpha's file
  EXPECT_EQ(calibrations.at("alpha").path, dir / "cal.json");
  const std::string html = RecommendationHtml(job, cluster, rec, calibrations);

  const std::string alpha = ChartTitled(html, "alpha: step time vs local batch");
  const std::string beta = ChartTitled(html, "beta: step time vs local batch");
  ASSERT_FALSE(alpha.empty());
  ASSERT_FALSE(beta.empty());
  EXPECT_NE(alpha.find(">measured (cal.json)</text>"), std::string::npos);
  EXPECT_NE(alpha.find("fashion-cnn-b256: batch 256, "), std::string::npos);
  int chosen_alpha = 0, chosen_beta = 0;
  for (const Part& p : rec.ranked.front().parts) (p.gpu == "alpha" ? chosen_alpha : chosen_beta)++;
  EXPECT_EQ(DataPoints(alpha), 2 + 3 + chosen_alpha);  // line, measured, chosen
  EXPECT_EQ(DataPoints(beta), 2 + chosen_beta);
  EXPECT_EQ(beta.find("measured"), std::string::npos);
  EXPECT_NE(html.find("fitted to " + std::to_string(sweep + 3) + " timed steps"),
            std::string::npos);
  EXPECT_NE(html.find("3 of those steps are of this model"), std::string::npos);
  EXPECT_NE(html.find("The line is alpha&#39;s time model"), std::string::npos);
}

TEST(RecommendHtml, ImpossibleDeadlineShowsTheFastest) {
  Job job = FashionJob();
  job.samples = 60000000;
  job.epochs = 50;
  job.deadline_s = 600;
  KeepCandidatesForPage(&job);
  const Cluster cluster = LoadCluster(RepoFile("share/cluster/example.json"));
  const Recommendation rec = Recommend(job, cluster);
  ASSERT_FALSE(rec.feasible);
  EXPECT_TRUE(rec.ranked.empty());
  const std::string html =
      RecommendationHtml(job, cluster, rec, LoadSpeedCalibrations(cluster, rec));
  EXPECT_NE(html.find("No allocation meets the " + HumanDuration(600) + " deadline"),
            std::string::npos);
  EXPECT_NE(html.find("<h2>Chosen: " + svg::Escape(AllocationName(rec.fastest)) + "</h2>"),
            std::string::npos);
  const std::string candidates = ChartTitled(html, "candidates: time vs energy");
  EXPECT_EQ(DataPoints(candidates), int(rec.rejected.size() + 1));
  EXPECT_GT(rec.rejected.size(), 0u);
  EXPECT_NE(candidates.find(">over the deadline</text>"), std::string::npos);
}

}  // namespace
}  // namespace dlh

// Tests of the stored range tests and run-folder rate records (launcher/train/lr_store.cpp)
// and of the plan's lr_source field (launcher/train/plan.cpp).
#include "launcher/train/lr_store.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "launcher/train/plan.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

const char* const kSpec = R"({
  "name": "tiny", "input": {"channels": 1, "height": 8, "width": 8}, "classes": 4,
  "layers": [{"type": "flatten"}, {"type": "dense", "units": 4}],
  "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
  "schedule": {"warmup_epochs": 1}, "batch_size": 16, "epochs": 2, "seed": 3,
  "dataset": "a.h5"})";

nlohmann::json Spec() { return nlohmann::json::parse(kSpec); }

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(LrFindKeyTest, NamesTheBatchAndIgnoresWhatTheTestDoesNotDependOn) {
  const std::string key = LrFindKey(Spec(), 128);
  EXPECT_EQ(key.rfind("lr-find-", 0), 0u) << key;
  EXPECT_EQ(key.size(), std::string("lr-find-0123456789abcdef-b128").size()) << key;
  EXPECT_EQ(key.substr(key.size() - 5), "-b128");
  // The rate, name, epochs, schedule, data set, key order and spacing do not change the curve.
  nlohmann::json other = nlohmann::json::parse(R"({"seed": 3, "dataset": "/elsewhere/b.h5",
    "optimizer": {"momentum": 0.9, "type": "sgd", "lr": 7}, "classes": 4, "epochs": 30,
    "layers": [{"type": "flatten"}, {"units": 4, "type": "dense"}], "name": "renamed",
    "input": {"width": 8, "height": 8, "channels": 1}, "batch_size": 512})");
  EXPECT_EQ(LrFindKey(other, 128), key);
}

TEST(LrFindKeyTest, ChangesWithTheBatchModelOptimizerAndSeed) {
  const std::string key = LrFindKey(Spec(), 128);
  EXPECT_NE(LrFindKey(Spec(), 512), key);
  nlohmann::json s = Spec();
  s["layers"][1]["units"] = 5;
  EXPECT_NE(LrFindKey(s, 128), key);
  s = Spec();
  s["optimizer"]["momentum"] = 0.8;
  EXPECT_NE(LrFindKey(s, 128), key);
  s = Spec();
  s["seed"] = 4;
  EXPECT_NE(LrFindKey(s, 128), key);
  EXPECT_THROW(LrFindKey(nlohmann::json::array(), 1), SpecError);
}

TEST(LrFindKeyTest, OfASpecFileMatchesItsJson) {
  test::TempDir dir("dlh-lr-store");
  Write(dir / "spec.json", kSpec);
  EXPECT_EQ(LrFindKeyOfSpecFile(dir / "spec.json", 64), LrFindKey(Spec(), 64));
  EXPECT_EQ(ErrorOf([&] { LrFindKeyOfSpecFile(dir / "missing.json", 64); }),
            (dir / "missing.json") + ": cannot read: No such file or directory");
}

TEST(LrCacheTest, DlhLrCacheElseTheRunFoldersParent) {
  EXPECT_EQ(LrCacheDir("runs/tiny", nullptr), "runs");
  EXPECT_EQ(LrCacheDir("runs/tiny/", nullptr), "runs");
  EXPECT_EQ(LrCacheDir("/scratch/u/runs/job7", nullptr), "/scratch/u/runs");
  EXPECT_EQ(LrCacheDir("tiny", nullptr), ".");
  EXPECT_EQ(LrCacheDir("runs/tiny", ""), "runs");  // set but empty: unset
  EXPECT_EQ(LrCacheDir("runs/tiny", "/cache/lr"), "/cache/lr");
  EXPECT_EQ(LrCacheFile("/cache/lr", "lr-find-00-b8"), "/cache/lr/lr-find-00-b8.json");
}

TEST(StoredLrTest, ReadsASuggestionOrItsAbsence) {
  test::TempDir dir("dlh-lr-store");
  StoredLr s;
  EXPECT_FALSE(ReadStoredLr(dir / "none.json", 128, &s));
  Write(dir / "ok.json", R"({"batch": 128, "suggestion": {"status": "ok", "lr": 0.058,
    "interval": [0.0067, 0.058], "note": ""}})");
  ASSERT_TRUE(ReadStoredLr(dir / "ok.json", 128, &s));
  EXPECT_TRUE(s.ok);
  EXPECT_DOUBLE_EQ(s.lr, 0.058);
  Write(dir / "flat.json", R"({"batch": 128, "suggestion": {"status": "no_clear_minimum",
    "lr": null, "note": "no clear minimum: flat"}})");
  ASSERT_TRUE(ReadStoredLr(dir / "flat.json", 128, &s));
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.note, "no clear minimum: flat");
}

// The cache may sit in a folder others can write (a 1777 runs folder's parent): a result
// planted there by another user (lr 1000) was used as this run's rate. Another's file, a
// link, or a file others can write is ignored, with one line saying why.
TEST(StoredLrTest, OnlyThisUsersOwnFileIsUsed) {
  test::TempDir dir("dlh-lr-store");
  const std::string planted = R"({"batch": 128, "suggestion": {"status": "ok", "lr": 1000}})";
  const std::string path = dir / "lr-find-00-b128.json";
  Write(path, planted);
  StoredLr s;
  std::string ignored;
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  EXPECT_FALSE(ReadStoredLr(path, 128, &s, &ignored));
  EXPECT_EQ(ignored, path + ": writable by its group or others: ignored");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_TRUE(ReadStoredLr(path, 128, &s, &ignored));
  EXPECT_EQ(ignored, "");
  const std::string link = dir / "link.json";
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ReadStoredLr(link, 128, &s, &ignored));
  EXPECT_EQ(ignored, link + ": a symbolic link: ignored");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the file to another user";
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(ReadStoredLr(path, 128, &s, &ignored));
  EXPECT_EQ(ignored, path +
                         ": owned by uid 65534, not by this user: ignored (another user may have "
                         "written it)");
}

TEST(StoredLrTest, ABadFileIsOneLineNamingTheFileAndField) {
  test::TempDir dir("dlh-lr-store");
  StoredLr s;
  auto err = [&](const std::string& text, int64_t batch = 128) {
    Write(dir / "r.json", text);
    return ErrorOf([&] { ReadStoredLr(dir / "r.json", batch, &s); });
  };
  const std::string f = dir / "r.json";
  EXPECT_EQ(err(R"({"batch": 512, "suggestion": {"status": "ok", "lr": 0.1}})"),
            f + ": batch: is 512, not the run's global batch 128");
  EXPECT_EQ(err(R"({"batch": 128, "suggestion": {"status": "ok", "lr": -1}})"),
            f + ": suggestion.lr: must be a positive number, got -1");
  EXPECT_EQ(err(R"({"batch": 128, "suggestion": {"status": "maybe"}})"),
            f + ": suggestion.status: must be \"ok\" or \"no_clear_minimum\", got \"maybe\"");
  EXPECT_EQ(err(R"({"batch": 128})"), f + ": suggestion: missing (not an lr-find result)");
  EXPECT_EQ(err(R"({"batch": "128"})"), f + ": batch: must be a positive integer, got \"128\"");
  EXPECT_EQ(err("[1, 2]"), f + ": must be a JSON object");
  EXPECT_EQ(err("{").rfind(f + ": ", 0), 0u);
  EXPECT_EQ(err("{").find('\n'), std::string::npos);
}

TEST(RunLrTest, RoundTripsAndNamesABadField) {
  test::TempDir dir("dlh-lr-store");
  RunLr r;
  EXPECT_FALSE(ReadRunLr(RunLrPath(dir.path()), &r));
  EXPECT_EQ(RunLrPath("runs/tiny"), "runs/tiny/lr.json");
  RunLr w;
  w.lr = 0.0582;
  w.batch = 512;
  w.source = "lr-find runs/lr-find-x-b512.json";
  Write(RunLrPath(dir.path()), RunLrJson(w));
  ASSERT_TRUE(ReadRunLr(RunLrPath(dir.path()), &r));
  EXPECT_DOUBLE_EQ(r.lr, w.lr);
  EXPECT_EQ(r.batch, 512);
  EXPECT_EQ(r.source, w.source);
  Write(dir / "lr.json", R"({"lr": 0, "batch": 8, "source": ""})");
  EXPECT_EQ(ErrorOf([&] { ReadRunLr(dir / "lr.json", &r); }),
            (dir / "lr.json") + ": lr: must be a positive number, got 0");
}

TEST(PlanLrSourceTest, FindLinearOrAbsentElseOneLineNamingTheField) {
  const std::string head = R"({"format_version": 1, "global_batch": 64, "lr": 0.2)";
  EXPECT_EQ(ParsePlan(head + "}", "DLH_PLAN").lr_source, "linear");
  EXPECT_EQ(ParsePlan(head + R"(, "lr_source": "find"})", "DLH_PLAN").lr_source, "find");
  EXPECT_EQ(ParsePlan(head + R"(, "lr_source": "linear"})", "DLH_PLAN").lr_source, "linear");
  EXPECT_EQ(ErrorOf([&] { ParsePlan(head + R"(, "lr_source": "foo"})", "DLH_PLAN"); }),
            "DLH_PLAN: lr_source: must be \"find\" or \"linear\", got \"foo\"");
  EXPECT_EQ(ErrorOf([&] { ParsePlan(head + R"(, "lr_source": 1})", "DLH_PLAN"); }),
            "DLH_PLAN: lr_source: must be \"find\" or \"linear\", got 1");
}

}  // namespace
}  // namespace dlh

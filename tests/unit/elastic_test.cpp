// DLH — tests of elastic resume's pure rules (launcher/train/elastic.hpp): the checkpoint's
// batch, the equivalent cursor at another global batch, linear scaling and the lines.
#include "launcher/train/elastic.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dlh {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ElasticTest, CheckpointBatchIsTheRecordedOneElseSamplesPerStep) {
  EXPECT_EQ(CheckpointBatch(30, 2000, 100), 30);  // recorded wins
  EXPECT_EQ(CheckpointBatch(0, 2000, 100), 20);   // a file written before: samples / step
  EXPECT_EQ(CheckpointBatch(0, 2010, 100), 0);    // not one batch throughout: unknown
  EXPECT_EQ(CheckpointBatch(0, 0, 0), 0);         // nothing trained yet
}

TEST(ElasticTest, SameBatchKeepsTheCursor) {
  EXPECT_EQ(EquivalentCursor({2, 40}, 20, 20, 3000), (Cursor{2, 40}));
}

TEST(ElasticTest, CursorMovesToTheFirstStepAtOrAfterTheSamePosition) {
  // Position 40 x 20 = 800 of the epoch: batch 40 starts there exactly, batch 30 next at 810.
  EXPECT_EQ(EquivalentCursor({2, 40}, 20, 40, 3000), (Cursor{2, 20}));
  EXPECT_EQ(EquivalentCursor({2, 40}, 20, 30, 3000), (Cursor{2, 27}));
  EXPECT_EQ(EquivalentCursor({2, 40}, 20, 10, 3000), (Cursor{2, 80}));
  // Uneven: 7 x 13 = 91, batch 10 next starts at 100 (9 samples skipped, none repeated).
  EXPECT_EQ(EquivalentCursor({0, 7}, 13, 10, 500), (Cursor{0, 10}));
  EXPECT_EQ(EquivalentCursor({5, 0}, 20, 30, 3000), (Cursor{5, 0}));
}

TEST(ElasticTest, CursorPastTheEpochsLastStepStartsTheNextEpoch) {
  // 3000 samples: batch 20 has 150 steps, batch 1000 only 3; position 149 x 20 = 2980 is
  // past the last step of batch 1000 (which starts at 2000).
  EXPECT_EQ(EquivalentCursor({1, 149}, 20, 1000, 3000), (Cursor{2, 0}));
  // Position 2000: the third step of batch 1000 still starts there.
  EXPECT_EQ(EquivalentCursor({1, 100}, 20, 1000, 3000), (Cursor{1, 2}));
}

TEST(ElasticTest, LinearScalingIsThePlansRule) {
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.05, 128, 512), 0.2);
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.002, 20, 30), 0.003);
  EXPECT_DOUBLE_EQ(LinearScaledLr(0.1, 64, 64), 0.1);
}

TEST(ElasticTest, RankCountNoteSaysWhatStaysAndTheTolerance) {
  const std::string same = RankCountNote(2, 3, 20, true, false);
  EXPECT_TRUE(Has(same,
                  "checkpoint was written by 2 ranks, resuming on 3 with the same global "
                  "batch 20"))
      << same;
  EXPECT_TRUE(Has(same, "only the order of the gradient sums differs")) << same;
  EXPECT_TRUE(Has(same, "float32")) << same;
  EXPECT_FALSE(Has(same, "dropout")) << same;
  EXPECT_FALSE(Has(same, "warning")) << same;
  EXPECT_TRUE(Has(RankCountNote(3, 2, 20, true, true), "dropout, whose masks depend on the rank"));
  const std::string other = RankCountNote(2, 3, 30, false, false);
  EXPECT_FALSE(Has(other, "same global batch")) << other;
}

TEST(ElasticTest, BatchChangeNoteNamesBatchesRatesRuleAndCursor) {
  const std::string line =
      BatchChangeNote(20, 30, 0.002, 0.003, "linear scaling", Cursor{2, 40}, Cursor{2, 27});
  EXPECT_EQ(line,
            "global batch 20 -> 30, lr 0.002 -> 0.003 (linear scaling); cursor epoch 3 step 40 "
            "-> epoch 3 step 27, samples_seen kept");
}

}  // namespace
}  // namespace dlh

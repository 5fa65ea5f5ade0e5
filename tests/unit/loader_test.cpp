// Tests for launcher/data/loader.cpp: the per-epoch permutation, rank shards, cursor
// arithmetic, and that background prefetch changes nothing but timing.
#include "launcher/data/loader.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "launcher/train/batch_split.hpp"

namespace dlh {
namespace {

// Sample i holds the values 1000 i + j, so every batch element can be traced back to the
// sample it came from; its label is i % classes.
DataSplit MakeSplit(int64_t count, Shape3 shape = {2, 3, 2}, int classes = 7) {
  DataSplit s;
  s.count = count;
  s.shape = shape;
  const int64_t n = shape.elements();
  s.images.resize(size_t(count * n));
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < n; ++j) s.images[size_t(i * n + j)] = float(1000 * i + j);
  for (int64_t i = 0; i < count; ++i) s.labels.push_back(int32_t(i % classes));
  return s;
}

LoaderOptions Options(int64_t global, int64_t offset, int64_t batch, uint64_t seed, int prefetch) {
  LoaderOptions o;
  o.global_batch = global;
  o.rank_offset = offset;
  o.rank_batch = batch;
  o.seed = seed;
  o.prefetch = prefetch;
  return o;
}

// The sample indices a batch holds, checking that each image is intact and matches its
// label.
std::vector<int64_t> SamplesOf(const Batch& b, const DataSplit& s, int classes = 7) {
  const int64_t n = s.shape.elements();
  EXPECT_EQ(b.images.shape(), (std::vector<int>{int(b.labels.size()), s.shape.channels,
                                                s.shape.height, s.shape.width}));
  std::vector<int64_t> out;
  for (size_t k = 0; k < b.labels.size(); ++k) {
    int64_t i = int64_t(b.images[size_t(k) * size_t(n)]) / 1000;
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(b.images[size_t(k) * size_t(n) + size_t(j)], float(1000 * i + j));
    EXPECT_EQ(b.labels[k], int32_t(i % classes));
    out.push_back(i);
  }
  return out;
}

void ExpectSameBatch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step_in_epoch, b.step_in_epoch);
  EXPECT_EQ(a.images.shape(), b.images.shape());
  EXPECT_EQ(a.images.to_vector(), b.images.to_vector());
  EXPECT_EQ(a.labels, b.labels);
}

TEST(Permutation, IsAPermutationAndDeterministic) {
  for (int64_t count : {0, 1, 2, 17, 1000}) {
    std::vector<int64_t> p = Loader::permutation(count, 5, 3);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(static_cast<size_t>(count));
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(sorted, iota) << count;
    EXPECT_EQ(p, Loader::permutation(count, 5, 3)) << count;
  }
}

TEST(Permutation, DiffersBetweenEpochsAndSeeds) {
  std::set<std::vector<int64_t>> seen;
  for (int64_t epoch = 0; epoch < 8; ++epoch) seen.insert(Loader::permutation(100, 1, epoch));
  for (uint64_t seed = 2; seed < 10; ++seed) seen.insert(Loader::permutation(100, seed, 0));
  EXPECT_EQ(seen.size(), 16u);
  // A shuffle, not the identity.
  std::vector<int64_t> p = Loader::permutation(100, 1, 0);
  EXPECT_FALSE(std::is_sorted(p.begin(), p.end()));
}

TEST(Permutation, KnownValues) {
  // Pinned so that a change of algorithm (which would silently change every run's data
  // order and break resuming old checkpoints bit for bit) is noticed.
  EXPECT_EQ(Loader::permutation(10, 1, 0), (std::vector<int64_t>{5, 0, 8, 7, 3, 1, 9, 6, 4, 2}));
}

TEST(Loader, StepsAndValidation) {
  DataSplit s = MakeSplit(50);
  EXPECT_EQ(Loader(s, Options(8, 0, 8, 1, 0), 0, 0).steps_per_epoch(), 6);
  EXPECT_EQ(Loader(s, Options(50, 0, 25, 1, 2), 0, 0).steps_per_epoch(), 1);
  EXPECT_THROW(Loader(s, Options(51, 0, 51, 1, 2), 0, 0), DataError);
  EXPECT_THROW(Loader(s, Options(0, 0, 0, 1, 2), 0, 0), DataError);
  EXPECT_THROW(Loader(s, Options(8, 4, 5, 1, 2), 0, 0), DataError);
  EXPECT_THROW(Loader(s, Options(8, -1, 2, 1, 2), 0, 0), DataError);
  EXPECT_THROW(Loader(s, Options(8, 0, 8, 1, 2), -1, 0), DataError);
  try {
    Loader(s, Options(64, 0, 64, 1, 2), 0, 0);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "loader: the data set has 50 samples, fewer than one global batch of 64");
  }
  try {
    Loader(s, Options(8, 6, 3, 1, 2), 0, 0);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "loader: rank slice [6, 9) does not fit in the global batch of 8");
  }
}

TEST(Loader, BatchesFollowThePermutation) {
  DataSplit s = MakeSplit(50);
  const int64_t global = 8, steps = 6;
  Loader loader(s, Options(global, 2, 3, 9, 2), 0, 0);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> perm = Loader::permutation(50, 9, epoch);
    for (int64_t step = 0; step < steps; ++step) {
      Batch b = loader.next();
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.step_in_epoch, step);
      std::vector<int64_t> want(perm.begin() + step * global + 2, perm.begin() + step * global + 5);
      EXPECT_EQ(SamplesOf(b, s), want) << epoch << "/" << step;
    }
  }
}

TEST(Loader, RankShardsMakeUpTheGlobalBatch) {
  // Three simulated ranks with unequal shares of a global batch of 10.
  DataSplit s = MakeSplit(57);
  const std::vector<std::pair<int64_t, int64_t>> ranks = {{0, 3}, {3, 2}, {5, 5}};
  std::vector<std::unique_ptr<Loader>> loaders;
  for (auto [offset, batch] : ranks)
    loaders.push_back(std::make_unique<Loader>(s, Options(10, offset, batch, 4, 1), 0, 0));
  for (int64_t step = 0; step < 12; ++step) {  // 5 steps per epoch: crosses two boundaries
    std::vector<int64_t> all;
    int64_t epoch = -1;
    for (auto& l : loaders) {
      Batch b = l->next();
      if (epoch < 0) epoch = b.epoch;
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.step_in_epoch, step % 5);
      std::vector<int64_t> part = SamplesOf(b, s);
      all.insert(all.end(), part.begin(), part.end());
    }
    std::vector<int64_t> perm = Loader::permutation(57, 4, step / 5);
    std::vector<int64_t> global(perm.begin() + (step % 5) * 10,
                                perm.begin() + (step % 5) * 10 + 10);
    EXPECT_EQ(all, global) << "step " << step;
    EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 10u);
  }
}

// Elastic resume (launcher/train/elastic.hpp): a checkpoint's cursor read by 3 ranks gives the
// global batches 2 ranks would have trained, also when 3 does not divide the batch (20: 7, 7,
// 6), so another rank count trains the same samples in every step.
TEST(Loader, AnotherRankCountAtACursorTrainsTheSameGlobalBatches) {
  DataSplit s = MakeSplit(130);
  auto global_batches = [&](int ranks) {
    std::vector<std::unique_ptr<Loader>> loaders;
    for (int r = 0; r < ranks; ++r) {
      const RankShare share = EvenShare(20, r, ranks);
      loaders.push_back(
          std::make_unique<Loader>(s, Options(20, share.offset, share.batch, 8, 1), 1, 4));
    }
    std::vector<int64_t> all;
    for (int step = 0; step < 6; ++step)  // steps 4 and 5 of epoch 1, then into epoch 2
      for (auto& l : loaders) {
        std::vector<int64_t> part = SamplesOf(l->next(), s);
        all.insert(all.end(), part.begin(), part.end());
      }
    return all;
  };
  const std::vector<int64_t> two = global_batches(2);
  EXPECT_EQ(two.size(), 120u);
  EXPECT_EQ(global_batches(3), two);
  EXPECT_EQ(global_batches(1), two);
}

TEST(Loader, PrefetchDoesNotChangeBatches) {
  DataSplit s = MakeSplit(50);
  Loader sync(s, Options(8, 1, 6, 3, 0), 0, 4);
  Loader one(s, Options(8, 1, 6, 3, 1), 0, 4);
  Loader deep(s, Options(8, 1, 6, 3, 5), 0, 4);
  for (int i = 0; i < 20; ++i) {  // from step 4 of epoch 0 into epoch 3
    Batch a = sync.next();
    Batch b = one.next();
    Batch c = deep.next();
    ExpectSameBatch(a, b);
    ExpectSameBatch(a, c);
    EXPECT_EQ(a.epoch * 6 + a.step_in_epoch, 4 + i);
  }
}

// An engine that copied a batch ahead finds it by its serial (engine.hpp): two loaders'
// batches of the same cursor (a changed split) must never share one, and 0 means none.
TEST(Loader, EveryBatchHasItsOwnSerial) {
  DataSplit s = MakeSplit(50);
  Loader first(s, Options(8, 0, 4, 3, 2), 0, 0);
  Loader second(s, Options(8, 4, 4, 3, 0), 0, 0);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10; ++i) {
    const Batch a = first.next(), b = second.next();
    EXPECT_EQ(a.step_in_epoch, b.step_in_epoch);
    EXPECT_NE(a.serial, 0u);
    EXPECT_TRUE(seen.insert(a.serial).second);
    EXPECT_TRUE(seen.insert(b.serial).second);
  }
  EXPECT_EQ(Batch().serial, 0u);
  EXPECT_NE(NewBatchSerial(), NewBatchSerial());
}

TEST(Loader, StartingAtACursorEqualsAdvancingToIt) {
  DataSplit s = MakeSplit(50);
  for (int prefetch : {0, 2}) {
    Loader from_start(s, Options(8, 0, 4, 11, prefetch), 0, 0);
    for (int i = 0; i < 6 + 3; ++i) from_start.next();
    Loader resumed(s, Options(8, 0, 4, 11, prefetch), 1, 3);
    Batch a = from_start.next(), b = resumed.next();
    EXPECT_EQ(b.epoch, 1);
    EXPECT_EQ(b.step_in_epoch, 3);
    ExpectSameBatch(a, b);
    ExpectSameBatch(from_start.next(), resumed.next());
  }
  // A cursor just past an epoch's last step is the start of the next epoch.
  Loader end_of_epoch(s, Options(8, 0, 4, 11, 0), 1, 6);
  Loader next_epoch(s, Options(8, 0, 4, 11, 0), 2, 0);
  ExpectSameBatch(end_of_epoch.next(), next_epoch.next());
}

// Destroys `loader` on another thread; fails (and aborts, since a hung thread cannot be
// recovered) if that takes longer than a few seconds.
void DestroyWithinDeadline(std::unique_ptr<Loader> loader) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread t([&, l = std::move(loader)]() mutable {
    l.reset();
    done.set_value();
  });
  if (finished.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr, "Loader destructor hung\n");
    std::abort();
  }
  t.join();
}

TEST(Loader, DestructorDoesNotHang) {
  DataSplit s = MakeSplit(50);
  // The queue fills up and the thread waits for room that never comes.
  auto full = std::make_unique<Loader>(s, Options(8, 0, 8, 1, 3), 0, 0);
  full->next();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  DestroyWithinDeadline(std::move(full));
  // No batch ever taken.
  DestroyWithinDeadline(std::make_unique<Loader>(s, Options(8, 0, 8, 1, 3), 0, 0));
  // Destroyed at once, possibly before the thread has started running.
  for (int i = 0; i < 50; ++i)
    DestroyWithinDeadline(std::make_unique<Loader>(s, Options(8, 0, 8, 1, 1), 0, 0));
}

TEST(Loader, ExceptionsReachNext) {
  DataSplit s = MakeSplit(50);
  for (int prefetch : {0, 1, 4}) {
    LoaderOptions o = Options(8, 0, 8, 1, prefetch);
    o.before_batch = [](int64_t epoch, int64_t step) {
      if (epoch == 0 && step == 2) throw DataError("injected failure");
    };
    Loader loader(s, o, 0, 0);
    // Batches prepared before the failure still arrive, in order.
    EXPECT_EQ(loader.next().step_in_epoch, 0) << prefetch;
    EXPECT_EQ(loader.next().step_in_epoch, 1) << prefetch;
    try {
      loader.next();
      ADD_FAILURE() << "no exception with prefetch " << prefetch;
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(), "injected failure");
    }
  }
}

TEST(Loader, PrefetchRunsAheadInTheBackground) {
  DataSplit s = MakeSplit(50);
  std::atomic<int> prepared{0};
  LoaderOptions o = Options(8, 0, 8, 1, 3);
  o.before_batch = [&](int64_t, int64_t) { ++prepared; };
  Loader loader(s, o, 0, 0);
  // Without any call to next(), the thread fills the queue: 3 batches, and no more.
  // Up to 30 s: the unit tests run beside heavier tests on 2 cores.
  for (int i = 0; i < 6000 && prepared < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(prepared, 3);
  loader.next();
  for (int i = 0; i < 6000 && prepared < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(prepared, 4);
}

TEST(Loader, EmptyRankSlice) {
  // A rank with no share of the batch still steps through the epochs with the others.
  DataSplit s = MakeSplit(20);
  Loader loader(s, Options(8, 8, 0, 1, 2), 0, 0);
  Batch b = loader.next();
  EXPECT_EQ(b.labels.size(), 0u);
  EXPECT_EQ(b.images.shape(), (std::vector<int>{0, 2, 3, 2}));
  EXPECT_EQ(loader.next().step_in_epoch, 1);
  EXPECT_EQ(loader.next().epoch, 1);
}

}  // namespace
}  // namespace dlh

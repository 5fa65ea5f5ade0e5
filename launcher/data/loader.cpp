// DLH — the data loader (see loader.hpp).
#include "launcher/data/loader.hpp"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "launcher/data/augment.hpp"
#include "launcher/nn/random.hpp"

namespace dlh {

uint64_t NewBatchSerial() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

struct Loader::Impl {
  std::unique_ptr<MemorySource> owned;  // when constructed from a DataSplit
  SampleSource& source;
  LoaderOptions options;
  int64_t steps = 0;

  // Cursor of the next batch to *prepare*. Only the thread that prepares batches touches
  // it and the cached permutation: the prefetch thread if there is one, else next().
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t perm_epoch = -1;
  std::vector<int64_t> perm;
  std::vector<float> augment_scratch;  // one image, for ApplyAugment

  std::mutex mu;
  std::condition_variable cv;  // signals both "queue has room / stop" and "batch ready"
  std::deque<Batch> queue;
  bool stop = false;
  std::exception_ptr error;  // set once by the prefetch thread; later batches never come
  std::thread thread;

  Impl(std::unique_ptr<MemorySource> own, SampleSource* s, const LoaderOptions& o)
      : owned(std::move(own)), source(s ? *s : *owned), options(o) {}

  // Builds the batch at the preparation cursor and advances it.
  Batch Prepare() {
    if (options.before_batch) options.before_batch(epoch, step);
    if (perm_epoch != epoch) {
      perm = permutation(source.count(), options.seed, epoch);
      perm_epoch = epoch;
    }
    const Shape3& s = source.shape();
    Batch b;
    b.epoch = epoch;
    b.step_in_epoch = step;
    b.serial = NewBatchSerial();
    b.images.resize({int(options.rank_batch), s.channels, s.height, s.width});
    b.labels.resize(size_t(options.rank_batch));
    const int64_t first = step * options.global_batch + options.rank_offset;
    const int64_t* samples = perm.data() + first;
    source.read(samples, size_t(options.rank_batch), b.images.data());
    const std::vector<int32_t>& labels = source.labels();
    for (int64_t i = 0; i < options.rank_batch; ++i)
      b.labels[size_t(i)] = labels[size_t(samples[i])];
    if (options.augment.any())
      for (int64_t i = 0; i < options.rank_batch; ++i)
        ApplyAugment(DrawAugment(options.augment, options.seed, epoch, samples[i]),
                     options.augment.crop_padding, s,
                     b.images.data() + size_t(i) * size_t(s.elements()), augment_scratch);
    if (++step == steps) {
      step = 0;
      ++epoch;
    }
    return b;
  }

  void Run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || queue.size() < size_t(options.prefetch); });
        if (stop) return;
      }
      // Built outside the lock so that next() can take ready batches meanwhile.
      try {
        Batch b = Prepare();
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(std::move(b));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        error = std::current_exception();
        cv.notify_all();
        return;
      }
      cv.notify_all();
    }
  }
};

namespace {

// An in-memory split's own consistency, checked before a MemorySource reads it.
const DataSplit& CheckedSplit(const DataSplit& split) {
  const int64_t n = split.shape.elements();
  if (split.count < 0 || n <= 0 || split.labels.size() != size_t(split.count) ||
      split.images.size() != size_t(split.count) * size_t(n))
    throw DataError("loader: inconsistent data split (" + std::to_string(split.count) +
                    " samples, " + std::to_string(split.labels.size()) + " labels, " +
                    std::to_string(split.images.size()) + " image values)");
  return split;
}

}  // namespace

Loader::Loader(const DataSplit& split, const LoaderOptions& options, int64_t epoch,
               int64_t step_in_epoch)
    : impl_(std::make_unique<Impl>(std::make_unique<MemorySource>(CheckedSplit(split)), nullptr,
                                   options)) {
  start(epoch, step_in_epoch);
}

Loader::Loader(SampleSource& source, const LoaderOptions& options, int64_t epoch,
               int64_t step_in_epoch)
    : impl_(std::make_unique<Impl>(nullptr, &source, options)) {
  start(epoch, step_in_epoch);
}

void Loader::start(int64_t epoch, int64_t step_in_epoch) {
  const LoaderOptions& o = impl_->options;
  const SampleSource& source = impl_->source;
  if (o.global_batch <= 0)
    throw DataError("loader: global batch must be positive, got " + std::to_string(o.global_batch));
  if (o.rank_offset < 0 || o.rank_batch < 0 || o.rank_offset + o.rank_batch > o.global_batch)
    throw DataError("loader: rank slice [" + std::to_string(o.rank_offset) + ", " +
                    std::to_string(o.rank_offset + o.rank_batch) +
                    ") does not fit in the global batch of " + std::to_string(o.global_batch));
  if (o.prefetch < 0)
    throw DataError("loader: prefetch depth must not be negative, got " +
                    std::to_string(o.prefetch));
  if (source.shape().elements() <= 0 || int64_t(source.labels().size()) != source.count())
    throw DataError("loader: inconsistent sample source (" + std::to_string(source.count()) +
                    " samples, " + std::to_string(source.labels().size()) + " labels)");
  impl_->steps = source.count() / o.global_batch;
  if (impl_->steps == 0)
    throw DataError("loader: the data set has " + std::to_string(source.count()) +
                    " samples, fewer than one global batch of " + std::to_string(o.global_batch));
  if (epoch < 0 || step_in_epoch < 0)
    throw DataError("loader: invalid start position epoch " + std::to_string(epoch) + ", step " +
                    std::to_string(step_in_epoch));
  // A cursor saved just after an epoch's last step reads as (e, steps); accept it as the
  // start of the next epoch.
  impl_->epoch = epoch + step_in_epoch / impl_->steps;
  impl_->step = step_in_epoch % impl_->steps;
  if (o.prefetch > 0) impl_->thread = std::thread([this] { impl_->Run(); });
}

Loader::~Loader() {
  if (impl_ && impl_->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    impl_->thread.join();
  }
}

Batch Loader::next() {
  Impl& m = *impl_;
  if (m.options.prefetch == 0) return m.Prepare();
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] { return !m.queue.empty() || m.error; });
  // Batches prepared before a failure are still handed out, in order.
  if (m.queue.empty()) std::rethrow_exception(m.error);
  Batch b = std::move(m.queue.front());
  m.queue.pop_front();
  lock.unlock();
  m.cv.notify_all();
  return b;
}

int64_t Loader::steps_per_epoch() const { return impl_->steps; }

std::vector<int64_t> Loader::permutation(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(size_t(std::max<int64_t>(count, 0)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  // Mixing through SplitMix64 (rather than e.g. seed + epoch) keeps nearby (seed, epoch)
  // pairs from giving correlated Mersenne Twister states.
  std::mt19937_64 gen(SplitMix64(SplitMix64(seed) ^ uint64_t(epoch)));
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[UniformBelow(gen, i)]);
  return perm;
}

}  // namespace dlh

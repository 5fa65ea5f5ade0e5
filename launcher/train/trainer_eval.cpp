// DLH — the Trainer's test-set evaluation, after every epoch (trainer_impl.hpp).
#include <algorithm>
#include <cstdio>

#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {

// Test-set accuracy at the end of every epoch, after its checkpoint, so that a run
// stopped right there has its model saved before the (collective) evaluation starts.
void Trainer::evaluate_epoch() {
  if (!o_.eval || step_in_epoch_ != 0 || evaluated_epoch_) return;
  // A data set without a test split has nothing to evaluate: as --no-eval, said once (its
  // accuracy and loss were NaN, printed as "-nan%").
  if (data_.test.count == 0) {
    if (rank_ == 0 && !said_no_test_)
      say("note: " + spec_.dataset + " has no test samples: no evaluation");
    said_no_test_ = true;
    evaluated_epoch_ = true;
    return;
  }
  const EvalResult ev = evaluate();
  evaluated_epoch_ = true;
  result_.test_accuracy = ev.accuracy;
  result_.test_loss = ev.loss;
  if (rank_ != 0) return;
  append_metrics({{"event", "eval"},
                  {"epoch", epoch_},
                  {"step", step_},
                  {"test_loss", ev.loss},
                  {"test_accuracy", ev.accuracy}});
  char text[160];
  std::snprintf(text, sizeof text, "epoch %lld/%d: test accuracy %.2f%%, test loss %.4f",
                (long long)epoch_, spec_.epochs, 100 * ev.accuracy, ev.loss);
  progress_->line(text);
}

// Each rank evaluates a contiguous slice of the test set (a pipeline replica's stages the
// same slice, which passes through them); the sums are combined. Collective.
EvalResult Trainer::evaluate() {
  TraceSpan span(tracer_.get(), TraceLane::Compute, "evaluation", trace_step_);
  const DataSplit& test = data_.test;
  const int64_t first = test.count * dp_rank_ / dp_size_,
                last = test.count * (dp_rank_ + 1) / dp_size_;
  const int64_t per = test.shape.elements();
  const auto started = Clock::now();
  double sums[2] = {0, 0};  // loss, correct
  std::vector<int64_t> indices;
  std::vector<float> chunk;  // a chunk read from the file (stream mode)
  for (int64_t i = first; i < last; i += kEvalChunk) {
    const int n = int(std::min(kEvalChunk, last - i));
    ForwardContext ctx;
    ctx.training = false;
    ctx.seed = spec_.seed;
    const float* images = test.images.data() + i * per;
    if (streaming_) {
      indices.resize(size_t(n));
      for (int k = 0; k < n; ++k) indices[size_t(k)] = i + k;
      chunk.resize(size_t(n) * size_t(per));
      test_source_->read(indices.data(), size_t(n), chunk.data());
      images = chunk.data();
    }
    StepSums s = engine_->evaluate(images, test.labels.data() + i, n, ctx);
    sums[0] += s.loss;
    sums[1] += double(s.correct);
  }
  double total[2];
  MPI_CHECK(MPI_Allreduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, comm_.get()));
  const double seconds = Since(started);
  eval_seconds_ += seconds;
  if (evaluations_++ == 0) first_eval_seconds_ = seconds;
  return {total[0] / double(test.count), total[1] / double(test.count)};
}
}  // namespace trainer_detail
}  // namespace dlh

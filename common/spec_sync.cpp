// DLH — the spec's "sync" and "parallel": how the ranks keep one model and how the network is
// laid over them (SyncSpec and ParallelSpec in spec.hpp).
#include "common/spec_reader.hpp"

namespace dlh {
namespace spec_reader {

SyncSpec ParseSync(const json& value, const std::string& origin) {
  Obj o(RequireObject(value, origin, "sync"), origin, "sync");
  o.only({"mode", "period", "warmup_steps", "staleness", "own_gradient_first"});
  SyncSpec sync;
  sync.mode = SyncSpec::Mode(o.choice("mode", {"sync", "local_sgd", "stale_sync"}, true, 0));
  // A field of another mode would be ignored silently: say so instead.
  for (const char* key : {"period", "warmup_steps"})
    if (o.has(key) && !sync.local_sgd()) o.fail(key, "only with \"mode\": \"local_sgd\"");
  for (const char* key : {"staleness", "own_gradient_first"})
    if (o.has(key) && !sync.stale_sync()) o.fail(key, "only with \"mode\": \"stale_sync\"");
  if (sync.local_sgd()) {
    sync.period = o.integer("period", 1, true, 0);
    sync.warmup_steps = o.integer("warmup_steps", 0, false, 0);
  }
  // 0 is synchronous training through the stale path (its tests compare the two); the bound
  // keeps the gradients in flight, one model's worth each, within reason.
  if (sync.stale_sync()) {
    sync.staleness = o.integer("staleness", 0, true, 0);
    if (sync.staleness > SyncSpec::kMaxStaleness)
      o.fail("staleness", "must be at most " + std::to_string(SyncSpec::kMaxStaleness) + ", got " +
                              std::to_string(sync.staleness));
    sync.own_gradient_first = o.boolean("own_gradient_first", true);
  }
  return sync;
}

ParallelSpec ParseParallel(const json& value, const std::string& origin, const TrainSpec& spec) {
  Obj o(RequireObject(value, origin, "parallel"), origin, "parallel");
  o.only({"pipeline_stages", "micro_batches"});
  ParallelSpec parallel;
  parallel.pipeline_stages = o.integer("pipeline_stages", 1, true, 1);
  // GPipe's bubble is (stages - 1) / (micro_batches + stages - 1) of a step: four micro-batches
  // a stage keep it under a fifth.
  parallel.micro_batches = o.integer("micro_batches", 1, false, 4 * parallel.pipeline_stages);
  if (parallel.pipeline_stages > int(spec.layers.size()))
    o.fail("pipeline_stages", "must be at most the number of layers (" +
                                  std::to_string(spec.layers.size()) + "), got " +
                                  std::to_string(parallel.pipeline_stages));
  if (parallel.micro_batches > spec.batch_size)
    o.fail("micro_batches", "must be at most batch_size (" + std::to_string(spec.batch_size) +
                                "), got " + std::to_string(parallel.micro_batches));
  if (parallel.pipelined() && spec.sync.mode != SyncSpec::Mode::Sync)
    o.fail("pipeline_stages", "only with synchronous training (\"sync\": {\"mode\": \"sync\"})");
  return parallel;
}

}  // namespace spec_reader
}  // namespace dlh

// DLH — the spec's "sync": how the ranks keep one model (SyncSpec in spec.hpp).
#include "common/spec_reader.hpp"

namespace dlh {
namespace spec_reader {

SyncSpec ParseSync(const json& value, const std::string& origin) {
  Obj o(RequireObject(value, origin, "sync"), origin, "sync");
  o.only({"mode", "period", "warmup_steps"});
  SyncSpec sync;
  sync.mode = SyncSpec::Mode(o.choice("mode", {"sync", "local_sgd"}, true, 0));
  if (!sync.local_sgd()) {
    // A period on synchronous training would be ignored silently: say so instead.
    if (o.has("period") || o.has("warmup_steps"))
      o.fail(o.has("period") ? "period" : "warmup_steps", "only with \"mode\": \"local_sgd\"");
    return sync;
  }
  sync.period = o.integer("period", 1, true, 0);
  sync.warmup_steps = o.integer("warmup_steps", 0, false, 0);
  return sync;
}

}  // namespace spec_reader
}  // namespace dlh

// DLH estimator — per-GPU batches of a job on GPUs of different speeds (BalanceBatch; its
// core is batch_balance.hpp).
#include "estimator/recommend/batch_balance.hpp"

#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

using recommend_detail::BalanceCore;
using recommend_detail::CheckSpeed;
using recommend_detail::kMaxGroups;

std::vector<int64_t> BalanceBatch(const std::vector<DeviceSpeed>& speed,
                                  const std::vector<int>& count, int64_t global_batch) {
  if (speed.size() != count.size())
    throw EstimateError("BalanceBatch: " + std::to_string(speed.size()) + " speeds for " +
                        std::to_string(count.size()) + " groups");
  if (speed.size() > size_t(kMaxGroups))
    throw EstimateError("BalanceBatch: at most " + std::to_string(kMaxGroups) + " groups, got " +
                        std::to_string(speed.size()));
  if (global_batch < 0) throw EstimateError("BalanceBatch: negative global batch");
  const int n = int(speed.size());
  double fixed[kMaxGroups], per[kMaxGroups];
  int counts[kMaxGroups];
  int64_t out[kMaxGroups];
  for (int g = 0; g < n; ++g) {
    if (count[size_t(g)] < 0) throw EstimateError("BalanceBatch: negative GPU count");
    CheckSpeed("group " + std::to_string(g), speed[size_t(g)]);
    fixed[g] = speed[size_t(g)].fixed_s;
    per[g] = speed[size_t(g)].per_sample_s;
    counts[g] = count[size_t(g)];
  }
  BalanceCore(fixed, per, counts, n, global_batch, out);
  return std::vector<int64_t>(out, out + n);
}

}  // namespace dlh

// DLH replay — FIFO with EASY backfilling (see scheduler.hpp).
#include "estimator/replay/scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace dlh::replay {

int Shape::units() const {
  int u = 0;
  for (const PartShape& p : parts) u += p.nodes * p.per_node;
  return u;
}

Scheduler::Scheduler(std::vector<Pool> pools, SchedulerOptions options)
    : pools_(std::move(pools)), options_(options) {
  state_.resize(pools_.size());
  busy_per_pool_.assign(pools_.size(), 0);
  for (size_t p = 0; p < pools_.size(); ++p) {
    const Pool& pool = pools_[p];
    if (pool.nodes < 0 || pool.units_per_node < 1)
      throw std::invalid_argument("replay: node type " + pool.node_type +
                                  ": needs nodes >= 0 and units per node >= 1");
    PoolState& s = state_[p];
    s.free.assign(size_t(pool.nodes), pool.units_per_node);
    s.at_level.assign(size_t(pool.units_per_node) + 1, {});
    s.pos.resize(size_t(pool.nodes));
    s.jobs_on.assign(size_t(pool.nodes), {});
    s.reserved.assign(size_t(pool.nodes), 0);
    for (int n = 0; n < pool.nodes; ++n) {
      s.pos[size_t(n)] = int(s.at_level.back().size());
      s.at_level.back().push_back(n);
    }
  }
}

bool Scheduler::Fits(const Shape& shape) const {
  if (shape.parts.empty()) return false;
  for (size_t i = 0; i < shape.parts.size(); ++i) {
    const PartShape& p = shape.parts[i];
    if (p.pool < 0 || p.pool >= int(pools_.size())) return false;
    const Pool& pool = pools_[size_t(p.pool)];
    if (p.nodes < 1 || p.per_node < 1 || p.nodes > pool.nodes || p.per_node > pool.units_per_node)
      return false;
    // Two parts on one node type would compete for its nodes: a plan never has them.
    for (size_t k = 0; k < i; ++k)
      if (shape.parts[k].pool == p.pool) return false;
  }
  return true;
}

void Scheduler::Submit(int job, Request request) {
  if (job < 0) throw std::invalid_argument("replay: negative job id");
  Request kept;
  for (Shape& s : request.shapes)
    if (Fits(s)) kept.shapes.push_back(std::move(s));
  if (kept.shapes.empty())
    throw std::invalid_argument("replay: job " + std::to_string(job) +
                                ": no shape of its request fits the cluster");
  if (size_t(job) >= requests_.size()) {
    requests_.resize(size_t(job) + 1);
    running_.resize(size_t(job) + 1);
  }
  requests_[size_t(job)] = std::move(kept);
  queue_.push_back(job);
}

void Scheduler::SetFree(int pool, int node, int free) {
  PoolState& s = state_[size_t(pool)];
  const int old = s.free[size_t(node)];
  if (old == free) return;
  // Swap-remove from the old level's list, append to the new one.
  std::vector<int>& from = s.at_level[size_t(old)];
  const int at = s.pos[size_t(node)];
  from[size_t(at)] = from.back();
  s.pos[size_t(from[size_t(at)])] = at;
  from.pop_back();
  std::vector<int>& to = s.at_level[size_t(free)];
  s.pos[size_t(node)] = int(to.size());
  to.push_back(node);
  s.free[size_t(node)] = free;
}

void Scheduler::Take(const Grant& g, int job) {
  PoolState& s = state_[size_t(g.pool)];
  const int free = s.free[size_t(g.node)];
  // The invariant the whole replay rests on: never more units than a node has free.
  if (g.held > free)
    throw std::logic_error("replay: job " + std::to_string(job) + " would take " +
                           std::to_string(g.held) + " units of a node with " +
                           std::to_string(free) + " free");
  SetFree(g.pool, g.node, free - g.held);
  s.jobs_on[size_t(g.node)].push_back(job);
  busy_units_ += g.used;
  busy_per_pool_[size_t(g.pool)] += g.used;
}

void Scheduler::Release(const Grant& g, int job) {
  PoolState& s = state_[size_t(g.pool)];
  SetFree(g.pool, g.node, s.free[size_t(g.node)] + g.held);
  std::vector<int>& on = s.jobs_on[size_t(g.node)];
  on.erase(std::find(on.begin(), on.end(), job));
  busy_units_ -= g.used;
  busy_per_pool_[size_t(g.pool)] -= g.used;
}

bool Scheduler::Place(const Shape& shape, bool respect_reservation, std::vector<Grant>* grants) {
  grants->clear();
  for (const PartShape& part : shape.parts) {
    const Pool& pool = pools_[size_t(part.pool)];
    const PoolState& s = state_[size_t(part.pool)];
    const int full = pool.units_per_node;
    if (part.nodes == 1) {
      // Best fit: the fullest node that still holds the part, so whole nodes stay whole.
      int found = -1;
      for (int level = part.per_node; level <= full && found < 0; ++level)
        for (int node : s.at_level[size_t(level)])
          if (!respect_reservation || !s.reserved[size_t(node)]) {
            found = node;
            break;
          }
      if (found < 0) return false;
      grants->push_back({part.pool, found, part.per_node, part.per_node});
    } else {
      const std::vector<int>& whole = s.at_level[size_t(full)];
      if (int(whole.size()) < part.nodes) return false;
      int taken = 0;
      for (int node : whole) {
        if (respect_reservation && s.reserved[size_t(node)]) continue;
        grants->push_back({part.pool, node, full, part.per_node});
        if (++taken == part.nodes) break;
      }
      if (taken < part.nodes) return false;
    }
  }
  return true;
}

bool Scheduler::TryStart(int job, double now, bool respect_reservation, std::vector<Started>* out) {
  const Request& r = requests_[size_t(job)];
  std::vector<Grant> grants;
  for (size_t k = 0; k < r.shapes.size(); ++k) {
    const Shape& shape = r.shapes[k];
    // A backfilled job may use the head's nodes only if its limit ends before the head's
    // reservation: then it is gone when the head needs them.
    const bool respect = respect_reservation && now + shape.limit_s > last_reservation_s_;
    if (!Place(shape, respect, &grants)) continue;
    Running& run = running_[size_t(job)];
    run.active = true;
    run.expected_end_s = now + shape.limit_s;
    run.grants = grants;
    for (const Grant& g : grants) Take(g, job);
    ++running_count_;
    out->push_back({job, int(k), now});
    return true;
  }
  return false;
}

double Scheduler::FreeAt(int pool, int node, int need, double now) const {
  const PoolState& s = state_[size_t(pool)];
  int free = s.free[size_t(node)];
  if (free >= need) return now;
  std::vector<std::pair<double, int>> ends;  // expected end, units held there
  for (int j : s.jobs_on[size_t(node)]) {
    const Running& run = running_[size_t(j)];
    for (const Grant& g : run.grants)
      if (g.pool == pool && g.node == node)
        // A job past its limit is expected to end any moment.
        ends.emplace_back(std::max(now, run.expected_end_s), g.held);
  }
  std::sort(ends.begin(), ends.end());
  for (const auto& [end, held] : ends) {
    free += held;
    if (free >= need) return end;
  }
  return kNever;
}

double Scheduler::Reserve(const Shape& shape, double now,
                          std::vector<std::pair<int, int>>* nodes) const {
  nodes->clear();
  double at = now;
  for (const PartShape& part : shape.parts) {
    const Pool& pool = pools_[size_t(part.pool)];
    if (part.nodes == 1) {
      double best = kNever;
      int best_node = -1;
      for (int n = 0; n < pool.nodes && best > now; ++n) {
        const double t = FreeAt(part.pool, n, part.per_node, now);
        if (t < best) {
          best = t;
          best_node = n;
        }
      }
      if (best_node < 0) return kNever;
      nodes->emplace_back(part.pool, best_node);
      at = std::max(at, best);
    } else {
      std::vector<std::pair<double, int>> times;
      times.reserve(size_t(pool.nodes));
      for (int n = 0; n < pool.nodes; ++n)
        times.emplace_back(FreeAt(part.pool, n, pool.units_per_node, now), n);
      const auto nth = times.begin() + (part.nodes - 1);
      std::nth_element(times.begin(), nth, times.end());
      if (nth->first == kNever) return kNever;
      at = std::max(at, nth->first);
      for (auto it = times.begin(); it <= nth; ++it) nodes->emplace_back(part.pool, it->second);
    }
  }
  return at;
}

std::vector<Started> Scheduler::Pass(double now) {
  std::vector<Started> out;
  last_reservation_s_ = kNever;
  last_reservation_job_ = -1;
  while (!queue_.empty() && TryStart(queue_.front(), now, false, &out)) queue_.pop_front();
  if (queue_.empty()) return out;

  // The head waits: reserve the earliest of its shapes' start times, on those nodes.
  const int head = queue_.front();
  std::vector<std::pair<int, int>> reserved, nodes;
  for (const Shape& shape : requests_[size_t(head)].shapes) {
    const double at = Reserve(shape, now, &nodes);
    if (at < last_reservation_s_) {
      last_reservation_s_ = at;
      reserved = nodes;
    }
  }
  last_reservation_job_ = head;
  for (const auto& [pool, node] : reserved) state_[size_t(pool)].reserved[size_t(node)] = 1;

  int tried = 0;
  for (auto it = std::next(queue_.begin());
       it != queue_.end() && tried < options_.backfill_depth;) {
    bool any_free = false;
    for (size_t p = 0; p < pools_.size() && !any_free; ++p) any_free = FreeUnits(int(p)) > 0;
    if (!any_free) break;
    ++tried;
    if (TryStart(*it, now, true, &out))
      it = queue_.erase(it);
    else
      ++it;
  }
  for (const auto& [pool, node] : reserved) state_[size_t(pool)].reserved[size_t(node)] = 0;
  return out;
}

void Scheduler::Finish(int job) {
  Running& run = running_.at(size_t(job));
  if (!run.active) throw std::logic_error("replay: job " + std::to_string(job) + " is not running");
  for (const Grant& g : run.grants) Release(g, job);
  run.active = false;
  run.grants.clear();
  --running_count_;
}

std::vector<int> Scheduler::FreeNodes() const {
  std::vector<int> out(pools_.size());
  for (size_t p = 0; p < pools_.size(); ++p)
    out[p] = int(state_[p].at_level[size_t(pools_[p].units_per_node)].size());
  return out;
}

int Scheduler::FreeUnits(int pool) const {
  const Pool& p = pools_[size_t(pool)];
  return p.nodes * p.units_per_node - [&] {
    int held = 0;
    const PoolState& s = state_[size_t(pool)];
    for (int level = 0; level < p.units_per_node; ++level)
      held += int(s.at_level[size_t(level)].size()) * (p.units_per_node - level);
    return held;
  }();
}

}  // namespace dlh::replay

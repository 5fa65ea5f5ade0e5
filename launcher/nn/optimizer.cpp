// DLH — SGD and Adam. Update rules follow the usual definitions (PyTorch's SGD with
// dampening 0; Adam with bias correction; AdamW's decoupled decay: Loshchilov & Hutter).
#include "launcher/nn/optimizer.hpp"

#include <cmath>
#include <map>

#include "common/error.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

// Elements per parallel block. Updates are element-wise (no reductions), so the split
// cannot change any result.
constexpr size_t kGrain = 16384;

// Per-parameter slots, created lazily with the parameter's size.
class Slots {
 public:
  explicit Slots(std::vector<std::string> slot_names) : names_(std::move(slot_names)) {}

  std::vector<float>& get(size_t param, size_t slot, size_t size) {
    if (data_.size() <= param) data_.resize(param + 1);
    auto& per = data_[param];
    if (per.empty()) per.resize(names_.size());
    if (per[slot].size() != size) per[slot].assign(size, 0.0f);
    return per[slot];
  }

  void export_state(const std::vector<NamedParam>& params, std::vector<NamedArray>* out) const {
    out->resize(params.size() * names_.size());
    size_t k = 0;
    for (size_t p = 0; p < params.size(); ++p) {
      const Tensor& value = *params[p].ref.value;
      for (size_t s = 0; s < names_.size(); ++s) {
        NamedArray& a = (*out)[k++];
        a.name = params[p].name + "/" + names_[s];
        a.shape = value.shape();
        const bool have = p < data_.size() && !data_[p].empty() && !data_[p][s].empty();
        if (have)
          a.data.assign(data_[p][s].begin(), data_[p][s].end());
        else
          a.data.assign(value.size(), 0.0f);
      }
    }
  }

  void import_state(const std::vector<NamedParam>& params, const std::vector<NamedArray>& state) {
    std::map<std::string, const NamedArray*> by_name;
    for (const auto& a : state) by_name[a.name] = &a;
    for (size_t p = 0; p < params.size(); ++p) {
      for (size_t s = 0; s < names_.size(); ++s) {
        std::string key = params[p].name + "/" + names_[s];
        auto it = by_name.find(key);
        if (it == by_name.end()) throw CheckpointError("optimizer state '" + key + "' is missing");
        if (it->second->data.size() != params[p].ref.value->size())
          throw CheckpointError("optimizer state '" + key + "' has " +
                                std::to_string(it->second->data.size()) + " values, expected " +
                                std::to_string(params[p].ref.value->size()));
        get(p, s, params[p].ref.value->size()) = it->second->data;
      }
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<float>>> data_;
};

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerSpec& spec) : spec_(spec), slots_({"momentum"}) {}
  const char* name() const override { return "sgd"; }

  void update(const std::vector<NamedParam>& params, double lr, int64_t) override {
    const float rate = float(lr), mu = float(spec_.momentum), wd = float(spec_.weight_decay);
    for (size_t p = 0; p < params.size(); ++p) {
      Tensor& w = *params[p].ref.value;
      const Tensor& g = *params[p].ref.grad;
      const float decay = params[p].ref.decay ? wd : 0.0f;
      float* wv = w.data();
      const float* gv = g.data();
      const size_t n = w.size();
      if (mu == 0.0f) {
        ParallelRange(n, kGrain, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i) wv[i] -= rate * (gv[i] + decay * wv[i]);
        });
        continue;
      }
      float* buf = slots_.get(p, 0, n).data();
      const bool nesterov = spec_.nesterov;
      ParallelRange(n, kGrain, [&](size_t lo, size_t hi) {
        if (nesterov) {
          for (size_t i = lo; i < hi; ++i) {
            float d = gv[i] + decay * wv[i];
            buf[i] = mu * buf[i] + d;
            wv[i] -= rate * (d + mu * buf[i]);
          }
        } else {
          for (size_t i = lo; i < hi; ++i) {
            buf[i] = mu * buf[i] + gv[i] + decay * wv[i];
            wv[i] -= rate * buf[i];
          }
        }
      });
    }
  }
  void export_state(const std::vector<NamedParam>& params,
                    std::vector<NamedArray>* out) const override {
    if (spec_.momentum == 0)
      out->clear();
    else
      slots_.export_state(params, out);
  }
  void import_state(const std::vector<NamedParam>& params,
                    const std::vector<NamedArray>& state) override {
    if (spec_.momentum != 0) slots_.import_state(params, state);
  }

 private:
  OptimizerSpec spec_;
  Slots slots_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(const OptimizerSpec& spec) : spec_(spec), slots_({"m", "v"}) {}
  const char* name() const override { return "adam"; }

  void update(const std::vector<NamedParam>& params, double lr, int64_t step) override {
    const double t = double(step + 1);
    const float b1 = float(spec_.beta1), b2 = float(spec_.beta2), eps = float(spec_.epsilon);
    const float c1 = float(1.0 / (1.0 - std::pow(spec_.beta1, t)));
    const float c2 = float(1.0 / (1.0 - std::pow(spec_.beta2, t)));
    const float rate = float(lr), wd = float(spec_.weight_decay);
    for (size_t p = 0; p < params.size(); ++p) {
      Tensor& w = *params[p].ref.value;
      const float* gv = params[p].ref.grad->data();
      float* wv = w.data();
      const size_t n = w.size();
      float* m = slots_.get(p, 0, n).data();
      float* v = slots_.get(p, 1, n).data();
      const float decay = params[p].ref.decay ? rate * wd : 0.0f;
      ParallelRange(n, kGrain, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) {
          m[i] = b1 * m[i] + (1.0f - b1) * gv[i];
          v[i] = b2 * v[i] + (1.0f - b2) * gv[i] * gv[i];
          wv[i] -= decay * wv[i] + rate * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
        }
      });
    }
  }
  void export_state(const std::vector<NamedParam>& params,
                    std::vector<NamedArray>* out) const override {
    slots_.export_state(params, out);
  }
  void import_state(const std::vector<NamedParam>& params,
                    const std::vector<NamedArray>& state) override {
    slots_.import_state(params, state);
  }

 private:
  OptimizerSpec spec_;
  Slots slots_;
};

}  // namespace

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerSpec& spec) {
  if (spec.kind == OptimizerSpec::Kind::Adam) return std::make_unique<Adam>(spec);
  return std::make_unique<Sgd>(spec);
}

}  // namespace dlh

// DLH — a dense fp32 tensor. Layout is row-major: activations are N x C x H x W
// (NCHW) or N x F; dense weights are out x in; conv weights are F x C x K x K.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlh {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int> shape) { resize(std::move(shape)); }

  // Changes the shape; keeps the allocation when it is large enough. Contents are
  // unspecified afterwards (call zero() if needed).
  void resize(std::vector<int> shape) {
    shape_ = std::move(shape);
    size_t n = 1;
    for (int d : shape_) n *= size_t(d);
    data_.resize(n);
  }
  void zero() { std::fill(data_.begin(), data_.end(), 0.0f); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }
  const std::vector<int>& shape() const { return shape_; }
  int dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  std::vector<float>& values() { return data_; }
  const std::vector<float>& values() const { return data_; }

 private:
  std::vector<int> shape_;
  std::vector<float> data_;
};

}  // namespace dlh

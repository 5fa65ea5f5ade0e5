// DLH — a dense fp32 tensor. Layout is row-major: activations are N x C x H x W
// (NCHW) or N x F; dense weights are out x in; conv weights are F x C x K x K.
//
// A tensor owns its elements, unless share_storage() made it a view of a slice of a larger
// array that several tensors share: the gradient synchronisation keeps all parameter
// gradients in one flat array (grad_sync.hpp), so each fused bucket is summed across ranks
// where backward wrote it, without packing copies. Copying a view gives an owning tensor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace dlh {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int> shape) { resize(std::move(shape)); }

  Tensor(const Tensor& other) : shape_(other.shape_), owned_(other.begin(), other.end()) {
    point_at_owned();
  }
  Tensor& operator=(const Tensor& other) {
    if (this != &other) {
      std::vector<float> copy(other.begin(), other.end());
      shape_ = other.shape_;
      owned_ = std::move(copy);
      shared_.reset();
      point_at_owned();
    }
    return *this;
  }
  // A moved vector keeps its buffer, so data_ stays valid for an owning tensor too.
  Tensor(Tensor&& other) noexcept
      : shape_(std::move(other.shape_)),
        owned_(std::move(other.owned_)),
        shared_(std::move(other.shared_)),
        data_(other.data_),
        size_(other.size_) {
    other.forget();
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      shape_ = std::move(other.shape_);
      owned_ = std::move(other.owned_);
      shared_ = std::move(other.shared_);
      data_ = other.data_;
      size_ = other.size_;
      other.forget();
    }
    return *this;
  }

  // Changes the shape; keeps the allocation when it is large enough. Contents are
  // unspecified afterwards (call zero() if needed). A view's element count is fixed.
  void resize(std::vector<int> shape) {
    size_t n = 1;
    for (int d : shape) n *= size_t(d);
    if (shared_ && n != size_) throw std::logic_error("tensor: a view cannot change its size");
    shape_ = std::move(shape);
    if (shared_) return;
    owned_.resize(n);
    point_at_owned();
  }
  void zero() { std::fill(begin(), end(), 0.0f); }

  // Moves this tensor's elements to storage[offset, offset + size()) (they are copied there),
  // and keeps `storage` alive for as long as the tensor is a view of it.
  void share_storage(std::shared_ptr<std::vector<float>> storage, size_t offset) {
    if (offset > storage->size() || storage->size() - offset < size_)
      throw std::logic_error("tensor: shared storage too small");
    float* place = storage->data() + offset;
    std::copy(begin(), end(), place);
    shared_ = std::move(storage);
    owned_ = std::vector<float>();
    data_ = place;
  }
  bool is_view() const { return shared_ != nullptr; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  float* begin() { return data_; }
  float* end() { return data_ + size_; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + size_; }
  const std::vector<int>& shape() const { return shape_; }
  int dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }

  std::vector<float> to_vector() const { return std::vector<float>(begin(), end()); }
  // Overwrites every element; `values` must have size() elements.
  void assign(const std::vector<float>& values) {
    if (values.size() != size_) throw std::logic_error("tensor: assigned a different size");
    std::copy(values.begin(), values.end(), begin());
  }

 private:
  void point_at_owned() {
    data_ = owned_.data();
    size_ = owned_.size();
  }
  void forget() {
    shape_.clear();
    owned_.clear();
    shared_.reset();
    data_ = nullptr;
    size_ = 0;
  }

  std::vector<int> shape_;
  std::vector<float> owned_;                    // the elements, unless a view
  std::shared_ptr<std::vector<float>> shared_;  // what a view's elements live in
  float* data_ = nullptr;                       // owned_.data() or a place in *shared_
  size_t size_ = 0;
};

}  // namespace dlh

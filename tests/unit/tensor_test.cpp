// tensor_test — owning tensors and views of a shared array (Tensor::share_storage), the
// layout the CPU gradient synchronisation sums in place.
#include "launcher/nn/tensor.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace dlh {
namespace {

std::shared_ptr<std::vector<float>> Array(size_t n) {
  return std::make_shared<std::vector<float>>(n, -1.0f);
}

TEST(Tensor, ShareStorageKeepsTheContentsAndWritesThrough) {
  Tensor a({2, 3});
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i);
  auto flat = Array(10);
  a.share_storage(flat, 4);
  EXPECT_TRUE(a.is_view());
  EXPECT_EQ(a.data(), flat->data() + 4);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  (*flat)[4] = 42;
  EXPECT_EQ(a[0], 42);
  a.zero();
  EXPECT_EQ(*flat, (std::vector<float>{-1, -1, -1, -1, 0, 0, 0, 0, 0, 0}));
}

TEST(Tensor, AViewOutlivesWhoeverMadeTheArray) {
  Tensor a({4});
  {
    auto flat = Array(4);
    a.share_storage(flat, 0);
  }  // the last other owner is gone; the tensor keeps the array
  a.assign({1, 2, 3, 4});
  EXPECT_EQ(a.to_vector(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Tensor, CopiesOwnTheirElementsMovesKeepTheView) {
  auto flat = Array(6);
  Tensor a({3});
  a.share_storage(flat, 3);
  a.assign({7, 8, 9});
  Tensor copy = a;
  EXPECT_FALSE(copy.is_view());
  copy[0] = 0;
  EXPECT_EQ(a[0], 7);  // the copy is independent
  Tensor moved = std::move(a);
  EXPECT_TRUE(moved.is_view());
  EXPECT_EQ(moved.data(), flat->data() + 3);
  Tensor assigned;
  assigned = moved;
  EXPECT_FALSE(assigned.is_view());
  EXPECT_EQ(assigned.to_vector(), (std::vector<float>{7, 8, 9}));
  Tensor owner({2});
  owner.assign({5, 6});
  Tensor taken = std::move(owner);  // an owning tensor's buffer moves with it
  EXPECT_EQ(taken.to_vector(), (std::vector<float>{5, 6}));
  EXPECT_EQ(owner.size(), 0u);
}

TEST(Tensor, AViewKeepsItsSizeAndRefusesATooSmallArray) {
  auto flat = Array(8);
  Tensor a({2, 2});
  EXPECT_THROW(a.share_storage(flat, 5), std::logic_error);
  EXPECT_THROW(a.share_storage(flat, 9), std::logic_error);
  a.share_storage(flat, 4);
  a.resize({4});  // same element count, another shape
  EXPECT_EQ(a.shape(), (std::vector<int>{4}));
  EXPECT_THROW(a.resize({5}), std::logic_error);
  EXPECT_THROW(a.assign({1, 2}), std::logic_error);
}

TEST(Tensor, AnOwningTensorResizesAndAssigns) {
  Tensor a;
  EXPECT_EQ(a.size(), 0u);
  a.resize({2, 2});
  a.assign({1, 2, 3, 4});
  a.resize({3});  // contents unspecified afterwards, size follows the shape
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a.end() - a.begin(), 3);
}

}  // namespace
}  // namespace dlh

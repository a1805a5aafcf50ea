#pragma once
// block_batch<T, Space>: a batch of column-major blocks of different sizes in one allocation that it
// owns (ld = max(rows, 1)), described by a batch (batch.hpp) whose arrays are in the space.
#include <h2expr/detail/primitives/batch.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/view.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
class block_batch {
 public:
  block_batch() = default;
  block_batch(context_ptr<Space> ctx, std::vector<int> rows, std::vector<int> cols) : items_(ctx) {
    require<dimension_mismatch>(rows.size() == cols.size(), "block_batch: rows and cols differ in length");
    std::vector<std::int64_t> offsets(rows.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      require(rows[i] >= 0 && cols[i] >= 0, "block_batch: negative block size");
      offsets[i] = total;
      total += std::int64_t(rows[i]) * cols[i];
    }
    storage_ = buffer<T, Space>(ctx, std::size_t(total));
    items_.reserve(int(rows.size()));
    for (std::size_t i = 0; i < rows.size(); ++i)
      items_.add(storage_.data() + offsets[i], rows[i], cols[i], std::max(rows[i], 1));
    items_.in_space();  // uploaded now: a const block_batch is then safe to share
  }

  int count() const { return items_.count(); }
  int max_rows() const { return items_.max_rows(); }
  int max_cols() const { return items_.max_cols(); }
  std::int64_t total_size() const { return std::int64_t(storage_.size()); }
  context<Space>& ctx() const { return items_.ctx(); }
  const batch<T, Space>& items() const { return items_; }

  // Arrays in the space, as the vbatched primitives take them.
  T* const* pointers() const { return items_.in_space().pointers; }
  const int* rows() const { return items_.in_space().rows; }
  const int* cols() const { return items_.in_space().cols; }
  const int* ld() const { return items_.in_space().ld; }
  T* data() { return storage_.data(); }

  int rows(int i) const { return items_.rows(i); }
  int cols(int i) const { return items_.cols(i); }
  view<T, Space> item(int i) {
    return {items_.pointer(i), items_.rows(i), items_.cols(i), items_.ld(i), &items_.ctx()};
  }
  const_view<T, Space> item(int i) const {
    return {items_.pointer(i), items_.rows(i), items_.cols(i), items_.ld(i), &items_.ctx()};
  }

 private:
  batch<T, Space> items_{nullptr};
  buffer<T, Space> storage_;
};

}  // namespace h2expr::detail

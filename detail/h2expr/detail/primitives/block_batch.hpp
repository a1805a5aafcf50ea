#pragma once
// block_batch<T, Space>: a batch of column-major blocks of different sizes in one allocation, with
// the per-item arrays (rows, cols, ld, pointers) that the vbatched primitives take, in the space.
#include <h2expr/detail/primitives/batched.hpp>
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
  block_batch(context_ptr<Space> ctx, std::vector<int> rows, std::vector<int> cols)
      : ctx_(std::move(ctx)), rows_host_(std::move(rows)), cols_host_(std::move(cols)) {
    require<dimension_mismatch>(rows_host_.size() == cols_host_.size(), "block_batch: rows and cols differ in length");
    std::vector<std::int64_t> offsets(rows_host_.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < rows_host_.size(); ++i) {
      require(rows_host_[i] >= 0 && cols_host_[i] >= 0, "block_batch: negative block size");
      offsets[i] = total;
      total += std::int64_t(rows_host_[i]) * cols_host_[i];
      max_rows_ = std::max(max_rows_, rows_host_[i]);
      max_cols_ = std::max(max_cols_, cols_host_[i]);
    }
    offsets_host_ = offsets;
    storage_ = buffer<T, Space>(ctx_, std::size_t(total));
    rows_ = buffer<int, Space>(ctx_, rows_host_);
    cols_ = buffer<int, Space>(ctx_, cols_host_);
    std::vector<int> ld(rows_host_.size());
    std::transform(rows_host_.begin(), rows_host_.end(), ld.begin(), [](int r) { return std::max(r, 1); });
    ld_ = buffer<int, Space>(ctx_, ld);
    buffer<std::int64_t, Space> offsets_space(ctx_, offsets);
    pointers_ = buffer<T*, Space>(ctx_, rows_host_.size());
    marshal_offsets(*ctx_, storage_.data(), offsets_space.data(), count(), pointers_.data());
  }

  int count() const { return int(rows_host_.size()); }
  int max_rows() const { return max_rows_; }
  int max_cols() const { return max_cols_; }
  std::int64_t total_size() const { return std::int64_t(storage_.size()); }
  context<Space>& ctx() const { return *ctx_; }

  // Arrays in the space, as the vbatched primitives take them.
  T* const* pointers() const { return pointers_.data(); }
  const int* rows() const { return rows_.data(); }
  const int* cols() const { return cols_.data(); }
  const int* ld() const { return ld_.data(); }
  T* data() { return storage_.data(); }

  int rows(int i) const { return rows_host_[i]; }
  int cols(int i) const { return cols_host_[i]; }
  view<T, Space> item(int i) {
    return {storage_.data() + offsets_host_[i], rows_host_[i], cols_host_[i], std::max(rows_host_[i], 1), ctx_.get()};
  }
  const_view<T, Space> item(int i) const {
    return {storage_.data() + offsets_host_[i], rows_host_[i], cols_host_[i], std::max(rows_host_[i], 1), ctx_.get()};
  }

 private:
  context_ptr<Space> ctx_;
  std::vector<int> rows_host_, cols_host_;
  std::vector<std::int64_t> offsets_host_;
  int max_rows_ = 0, max_cols_ = 0;
  buffer<T, Space> storage_;
  buffer<int, Space> rows_, cols_, ld_;
  buffer<T*, Space> pointers_;
};

}  // namespace h2expr::detail

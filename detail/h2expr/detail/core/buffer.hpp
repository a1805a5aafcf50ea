#pragma once
// buffer<T, Space>: an owning, uninitialized array in a space's memory that keeps its context alive.
// The storage of matrices and the temporaries (pointer arrays, sizes, workspaces) of batched work.
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/host/memory.hpp>
#if defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/core/cuda/memory.cuh>
#endif

#include <cstddef>
#include <utility>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
class buffer {
 public:
  buffer() = default;
  buffer(context_ptr<Space> ctx, std::size_t n) : ctx_(std::move(ctx)), size_(n) {
    if (n) data_ = allocate<T>(*ctx_, n);
  }
  // A copy of host values in the space.
  buffer(context_ptr<Space> ctx, const std::vector<T>& values) : buffer(std::move(ctx), values.size()) {
    upload_2d(*ctx_, size_, 1, values.data(), size_, data_, size_);
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  buffer(buffer&& o) noexcept
      : ctx_(std::move(o.ctx_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      release();
      ctx_ = std::move(o.ctx_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~buffer() { release(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const context_ptr<Space>& context() const { return ctx_; }

  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    if (size_) download_2d(*ctx_, size_, 1, data_, size_, out.data(), size_);
    return out;
  }

 private:
  void release() noexcept {
    if (data_) deallocate(*ctx_, data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  context_ptr<Space> ctx_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace h2expr::detail

#pragma once
// batched_sampler<T, Space>: a batch of small operators M_i (rows_i x cols_i) known only through
// their products with blocks of vectors, as batched_ara takes them. The user's function receives a
// sample_batch and writes, for each entry p, output(p) = M_item(p) * input(p) (or M^T for the
// transpose). The batch is offered twice: as views, for a loop over the entries, and as arrays in
// the space's memory, for one batched kernel over all of them.
#include <h2expr/detail/primitives/batch.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/view.hpp>
#include <h2expr/detail/operands/matrix.hpp>

#include <algorithm>
#include <climits>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace h2expr {

namespace detail {
struct sample_batch_access;
}

template <class T, class Space = host>
class sample_batch {
 public:
  // Host vectors, one entry per p; the constructor mirrors them in the space. `inputs`/`outputs` are
  // pointers into the space's memory.
  sample_batch(::h2expr::context_ptr<Space> ctx, bool transposed, std::vector<int> items, std::vector<int> input_rows,
               std::vector<int> output_rows, std::vector<int> samples, std::vector<const T*> inputs,
               std::vector<int> input_ld, std::vector<T*> outputs, std::vector<int> output_ld)
      : ctx_(std::move(ctx)), transposed_(transposed), items_(std::move(items)), in_(ctx_), out_(ctx_) {
    const std::size_t n = items_.size();
    for (const std::size_t size : {input_rows.size(), output_rows.size(), samples.size(), inputs.size(),
                                   input_ld.size(), outputs.size(), output_ld.size()})
      detail::require<dimension_mismatch>(size == n, "sample_batch: " + std::to_string(n) + " items but " +
                                                         std::to_string(size) + " entries of an array");
    in_.reserve(int(n)), out_.reserve(int(n));
    for (std::size_t p = 0; p < n; ++p) {
      in_.add(inputs[p], input_rows[p], samples[p], input_ld[p]);
      out_.add(outputs[p], output_rows[p], samples[p], output_ld[p]);
    }
    // Two transfers: the items, and both batches' arrays together (each upload waits for the stream
    // on a GPU).
    items_d_ = detail::buffer<int, Space>(ctx_, items_);
    detail::upload_together(in_, out_);
  }

  int count() const { return int(items_.size()); }
  bool transposed() const { return transposed_; }  // true: products with M_i^T are asked for
  int item(int p) const { return items_[std::size_t(p)]; }
  const_view<T, Space> input(int p) const { return {in_.pointer(p), in_.rows(p), in_.cols(p), in_.ld(p), ctx_.get()}; }
  view<T, Space> output(int p) const { return {out_.pointer(p), out_.rows(p), out_.cols(p), out_.ld(p), ctx_.get()}; }
  ::h2expr::context<Space>& context() const { return *ctx_; }

  // The same entries as arrays in the space's memory (device memory for CUDA), for batched kernels.
  const int* items() const { return items_d_.data(); }
  const int* input_rows() const { return in_.in_space().rows; }
  const int* output_rows() const { return out_.in_space().rows; }
  const int* samples() const { return out_.in_space().cols; }
  const T* const* inputs() const { return in_.inputs(); }
  const int* input_ld() const { return in_.in_space().ld; }
  T* const* outputs() const { return out_.in_space().pointers; }
  const int* output_ld() const { return out_.in_space().ld; }
  int max_input_rows() const { return in_.max_rows(); }
  int max_output_rows() const { return out_.max_rows(); }
  int max_samples() const { return out_.max_cols(); }

 private:
  friend struct detail::sample_batch_access;
  ::h2expr::context_ptr<Space> ctx_;
  bool transposed_;
  std::vector<int> items_;
  detail::buffer<int, Space> items_d_;
  detail::batch<const T, Space> in_;  // entry p: input_rows x samples
  detail::batch<T, Space> out_;       // entry p: output_rows x samples
};

namespace detail {
// The entries as batches, for h2expr's own samplers (batched primitives take them directly).
struct sample_batch_access {
  template <class T, class Space>
  static const batch<const T, Space>& inputs(const sample_batch<T, Space>& b) { return b.in_; }
  template <class T, class Space>
  static const batch<T, Space>& outputs(const sample_batch<T, Space>& b) { return b.out_; }
};
}  // namespace detail

template <class T, class Space = host>
class batched_sampler {
 public:
  using function = std::function<void(const sample_batch<T, Space>&)>;

  // Symmetric operators (M_i = M_i^T, sizes[i] x sizes[i]): one function serves both products.
  batched_sampler(std::vector<index> sizes, function f, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : batched_sampler(sizes, sizes, f, f, std::move(ctx)) {}
  // General operators: f gives M_i X, f_transpose gives M_i^T X.
  batched_sampler(std::vector<index> rows, std::vector<index> cols, function f, function f_transpose,
                  ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : ctx_(std::move(ctx)), f_(std::move(f)), ft_(std::move(f_transpose)) {
    detail::require<dimension_mismatch>(rows.size() == cols.size(),
                                        "batched_sampler: " + std::to_string(rows.size()) + " row counts but " +
                                            std::to_string(cols.size()) + " column counts");
    detail::require(bool(f_) && bool(ft_), "batched_sampler: empty function");
    rows_.reserve(rows.size()), cols_.reserve(cols.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      detail::require(rows[i] >= 0 && cols[i] >= 0 && rows[i] <= INT_MAX && cols[i] <= INT_MAX,
                      "batched_sampler: item " + std::to_string(i) + " has size " + std::to_string(rows[i]) + " x " +
                          std::to_string(cols[i]));
      rows_.push_back(int(rows[i])), cols_.push_back(int(cols[i]));
    }
  }

  int size() const { return int(rows_.size()); }
  int rows(int i) const { return rows_[std::size_t(i)]; }
  int cols(int i) const { return cols_[std::size_t(i)]; }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return ctx_; }
  void apply(const sample_batch<T, Space>& b) const { f_(b); }
  void apply_transpose(const sample_batch<T, Space>& b) const { ft_(b); }

 private:
  ::h2expr::context_ptr<Space> ctx_;
  std::vector<int> rows_, cols_;
  function f_, ft_;
};

}  // namespace h2expr

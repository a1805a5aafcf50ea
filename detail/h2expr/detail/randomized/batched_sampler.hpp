#pragma once
// batched_sampler<T, Space>: a batch of small operators M_i (rows_i x cols_i) known only through
// their products with blocks of vectors, as batched_ara takes them. The user's function receives a
// sample_batch and writes, for each entry p, output(p) = M_item(p) * input(p) (or M^T for the
// transpose). The batch is offered twice: as views, for a loop over the entries, and as arrays in
// the space's memory, for one batched kernel over all of them.
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

template <class T, class Space = host>
class sample_batch {
 public:
  // Host vectors, one entry per p; the constructor mirrors them in the space. `inputs`/`outputs` are
  // pointers into the space's memory.
  sample_batch(::h2expr::context_ptr<Space> ctx, bool transposed, std::vector<int> items, std::vector<int> input_rows,
               std::vector<int> output_rows, std::vector<int> samples, std::vector<const T*> inputs,
               std::vector<int> input_ld, std::vector<T*> outputs, std::vector<int> output_ld)
      : ctx_(std::move(ctx)), transposed_(transposed), items_(std::move(items)), input_rows_(std::move(input_rows)),
        output_rows_(std::move(output_rows)), samples_(std::move(samples)), inputs_(std::move(inputs)),
        input_ld_(std::move(input_ld)), outputs_(std::move(outputs)), output_ld_(std::move(output_ld)) {
    // One transfer for the sizes, one per pointer array (each upload waits for the stream on a GPU).
    std::vector<int> ints;
    for (const auto* part : {&items_, &input_rows_, &output_rows_, &samples_, &input_ld_, &output_ld_})
      ints.insert(ints.end(), part->begin(), part->end());
    ints_d_ = detail::buffer<int, Space>(ctx_, ints);
    inputs_d_ = detail::buffer<const T*, Space>(ctx_, inputs_);
    outputs_d_ = detail::buffer<T*, Space>(ctx_, outputs_);
    for (std::size_t p = 0; p < items_.size(); ++p) {
      max_input_rows_ = std::max(max_input_rows_, input_rows_[p]);
      max_output_rows_ = std::max(max_output_rows_, output_rows_[p]);
      max_samples_ = std::max(max_samples_, samples_[p]);
    }
  }

  int count() const { return int(items_.size()); }
  bool transposed() const { return transposed_; }  // true: products with M_i^T are asked for
  int item(int p) const { return items_[std::size_t(p)]; }
  const_view<T, Space> input(int p) const {
    return {inputs_[std::size_t(p)], input_rows_[std::size_t(p)], samples_[std::size_t(p)], input_ld_[std::size_t(p)],
            ctx_.get()};
  }
  view<T, Space> output(int p) const {
    return {outputs_[std::size_t(p)], output_rows_[std::size_t(p)], samples_[std::size_t(p)],
            output_ld_[std::size_t(p)], ctx_.get()};
  }
  ::h2expr::context<Space>& context() const { return *ctx_; }

  // The same entries as arrays in the space's memory (device memory for CUDA), for batched kernels.
  const int* items() const { return array(0); }
  const int* input_rows() const { return array(1); }
  const int* output_rows() const { return array(2); }
  const int* samples() const { return array(3); }
  const T* const* inputs() const { return inputs_d_.data(); }
  const int* input_ld() const { return array(4); }
  T* const* outputs() const { return outputs_d_.data(); }
  const int* output_ld() const { return array(5); }
  int max_input_rows() const { return max_input_rows_; }
  int max_output_rows() const { return max_output_rows_; }
  int max_samples() const { return max_samples_; }

 private:
  ::h2expr::context_ptr<Space> ctx_;
  bool transposed_;
  std::vector<int> items_, input_rows_, output_rows_, samples_;
  std::vector<const T*> inputs_;
  std::vector<int> input_ld_;
  std::vector<T*> outputs_;
  std::vector<int> output_ld_;
  const int* array(int part) const { return ints_d_.data() + std::size_t(part) * items_.size(); }
  detail::buffer<int, Space> ints_d_;  // items, input rows, output rows, samples, input ld, output ld
  detail::buffer<const T*, Space> inputs_d_;
  detail::buffer<T*, Space> outputs_d_;
  int max_input_rows_ = 0, max_output_rows_ = 0, max_samples_ = 0;
};

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

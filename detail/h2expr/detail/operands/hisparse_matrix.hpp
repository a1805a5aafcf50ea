#pragma once
// hisparse_matrix<T, Space>: an immutable sparse matrix in the HiSparse format (a tree of d x d nodes,
// each dense or COO with 1-, 2- or 4-byte coordinates: primitives/hisparse_format.hpp), the sparse
// operand of expressions that stores one copy for both H X and H^T X. Transposition and a scale are
// state, as in the paper: H.transposed() and H.scaled(s) share the nodes. Copies share them too.
//
//   auto H = hx::hisparse_matrix<double>::from_csr(rows, cols, row_ptr, col_idx, values);
//   hx::matrix<double> Y = hx::transpose(H) * X;                      // no transposed copy
//   hx::hisparse_matrix<double> C = H + 2.0 * hx::transpose(G);       // a new matrix (a sum of terms)
//   auto S = hx::hara(A22 - hx::transpose(H) * hx::solve(F) * H, 1e-6);
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/view.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/primitives/csr.hpp>
#include <h2expr/detail/primitives/hisparse_format.hpp>

#include <Eigen/SparseCore>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

struct hisparse_options {
  // The side d of the tree's nodes: a power of two, 2 <= d <= 256 (a leaf's coordinates fit a byte).
  int node_size = 256;
};

// CSR arrays in host memory, the form from_csr takes.
template <class T>
struct csr_arrays {
  index rows = 0, cols = 0;
  std::vector<int> row_ptr, col_idx;
  std::vector<T> values;
};

// How many nodes of each form a tree holds.
struct hisparse_nodes {
  std::size_t coo1 = 0, coo2 = 0, coo4 = 0, dense_leaf = 0, sparse_inner = 0, dense_inner = 0;
};

template <class T, class Space = host>
class hisparse_matrix : public detail::values_in_space<T, Space> {
 public:
  // rows x cols from host CSR arrays (sparse_matrix::from_csr's arguments and conventions: columns
  // in any order within a row, a (row, column) given more than once is the sum of its values).
  static hisparse_matrix from_csr(index rows, index cols, const std::vector<int>& row_ptr,
                                  const std::vector<int>& col_idx, const std::vector<T>& values,
                                  ::h2expr::context_ptr<Space> ctx = default_context<Space>(),
                                  hisparse_options options = {}) {
    const int log_d = log_node_size(options);
    detail::check_csr_arrays("hisparse_matrix::from_csr", rows, cols, row_ptr, col_idx, values);
    detail::hisparse::triplets<T> t;
    t.rows = rows;
    t.cols = cols;
    t.row.resize(values.size());
    t.col.assign(col_idx.begin(), col_idx.end());
    t.val = values;
    for (index r = 0; r < rows; ++r)
      for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) t.row[std::size_t(e)] = std::uint32_t(r);
    return hisparse_matrix(std::move(t), log_d, std::move(ctx));
  }
  static hisparse_matrix from_csr(const csr_arrays<T>& a, ::h2expr::context_ptr<Space> ctx = default_context<Space>(),
                                  hisparse_options options = {}) {
    return from_csr(a.rows, a.cols, a.row_ptr, a.col_idx, a.values, std::move(ctx), options);
  }
  // A copy of an Eigen sparse matrix (either storage order).
  template <int Options, class StorageIndex>
  static hisparse_matrix from_eigen(const Eigen::SparseMatrix<T, Options, StorageIndex>& S,
                                    ::h2expr::context_ptr<Space> ctx = default_context<Space>(),
                                    hisparse_options options = {}) {
    const auto a = detail::csr_of_eigen(S, "hisparse_matrix");
    return from_csr(a.rows, a.cols, a.ptr, a.idx, a.val, std::move(ctx), options);
  }

  // The terms of a sum expression: what the converting constructor accepts (see add()).
  template <class E>
  static constexpr bool is_sum_of_terms() {
    using X = std::remove_cvref_t<E>;
    if constexpr (std::is_same_v<X, hisparse_matrix>) return true;
    else if constexpr (requires(const X& x) { x.left; x.right; x.a; x.b; })
      return is_sum_of_terms<decltype(std::declval<const X&>().left)>() &&
             is_sum_of_terms<decltype(std::declval<const X&>().right)>() &&
             std::is_same_v<typename X::value_type, T> && std::is_same_v<typename X::space, Space>;
    else if constexpr (requires(const X& x) { x.inner; x.s; })
      return is_sum_of_terms<decltype(std::declval<const X&>().inner)>();
    else if constexpr (requires(const X& x) { x.inner; })
      return is_sum_of_terms<decltype(std::declval<const X&>().inner)>();
    else return false;
  }

  // A sum of HiSparse terms (H + G, H - 2 transpose(G), H.transposed() + G, ...), converted: a new
  // matrix with the node size and context of its first term. Anything else does not convert.
  template <class E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, hisparse_matrix> && is_sum_of_terms<E>())
  hisparse_matrix(const E& sum) : hisparse_matrix(add(sum)) {}

  hisparse_matrix(const hisparse_matrix&) = default;
  hisparse_matrix(hisparse_matrix&&) noexcept = default;
  hisparse_matrix& operator=(const hisparse_matrix&) = default;
  hisparse_matrix& operator=(hisparse_matrix&&) noexcept = default;

  // The shape of op(H) for the state's op.
  index rows() const { return transposed_ ? s_->g.cols : s_->g.rows; }
  index cols() const { return transposed_ ? s_->g.rows : s_->g.cols; }
  // Entries given (after duplicates were summed), explicit zeros included.
  index nnz() const { return s_->nnz; }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return s_->ctx; }
  ::h2expr::context<Space>& context() const { return *s_->ctx; }

  // The state: this matrix is scale() op(stored), op = transpose when is_transposed().
  bool is_transposed() const { return transposed_; }
  T scale() const { return scale_; }
  hisparse_matrix transposed() const {
    hisparse_matrix m(*this);
    m.transposed_ = !transposed_;
    return m;
  }
  hisparse_matrix scaled(T s) const {
    hisparse_matrix m(*this);
    m.scale_ = scale_ * s;
    return m;
  }

  // Exactly symmetric, pattern and values (the stored matrix; computed once).
  bool symmetric() const { return s_->symmetric; }

  // Every byte it holds in the space: the nodes (and, on the CUDA space, the kernels' queues).
  std::size_t memory_bytes() const {
    return s_->pool.size() + (s_->coo.size() + s_->dense.size()) * sizeof(detail::hisparse::chunk);
  }
  int node_size() const { return s_->g.d(); }
  int levels() const { return s_->g.levels; }
  hisparse_nodes nodes() const {
    std::vector<std::size_t> n;
    with_host_pool([&](const unsigned char* pool) { n = detail::hisparse::node_counts(s_->g, pool); });
    using namespace detail::hisparse;
    return {n[coo1], n[coo2], n[coo4], n[dense_leaf], n[sparse_inner], n[dense_inner]};
  }

  // Host copies of this matrix (state applied). Dense leaves' zeros are not listed.
  csr_arrays<T> to_csr() const {
    auto t = entries();
    csr_arrays<T> a;
    a.rows = rows();
    a.cols = cols();
    a.row_ptr.assign(std::size_t(a.rows) + 1, 0);
    for (std::uint32_t r : t.row) ++a.row_ptr[std::size_t(r) + 1];
    for (index r = 0; r < a.rows; ++r) a.row_ptr[std::size_t(r) + 1] += a.row_ptr[std::size_t(r)];
    a.col_idx.resize(t.val.size());
    a.values.resize(t.val.size());
    // Entries come in key order; place them by row, then sort each row by column.
    std::vector<int> next(a.row_ptr.begin(), a.row_ptr.end() - 1);
    for (std::size_t e = 0; e < t.val.size(); ++e) {
      const int p = next[t.row[e]]++;
      a.col_idx[std::size_t(p)] = int(t.col[e]);
      a.values[std::size_t(p)] = t.val[e];
    }
    std::vector<std::pair<int, T>> row;
    for (index r = 0; r < a.rows; ++r) {
      const int b = a.row_ptr[std::size_t(r)], e = a.row_ptr[std::size_t(r) + 1];
      row.clear();
      for (int x = b; x < e; ++x) row.emplace_back(a.col_idx[std::size_t(x)], a.values[std::size_t(x)]);
      std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (int x = b; x < e; ++x) {
        a.col_idx[std::size_t(x)] = row[std::size_t(x - b)].first;
        a.values[std::size_t(x)] = row[std::size_t(x - b)].second;
      }
    }
    return a;
  }
  Eigen::SparseMatrix<T> to_eigen() const {
    const auto t = entries();
    std::vector<Eigen::Triplet<T>> x;
    x.reserve(t.val.size());
    for (std::size_t e = 0; e < t.val.size(); ++e) x.emplace_back(int(t.row[e]), int(t.col[e]), t.val[e]);
    Eigen::SparseMatrix<T> S(rows(), cols());
    S.setFromTriplets(x.begin(), x.end());
    return S;
  }

  // out = alpha op(M) in + beta out for M this matrix (its state included); beta == 0 overwrites out,
  // whatever it holds. in and out must not overlap. The expression layer's operand interface.
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) const {
    const bool trans = (t == op::transpose) != transposed_;
    const index r = t == op::none ? rows() : cols(), c = t == op::none ? cols() : rows();
    detail::require<dimension_mismatch>(
        in.rows() == c && out.rows() == r && in.cols() == out.cols(),
        std::string("hisparse_matrix::apply: ") + (t == op::none ? "H" : "H^T") + " is " + std::to_string(r) +
            " x " + std::to_string(c) + ", in is " + std::to_string(in.rows()) + " x " + std::to_string(in.cols()) +
            ", out is " + std::to_string(out.rows()) + " x " + std::to_string(out.cols()));
    detail::require(in.cols() <= INT_MAX, "hisparse_matrix::apply: too many vectors");
    if (out.rows() == 0 || out.cols() == 0) return;
    const detail::hisparse::tree_view v{s_->g,        s_->pool.data(),         s_->coo.data(), s_->dense.data(),
                                        index(s_->coo.size()), index(s_->dense.size()), s_->nnz};
    detail::hisparse_multiply(*s_->ctx, v, trans, T(alpha * scale_), in.data(), in.ld(), beta, out.data(), out.ld(),
                              int(in.cols()));
  }
  // The same, by sparse_matrix's name.
  void multiply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) const {
    apply(t, alpha, in, beta, out);
  }

 private:
  struct state {
    ::h2expr::context_ptr<Space> ctx;
    detail::hisparse::geometry g;
    detail::buffer<unsigned char, Space> pool;
    detail::buffer<detail::hisparse::chunk, Space> coo, dense;  // the CUDA kernels' queues
    index nnz = 0;
    bool symmetric = false;
  };

  static int log_node_size(const hisparse_options& o) {
    int log_d = 1;
    while (log_d < 8 && (1 << log_d) < o.node_size) ++log_d;
    detail::require<invalid_argument>(o.node_size >= 2 && o.node_size <= 256 && (1 << log_d) == o.node_size,
                    "hisparse_matrix: node_size " + std::to_string(o.node_size) +
                        " is not a power of two from 2 to 256");
    return log_d;
  }

  hisparse_matrix(detail::hisparse::triplets<T> t, int log_d, ::h2expr::context_ptr<Space> ctx) {
    detail::require(ctx != nullptr, "hisparse_matrix: no context");
    detail::hisparse::canonicalize(t, log_d);
    for (T v : t.val)  // duplicates summed may overflow
      detail::require<non_finite_value>(std::isfinite(v), "hisparse_matrix: duplicate entries sum to infinity");
    const bool symmetric = t.rows == t.cols && is_symmetric(t, log_d);
    detail::hisparse::built b;
    try {
      b = detail::hisparse::build(t, log_d);
    } catch (const std::length_error& e) {
      throw error(std::string("hisparse_matrix: ") + e.what());
    }
    auto s = std::make_shared<state>();
    s->ctx = ctx;
    s->g = b.g;
    s->nnz = index(t.val.size());
    s->symmetric = symmetric;
    s->pool = detail::buffer<unsigned char, Space>(ctx, b.pool);
    if constexpr (!std::is_same_v<Space, host>) {
      std::vector<detail::hisparse::chunk> coo, dense;
      detail::hisparse::make_queues(b.g, b.pool.data(), coo, dense);
      s->coo = detail::buffer<detail::hisparse::chunk, Space>(ctx, coo);
      s->dense = detail::buffer<detail::hisparse::chunk, Space>(ctx, dense);
    }
    s_ = std::move(s);
  }

  static bool is_symmetric(const detail::hisparse::triplets<T>& t, int log_d) {
    detail::hisparse::triplets<T> u;
    u.rows = t.cols;
    u.cols = t.rows;
    u.row = t.col;
    u.col = t.row;
    u.val = t.val;
    detail::hisparse::canonicalize(u, log_d);
    return u.row == t.row && u.col == t.col && u.val == t.val;
  }

  // f(the pool in host memory): the nodes themselves on the host space, a copy from the device otherwise.
  template <class F>
  void with_host_pool(F&& f) const {
    if constexpr (detail::space_traits<Space>::host_memory) {
      f(s_->pool.data());
    } else {
      const std::vector<unsigned char> pool = s_->pool.to_host();
      f(pool.data());
    }
  }

  // The entries of this matrix, state applied, in host memory.
  detail::hisparse::triplets<T> entries() const {
    detail::hisparse::triplets<T> t;
    t.rows = rows();
    t.cols = cols();
    t.row.reserve(std::size_t(s_->nnz)), t.col.reserve(std::size_t(s_->nnz)), t.val.reserve(std::size_t(s_->nnz));
    append(t, T(1));
    return t;
  }
  void append(detail::hisparse::triplets<T>& t, T coef) const {
    const T s = coef * scale_;
    const bool tr = transposed_;
    with_host_pool([&](const unsigned char* pool) {
      detail::hisparse::for_each_entry<T>(s_->g, pool, [&](std::int64_t r, std::int64_t c, T v) {
        t.row.push_back(std::uint32_t(tr ? c : r));
        t.col.push_back(std::uint32_t(tr ? r : c));
        t.val.push_back(s * v);
      });
    });
  }

  // The terms of a sum, each with its coefficient and transposition, appended to t; returns the first.
  template <class X>
  static const hisparse_matrix* collect(const X& x, T coef, bool trans, detail::hisparse::triplets<T>& t) {
    if constexpr (std::is_same_v<X, hisparse_matrix>) {
      (trans ? x.transposed() : x).append(t, coef);
      return &x;
    } else if constexpr (requires { x.left; x.right; x.a; x.b; }) {
      const hisparse_matrix* first = collect(x.left, T(coef * x.a), trans, t);
      collect(x.right, T(coef * x.b), trans, t);
      return first;
    } else if constexpr (requires { x.inner; x.s; }) {
      return collect(x.inner, T(coef * x.s), trans, t);
    } else {
      return collect(x.inner, coef, !trans, t);
    }
  }
  template <class E>
  static hisparse_matrix add(const E& sum) {
    detail::hisparse::triplets<T> t;
    t.rows = sum.rows();
    t.cols = sum.cols();
    const hisparse_matrix* first = collect(sum, T(1), false, t);
    return hisparse_matrix(std::move(t), first->s_->g.log_d, first->s_->ctx);
  }

  std::shared_ptr<const state> s_;
  bool transposed_ = false;
  T scale_ = T(1);
};

}  // namespace h2expr

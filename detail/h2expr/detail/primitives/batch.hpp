#pragma once
// batch<T, Space>: the one description of batched work on matrices. Item i is a rows(i) x cols(i)
// column-major matrix at pointer(i) with leading dimension ld(i), in the space's memory (T may be
// const for the inputs of a product). A batch is described on the host, item by item or at a fixed
// stride; the arrays the variable-size primitives take (pointers, rows, cols, leading dimensions) go
// to the space in one upload the first time a primitive needs them, and are freed in stream order
// with the batch, so nothing waits for the space to release them.
//
// The operations below (gemm, copy, qr, svd, trsm, potrf, fill_random over batches) pick the kernel
// themselves: one strided call when every item shares its shape and the items lie at a fixed stride,
// a fixed-size call over pointer arrays when they share their shape only, else a variable-size one.
// The batches of one call go to the space together, in one transfer (upload_together).
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr::detail {

// Room in the space for the arrays of one call's batches, in memory the call holds while it uses them
// (a part of its workspace, workspace.hpp): batches that keep their arrays here (keep_arrays_in)
// allocate nothing when a primitive needs them. The call may stage arrays of its own too (the sizes of
// its block-sparse products, say): they go to the space with the next batches' arrays, in the same
// transfer (on the GPU each upload waits for the stream), or when the call sends them itself. The call
// plans the room (batch<>::array_bytes_of per batch that may need its arrays, staged_bytes for its
// own); running past it is an error in h2expr, not in the input.
template <class Space>
class batch_array_room {
 public:
  batch_array_room(std::byte* at, std::size_t bytes) : at_(at), size_(bytes) {}
  template <class U>
  static constexpr std::size_t staged_bytes(std::size_t count) { return (count * sizeof(U) + 15) / 16 * 16; }
  // Where values will be in the space once the room is sent (a multiple of 16 bytes taken, so that
  // parts can follow one another).
  template <class U>
  U* stage(const U* values, std::size_t count) {
    return reinterpret_cast<U*>(stage_packed(count * sizeof(U), [&](std::byte* to) {
      if (count > 0) std::memcpy(to, values, count * sizeof(U));
    }));
  }
  // The same for `bytes` that pack(to) writes straight into the staging (on the host: the room itself).
  template <class Pack>
  std::byte* stage_packed(std::size_t bytes, Pack&& pack) {
    const std::size_t taken = staged_bytes<std::byte>(bytes);
    require(taken <= size_ - used_, "batch arrays: the call planned too little room (a bug in h2expr)");
    std::byte* to = at_ + used_;
    used_ += taken;
    if constexpr (space_traits<Space>::host_memory) {  // the room is host memory: packed in place, nothing to send
      pack(to);
      return to;
    }
    const std::size_t at = pending_.size();
    pending_.resize(at + taken);
    pack(pending_.data() + at);
    return to;
  }
  // What is staged, to the space in one transfer (nothing when nothing is; on the host, always nothing).
  void send(context<Space>& ctx) {
    if (pending_.empty()) return;
    upload_2d(ctx, pending_.size(), 1, pending_.data(), pending_.size(), at_ + used_ - pending_.size(), pending_.size());
    pending_.clear();
  }
  std::size_t used() const { return used_; }

 private:
  std::byte* at_;
  std::size_t size_, used_ = 0;
  std::vector<std::byte> pending_;  // the last pending_.size() bytes taken, not sent yet
};

template <class T, class Space>
class batch {
 public:
  using value_type = std::remove_const_t<T>;
  // The arrays of the variable-size primitives, in the space.
  struct arrays {
    T* const* pointers;
    const int* rows;
    const int* cols;
    const int* ld;
  };

  explicit batch(context_ptr<Space> ctx) : ctx_(std::move(ctx)) {}
  // count items of rows x cols at base + i stride, leading dimension ld.
  batch(context_ptr<Space> ctx, T* base, std::int64_t stride, int count, int rows, int cols, int ld)
      : batch(std::move(ctx)) {
    reserve(count);
    for (int i = 0; i < count; ++i) add(base + i * stride, rows, cols, ld);
  }

  void reserve(int count) {
    p_.reserve(std::size_t(count)), rows_.reserve(std::size_t(count)), cols_.reserve(std::size_t(count));
    ld_.reserve(std::size_t(count));
  }
  batch& add(T* p, int rows, int cols, int ld) {
    require(rows >= 0 && cols >= 0 && ld >= rows, "batch: an item with a negative size or ld < rows");
    p_.push_back(p), rows_.push_back(rows), cols_.push_back(cols), ld_.push_back(ld);
    max_rows_ = std::max(max_rows_, rows), max_cols_ = std::max(max_cols_, cols);
    uploaded_ = false;
    return *this;
  }

  int count() const { return int(p_.size()); }
  bool empty() const { return p_.empty(); }
  T* pointer(int i) const { return p_[std::size_t(i)]; }
  int rows(int i) const { return rows_[std::size_t(i)]; }
  int cols(int i) const { return cols_[std::size_t(i)]; }
  int ld(int i) const { return ld_[std::size_t(i)]; }
  int max_rows() const { return max_rows_; }
  int max_cols() const { return max_cols_; }
  context<Space>& ctx() const { return *ctx_; }
  const ::h2expr::context_ptr<Space>& shared_ctx() const { return ctx_; }

  // Every item rows(0) x cols(0) with leading dimension ld(0).
  bool uniform() const {
    for (int i = 1; i < count(); ++i)
      if (rows_[i] != rows_[0] || cols_[i] != cols_[0] || ld_[i] != ld_[0]) return false;
    return true;
  }
  // The elements from one item to the next when they lie at a fixed stride, else nothing. Only a
  // non-negative one counts: strided-batched BLAS (cuBLAS) documents no other.
  std::optional<std::int64_t> stride() const {
    if (count() < 2) return std::int64_t(0);
    // Addresses as integers: the items need not lie in one allocation.
    auto at = [this](int i) { return std::int64_t(reinterpret_cast<std::uintptr_t>(p_[std::size_t(i)])); };
    const std::int64_t bytes = at(1) - at(0);
    if (bytes < 0 || bytes % std::int64_t(sizeof(T)) != 0) return std::nullopt;
    for (int i = 2; i < count(); ++i)
      if (at(i) - at(i - 1) != bytes) return std::nullopt;
    return bytes / std::int64_t(sizeof(T));
  }

  // The arrays in the space: uploaded on first use after the last add().
  const arrays& in_space() const {
    if (!uploaded_) upload_alone();
    return arrays_;
  }
  // The pointer arrays as the primitives' const inputs take them.
  const value_type* const* inputs() const { return (const value_type* const*)in_space().pointers; }

  // For upload_together: whether the arrays are in the space, their bytes (pointers, then rows, cols
  // and ld; a multiple of 16, so that parts can follow one another), packing them on the host, and
  // taking them from a shared upload at an offset.
  bool uploaded() const { return uploaded_; }
  static constexpr std::size_t array_bytes_of(std::size_t items) { return (items * (sizeof(T*) + 3 * sizeof(int)) + 15) / 16 * 16; }
  std::size_t array_bytes() const { return array_bytes_of(p_.size()); }
  // Keep the arrays in the call's room instead of an allocation of their own (the room outlives the batch's use).
  batch& keep_arrays_in(batch_array_room<Space>& room) {
    room_ = &room;
    return *this;
  }
  batch_array_room<Space>* room() const { return room_; }
  void pack_arrays(std::byte* at) const {
    const std::size_t n = p_.size(), pointer_bytes = n * sizeof(T*), int_bytes = n * sizeof(int);
    if (n == 0) return;
    std::memcpy(at, p_.data(), pointer_bytes);
    std::memcpy(at + pointer_bytes, rows_.data(), int_bytes);
    std::memcpy(at + pointer_bytes + int_bytes, cols_.data(), int_bytes);
    std::memcpy(at + pointer_bytes + 2 * int_bytes, ld_.data(), int_bytes);
  }
  // base: the arrays in the space; owner: what keeps them there (null in a room).
  void adopt_arrays(const std::byte* base, std::shared_ptr<const void> owner) const {
    const std::size_t n = p_.size();
    const int* ints = reinterpret_cast<const int*>(base + n * sizeof(T*));
    arrays_ = {reinterpret_cast<T* const*>(base), ints, ints + n, ints + 2 * n};
    arrays_space_ = std::move(owner);
    uploaded_ = true;
  }

 private:
  void upload_alone() const { upload_together(*this); }

  ::h2expr::context_ptr<Space> ctx_;
  std::vector<T*> p_;
  std::vector<int> rows_, cols_, ld_;
  int max_rows_ = 0, max_cols_ = 0;
  batch_array_room<Space>* room_ = nullptr;
  mutable std::shared_ptr<const void> arrays_space_;  // shared by batches uploaded together
  mutable arrays arrays_{};
  mutable bool uploaded_ = false;
};

namespace batch_detail {
// The arrays of the batches that visit(f) hands to f, those not in the space yet, in one transfer: into
// the room one of them keeps its arrays in, else into one allocation they share.
template <class Space, class Visit>
void upload_arrays(const context_ptr<Space>& ctx, Visit&& visit) {
  std::vector<char> need;  // per visit, fixed before any batch adopts (a batch may be visited twice)
  std::size_t bytes = 0;
  batch_array_room<Space>* room = nullptr;
  visit([&](const auto& b) {
    need.push_back(!b.uploaded());
    if (!need.back()) return;
    bytes += b.array_bytes();
    if (!room) room = b.room();
  });
  if (bytes == 0) return;
  auto pack = [&](std::byte* to) {
    std::size_t at = 0, i = 0;
    visit([&](const auto& b) {
      if (need[i++]) b.pack_arrays(to + at), at += b.array_bytes();
    });
  };
  std::shared_ptr<const buffer<std::byte, Space>> space;
  const std::byte* base = nullptr;
  if (room) {  // packed straight into the room's staging, which goes up with what the call staged before
    base = room->stage_packed(bytes, pack);
    room->send(*ctx);
  } else {
    std::vector<std::byte> packed(bytes);
    pack(packed.data());
    space = std::make_shared<const buffer<std::byte, Space>>(ctx, packed);
    base = space->data();
  }
  std::size_t at = 0, i = 0;
  visit([&](const auto& b) {
    if (need[i++]) b.adopt_arrays(base + at, space), at += b.array_bytes();
  });
}
}  // namespace batch_detail

// The arrays of several batches (of one space) that are not in it yet, in one allocation (or in the
// room one of them keeps them in) and one transfer: on the GPU each upload from pageable memory waits
// for the stream, so a call over three variable-size batches would wait three times. A batch may be
// named twice.
template <class T0, class Space, class... Rest>
void upload_together(const batch<T0, Space>& first, const Rest&... rest) {
  batch_detail::upload_arrays(first.shared_ctx(), [&](auto&& f) { f(first), (f(rest), ...); });
}
// The same for the batches of several calls made first (inputs and outputs), so that a sequence of
// variable-size calls waits once.
template <class T, class Space>
void upload_together(const context_ptr<Space>& ctx, const std::vector<const batch<const T, Space>*>& in,
                     const std::vector<const batch<T, Space>*>& out) {
  batch_detail::upload_arrays(ctx, [&](auto&& f) {
    for (const auto* b : in) f(*b);
    for (const auto* b : out) f(*b);
  });
}

namespace batch_detail {
template <class TA, class TB, class Space>
void same_count(const batch<TA, Space>& a, const batch<TB, Space>& b, const char* what) {
  require<dimension_mismatch>(a.count() == b.count(), std::string(what) + ": batches of different lengths");
}
}  // namespace batch_detail

// C_i = alpha op(A_i) op(B_i) + beta C_i: C_i's shape is the product's (m x n), op(A_i) m x k.
template <class TA, class TB, class T, class Space>
  requires std::is_same_v<std::remove_const_t<TA>, T> && std::is_same_v<std::remove_const_t<TB>, T>
void gemm(op ta, op tb, T alpha, const batch<TA, Space>& A, const batch<TB, Space>& B, T beta,
          const batch<T, Space>& C) {
  batch_detail::same_count(A, C, "gemm"), batch_detail::same_count(B, C, "gemm");
  const int count = C.count();
  if (count == 0) return;
  auto& c = C.ctx();
  const bool at = ta != op::none;
  if (A.uniform() && B.uniform() && C.uniform()) {
    const int m = C.rows(0), n = C.cols(0), k = at ? A.rows(0) : A.cols(0);
    const auto sa = A.stride(), sb = B.stride(), sc = C.stride();
    if (sa && sb && sc) {
      gemm_strided_batched(c, ta, tb, m, n, k, alpha, A.pointer(0), A.ld(0), *sa, B.pointer(0), B.ld(0), *sb, beta,
                           C.pointer(0), C.ld(0), *sc, count);
      return;
    }
    upload_together(A, B, C);
    gemm_batched(c, ta, tb, m, n, k, alpha, A.inputs(), A.ld(0), B.inputs(), B.ld(0), beta, C.in_space().pointers,
                 C.ld(0), count);
    return;
  }
  upload_together(A, B, C);
  const auto& a = A.in_space();
  const auto& cc = C.in_space();
  gemm_vbatched(c, ta, tb, cc.rows, cc.cols, at ? a.rows : a.cols, alpha, A.inputs(), a.ld, B.inputs(),
                B.in_space().ld, beta, cc.pointers, cc.ld, count, C.max_rows(), C.max_cols(),
                at ? A.max_rows() : A.max_cols());
}

// Every item set to zero: a gemm with alpha = beta = 0 writes C without reading A or B (BLAS
// semantics, on both spaces); A is the items with no columns, so k = 0.
template <class T, class Space>
void zero(const batch<T, Space>& C) {
  batch<T, Space> none(C.shared_ctx());
  none.reserve(C.count());
  for (int i = 0; i < C.count(); ++i) none.add(C.pointer(i), C.rows(i), 0, C.ld(i));
  gemm(op::none, op::none, T(0), none, C, T(0), C);
}

// dst_i = op(src_i), dst_i's shape (src_i: its transpose when trans).
template <class TS, class T, class Space>
  requires std::is_same_v<std::remove_const_t<TS>, T>
void copy(const batch<TS, Space>& src, const batch<T, Space>& dst, op trans = op::none) {
  batch_detail::same_count(src, dst, "copy");
  if (dst.empty()) return;
  upload_together(src, dst);
  if (trans == op::none && src.uniform() && dst.uniform()) {
    copy_batched(dst.ctx(), dst.rows(0), dst.cols(0), src.inputs(), src.ld(0), dst.in_space().pointers, dst.ld(0),
                 dst.count());
    return;
  }
  const auto& d = dst.in_space();
  copy_vbatched(dst.ctx(), trans, d.rows, d.cols, src.inputs(), src.in_space().ld, d.pointers, d.ld, dst.count());
}

// Thin QRs in place: A_i := Q_i (m_i x n_i), R_i (its first min(m_i, n_i) rows) upper trapezoidal.
// Without form_q only R is computed and A_i is left unspecified.
template <class T, class Space>
void qr(const batch<T, Space>& A, const batch<T, Space>* R = nullptr, bool form_q = true) {
  if (A.empty()) return;
  if (R) batch_detail::same_count(A, *R, "qr"), upload_together(A, *R);
  const auto& a = A.in_space();
  T* const* rp = R ? R->in_space().pointers : nullptr;
  const int* rld = R ? R->in_space().ld : nullptr;
  if (form_q)
    qr_vbatched(A.ctx(), a.rows, a.cols, a.pointers, a.ld, rp, rld, A.count(), A.max_rows(), A.max_cols());
  else
    qr_r_vbatched(A.ctx(), a.rows, a.cols, a.pointers, a.ld, rp, rld, A.count(), A.max_rows(), A.max_cols());
}

namespace batch_detail {
// The space's SVD on the items as they are (svd() below).
template <class T, class Space>
void svd_direct(const batch<T, Space>& A, const batch<T, Space>& S, const batch<T, Space>* V) {
  V ? upload_together(A, S, *V) : upload_together(A, S);
  const auto& a = A.in_space();
  svd_vbatched(A.ctx(), a.rows, a.cols, a.pointers, a.ld, S.in_space().pointers, V ? V->in_space().pointers : nullptr,
               V ? V->in_space().ld : nullptr, A.count(), A.max_rows(), A.max_cols());
}
// Whether svd() goes through svd_after_qr: where the backend asks for it (svd_after_qr_pays, batched.hpp)
// and some item is large enough for the QR to pay for its launches.
template <class T, class Space>
bool svd_goes_after_qr(const batch<T, Space>& A) {
  if constexpr (!svd_after_qr_pays<Space>) {
    return false;
  } else {
    for (int i = 0; i < A.count(); ++i)
      if (std::min(A.rows(i), A.cols(i)) >= 16) return true;
    return false;
  }
}
}  // namespace batch_detail

// svd() through a QR of each item: B = A (m >= n) or A^T (m < n, copied), B = Q R, and the space's SVD
// of the square R^T = U_t S V_t^T, so that B = (Q V_t) S U_t^T. The same results as svd() (up to
// rounding and the signs of singular vector pairs). The CUDA backend's one-sided Jacobi converges in
// about 8 sweeps over the n rows of R^T instead of about 20 over the m rows of A (svd_after_qr_pays).
template <class T, class Space>
void svd_after_qr(const batch<T, Space>& A, const batch<T, Space>& S, const batch<T, Space>* V = nullptr) {
  batch_detail::same_count(A, S, "svd"), V ? batch_detail::same_count(A, *V, "svd") : void();
  if (A.empty()) return;
  const auto& ctx = A.shared_ctx();
  // Per item (p = min(m, n) > 0 only): R, R^T and V_t (p x p each), then B (m < n) or G = Q V_t (m >= n), q x p.
  std::vector<std::int64_t> at;
  std::int64_t total = 0;
  for (int i = 0; i < A.count(); ++i) {
    const std::int64_t p = std::min(A.rows(i), A.cols(i)), q = std::max(A.rows(i), A.cols(i));
    at.push_back(total);
    total += p > 0 ? 3 * p * p + q * p : 0;
  }
  buffer<T, Space> work(ctx, std::size_t(total));
  fill(*ctx, work.data(), work.size(), T(0));  // R's strict lower triangle: qr() writes the upper one
  batch<T, Space> b(ctx), r(ctx), rt(ctx), vt(ctx), s(ctx);  // every item with p > 0
  batch<const T, Space> wide_a(ctx);                         // m < n: A, copied transposed into B ...
  batch<T, Space> wide_b(ctx), wide_q(ctx), wide_vt(ctx), wide_rt(ctx), wide_u(ctx), wide_v(ctx);  // ... and its results
  batch<T, Space> tall_q(ctx), tall_vt(ctx), tall_g(ctx), tall_u(ctx), tall_rt(ctx), tall_v(ctx);
  for (int i = 0; i < A.count(); ++i) {
    const int m = A.rows(i), n = A.cols(i), p = std::min(m, n), q = std::max(m, n);
    if (p == 0) continue;
    const std::int64_t pp = std::int64_t(p) * p;
    T* const R = work.data() + at[std::size_t(i)];
    T *const Rt = R + pp, *const Vt = Rt + pp, *const X = Vt + pp;  // X: B (m < n) or G (m >= n)
    T* const B = m >= n ? A.pointer(i) : X;
    const int ldb = m >= n ? A.ld(i) : q;
    b.add(B, q, p, ldb), r.add(R, p, p, p), rt.add(Rt, p, p, p), vt.add(Vt, p, p, p);
    s.add(S.pointer(i), p, 1, S.ld(i));
    if (m >= n) {  // A := Q V_t (through G), V := U_t
      tall_q.add(B, q, p, ldb), tall_vt.add(Vt, p, p, p), tall_g.add(X, q, p, q), tall_u.add(A.pointer(i), q, p, A.ld(i));
      if (V) tall_rt.add(Rt, p, p, p), tall_v.add(V->pointer(i), p, p, V->ld(i));
    } else {       // A := U_t (its first m columns), V := Q V_t
      wide_a.add(A.pointer(i), m, n, A.ld(i)), wide_b.add(B, q, p, ldb);
      wide_rt.add(Rt, p, p, p), wide_u.add(A.pointer(i), p, p, A.ld(i));
      if (V) wide_q.add(B, q, p, ldb), wide_vt.add(Vt, p, p, p), wide_v.add(V->pointer(i), q, p, V->ld(i));
    }
  }
  if (b.empty()) return;
  copy(wide_a, wide_b, op::transpose);
  qr(b, &r);
  copy(r, rt, op::transpose);
  batch_detail::svd_direct(rt, s, &vt);  // R^T = U_t S V_t^T, U_t in place
  gemm(op::none, op::none, T(1), tall_q, tall_vt, T(0), tall_g);
  copy(tall_g, tall_u);
  if (V) copy(tall_rt, tall_v);
  copy(wide_rt, wide_u);
  if (V) gemm(op::none, op::none, T(1), wide_q, wide_vt, T(0), wide_v);
}

// Thin SVDs A_i = U_i S_i V_i^T: U_i into A_i, the singular values into S_i (a column each), V_i
// (n_i x n_i) into V_i when V is given. Right: S_i and V_i only, exact for the values above
// `resolve` (svd_right_vbatched).
template <class T, class Space>
void svd(const batch<T, Space>& A, const batch<T, Space>& S, const batch<T, Space>* V = nullptr) {
  batch_detail::same_count(A, S, "svd");
  if (A.empty()) return;
  if (batch_detail::svd_goes_after_qr(A)) return svd_after_qr(A, S, V);
  batch_detail::svd_direct(A, S, V);
}
template <class T, class Space>
void svd_right(const batch<T, Space>& A, const batch<T, Space>& S, const batch<T, Space>& V, double resolve) {
  batch_detail::same_count(A, S, "svd_right"), batch_detail::same_count(A, V, "svd_right");
  if (A.empty()) return;
  // Where the space's svd_right is its full SVD (the CUDA backend's), the same QR first.
  if (batch_detail::svd_goes_after_qr(A)) return svd_after_qr(A, S, &V);
  upload_together(A, S, V);
  const auto& a = A.in_space();
  svd_right_vbatched(A.ctx(), a.rows, a.cols, a.pointers, a.ld, S.in_space().pointers, V.in_space().pointers,
                     V.in_space().ld, A.count(), A.max_rows(), A.max_cols(), resolve);
}

// B_i := alpha op(A_i)^{-1} B_i (side::left) or alpha B_i op(A_i)^{-1}, A_i triangular.
template <class TA, class T, class Space>
  requires std::is_same_v<std::remove_const_t<TA>, T>
void trsm(side sd, uplo ul, op ta, diag dg, T alpha, const batch<TA, Space>& A, const batch<T, Space>& B) {
  batch_detail::same_count(A, B, "trsm");
  if (B.empty()) return;
  upload_together(A, B);
  const auto& b = B.in_space();
  trsm_vbatched(B.ctx(), sd, ul, ta, dg, b.rows, b.cols, alpha, A.inputs(), A.in_space().ld, b.pointers, b.ld,
                B.count(), B.max_rows(), B.max_cols());
}

// Lower Cholesky factors in place (square items). Returns the first item whose factorization failed,
// or -1 (reading the result waits for the space).
template <class T, class Space>
int potrf(const batch<T, Space>& A) {
  if (A.empty()) return -1;
  const auto& a = A.in_space();
  buffer<int, Space> info(A.shared_ctx(), std::size_t(A.count()));
  potrf_vbatched(A.ctx(), a.rows, a.pointers, a.ld, info.data(), A.count(), A.max_rows());
  const auto h = info.to_host();
  for (int i = 0; i < A.count(); ++i)
    if (h[std::size_t(i)] != 0) return i;
  return -1;
}

// Every item filled with random numbers, reproducibly from the seed.
template <class T, class Space>
void fill_random(distribution d, const batch<T, Space>& A, std::uint64_t seed) {
  if (A.empty()) return;
  const auto& a = A.in_space();
  fill_random_vbatched(A.ctx(), d, a.rows, a.cols, a.pointers, a.ld, seed, A.count(), A.max_rows(), A.max_cols());
}

}  // namespace h2expr::detail

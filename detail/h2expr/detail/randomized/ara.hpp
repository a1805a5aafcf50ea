#pragma once
// The adaptive randomized range finder of batched ARA (Algorithm 2.3 of the HARA paper), written
// once for both spaces. Each round asks the caller for s_i fresh samples Y_i = M_i Omega_i of every
// item still running and orthogonalizes them against the basis Q_i by block Gram-Schmidt with one
// re-orthogonalization, each pass a mixed-precision Cholesky QR (Gram matrix and factor in double).
//
// Where we depart from the paper, and why:
//  - Convergence is judged on ||(I - Q Q^T) y_j||, each sample's residual against the basis before
//    its round (the diagonal of the pass-1 Gram matrix, accurate to rounding), not on the diagonal
//    of R. R's late pivots lose all accuracy once a block spans more than ~1/sqrt(eps) of dynamic
//    range (a decaying spectrum does, in one block of 32), so the paper's test can stop an item early.
//    An item stops when r consecutive samples are below tol ||M||_F / (10 sqrt(2/pi)) (the bound of
//    Halko et al.), which, with Q only growing, holds for the final basis.
//  - A round appends its samples up to the last one whose in-block residual (diag R) is above that
//    threshold: trailing noise columns are not kept, and dependent ones are dropped by the factor. A
//    round that ended on small residuals is likely the last: the next one takes only r samples.
// Converged items leave the batch, so they cost nothing while the others go on. The host plans
// each round from a few numbers per item: one small download per round, which the loop needs anyway.
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/primitives/batch.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail {

struct ara_parameters {
  double tol = 1e-6;
  int block_size = 32;
  int converge_samples = 10;
};

// Per item: what the range finder has found so far.
struct ara_item_state {
  int rows = 0, full = 0;  // full = min(rows, cols): once Q has that many columns it spans everything
  int limit = 0;           // the item stops, unconverged, when Q reaches this many columns
  int storage = 0;         // columns of Q's storage (a round writes its samples behind the columns)
  int columns = 0;         // columns of Q so far
  int samples = 0;         // random samples taken
  int run = 0;             // consecutive samples with a residual below the threshold
  int next_samples = 0;    // samples the next round takes
  int rounds = 0, round_limit = 0;
  double threshold = -1;   // set from the first round's sample norms
  bool converged = false;
  bool checking = false;   // the next round only confirms convergence
  bool active() const { return !converged && columns < limit && rounds < round_limit; }
};

// One round's request to the caller: for each p, samples[p] fresh samples of item items[p], to be
// written as a rows[p] x samples[p] block at outputs[p] (leading dimension ld[p], space memory).
template <class T>
struct ara_round {
  std::uint64_t seed = 0;
  std::vector<int> items, rows, samples, ld;
  std::vector<T*> outputs;
};

template <class T, class Space>
class range_finder {
 public:
  // rows[i]; full[i] = min(rows_i, cols_i); limit[i] <= full[i]: the most columns item i's Q may take
  // before it is reported unconverged.
  range_finder(context_ptr<Space> ctx, const std::vector<int>& rows, const std::vector<int>& full,
               const std::vector<int>& limit, ara_parameters p)
      : ctx_(std::move(ctx)), p_(p), state_(rows.size()), q_offset_(rows.size()), y_offset_(rows.size()),
        z_offset_(rows.size()) {
    std::size_t q = 0, y = 0, z = 0;
    const int bs = p_.block_size, r = p_.converge_samples;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      auto& s = state_[i];
      s.rows = rows[i], s.full = full[i], s.limit = limit[i];
      s.storage = s.limit + std::max(bs, r);  // a round writes all its samples behind the columns
      s.converged = s.full == 0;  // an empty operator is represented exactly by nothing
      s.next_samples = bs;
      // Every productive round adds a column; a few unproductive ones (samples whose news is lost
      // in the in-block projection) are allowed before the item gives up, so the loop always ends.
      s.round_limit = s.limit + 8;
      q_offset_[i] = q, y_offset_[i] = y, z_offset_[i] = z;
      q += std::size_t(s.rows) * std::size_t(s.storage);
      y += std::size_t(s.rows) * std::size_t(bs);
      z += std::size_t(s.storage) * std::size_t(bs);
    }
    Q_ = buffer<T, Space>(ctx_, q);
    Y_ = buffer<T, Space>(ctx_, y);
    Yt_ = buffer<T, Space>(ctx_, y);
    Z_ = buffer<T, Space>(ctx_, z);
    const std::size_t n = rows.size(), b = std::size_t(bs);
    G_ = buffer<double, Space>(ctx_, n * b * b);
    W_ = buffer<T, Space>(ctx_, n * b * b);
    diagonals_ = buffer<double, Space>(ctx_, 3 * n * b);  // [diag R pass 1 | diag R pass 2 | sample norms]
    info_ = buffer<int, Space>(ctx_, 2 * n);
  }

  int size() const { return int(state_.size()); }
  const ara_item_state& state(int i) const { return state_[std::size_t(i)]; }
  int rounds() const { return rounds_; }
  // Q_i: rows_i x columns_i, orthonormal columns.
  T* basis(int i) { return Q_.data() + q_offset_[std::size_t(i)]; }
  int ld(int i) const { return std::max(state_[std::size_t(i)].rows, 1); }

  // Runs rounds until every item has converged or reached its limit; sample(const ara_round<T>&)
  // writes the requested samples.
  template <class Sample>
  void run(Sample&& sample, std::uint64_t seed) {
    // A column whose in-block residual is below drop times its norm is dropped from the round. The
    // Gram matrix resolves residuals down to ~sqrt(eps_double), and the second pass restores
    // orthogonality only while the first lost less than O(1): a round thus spans at most 1/drop of
    // dynamic range. What it drops is not lost: the next round's residual check sees it.
    const double drop = std::max(4 * std::sqrt(std::numeric_limits<double>::epsilon()),
                                 64 * double(std::numeric_limits<T>::epsilon()));
    const int bs = p_.block_size, r = p_.converge_samples;
    int max_rounds = 1;
    for (auto& s : state_) max_rounds = std::max(max_rounds, s.round_limit + 1);
    for (int round = 0; round < max_rounds; ++round) {
      ara_round<T> req;
      req.seed = splitmix64(seed + 0x632be59bd9b4e019ull * std::uint64_t(round + 1));
      // Per running item p: Q (rows x columns), the samples Y, their first pass Yt and the new columns
      // behind Q (rows x s), Z = Q^T Y (columns x s), the Gram matrix G and factor W (s x s), and the
      // diagonals of the two passes and the sample norms (s each; diagonals_ holds them in thirds).
      batch<T, Space> q(ctx_), y(ctx_), yt(ctx_), qnew(ctx_), z(ctx_), w(ctx_);
      batch<double, Space> g(ctx_), d1(ctx_), d2(ctx_), nrm(ctx_);
      const std::size_t part = state_.size() * std::size_t(bs);
      for (int i = 0; i < size(); ++i) {
        auto& s = state_[std::size_t(i)];
        if (!s.active()) continue;
        const int p = int(req.items.size());
        const int want = std::min({s.next_samples, bs, s.storage - s.columns}), m = s.rows, ldq = ld(i);
        T* qi = basis(i);
        T* yi = Y_.data() + y_offset_[std::size_t(i)];
        req.items.push_back(i), req.rows.push_back(m), req.samples.push_back(want), req.ld.push_back(ldq);
        req.outputs.push_back(yi);
        q.add(qi, m, s.columns, ldq), qnew.add(qi + std::size_t(s.columns) * std::size_t(ldq), m, want, ldq);
        y.add(yi, m, want, ldq), yt.add(Yt_.data() + y_offset_[std::size_t(i)], m, want, ldq);
        z.add(Z_.data() + z_offset_[std::size_t(i)], s.columns, want, std::max(s.storage, 1));
        g.add(G_.data() + std::size_t(p) * bs * bs, want, want, bs), w.add(W_.data() + std::size_t(p) * bs * bs, want, want, bs);
        double* di = diagonals_.data() + std::size_t(p) * bs;
        d1.add(di, want, 1, bs), d2.add(di + part, want, 1, bs), nrm.add(di + 2 * part, want, 1, bs);
      }
      const int count = int(req.items.size());
      if (count == 0) return;
      ++rounds_;
      sample(std::as_const(req));

      auto& c = *ctx_;
      upload_together(q, y, yt, qnew, z, w, g, d1, d2, nrm);  // the round's arrays in one transfer
      // Block Gram-Schmidt, twice: Y -= Q (Q^T Y), then Y := Y R^{-1} from the Cholesky of Y^T Y.
      auto pass = [&](const batch<T, Space>& in, const batch<T, Space>& out, const batch<double, Space>& d,
                      const batch<double, Space>* norms, int* info) {
        gemm(op::transpose, op::none, T(1), q, in, T(0), z);
        gemm(op::none, op::none, T(-1), q, z, T(1), in);
        const auto &a = in.in_space(), &gs = g.in_space();
        gram_vbatched<T>(c, a.rows, a.cols, in.inputs(), a.ld, gs.pointers, gs.ld, count, in.max_rows(), in.max_cols());
        cholqr_factor_vbatched<T>(c, gs.rows, g.inputs(), gs.ld, w.in_space().pointers, w.in_space().ld,
                                  d.in_space().pointers, norms ? norms->in_space().pointers : nullptr, drop, info,
                                  count, g.max_rows());
        gemm(op::none, op::none, T(1), in, w, T(0), out);
      };
      pass(y, yt, d1, &nrm, info_.data());
      pass(yt, qnew, d2, nullptr, info_.data() + count);

      const std::size_t n_diag = std::size_t(count) * std::size_t(bs);
      std::vector<double> diag(3 * n_diag);  // the three parts' leading n_diag entries, in one transfer
      std::vector<int> info(2 * std::size_t(count));
      download_2d(c, n_diag, 3, diagonals_.data(), state_.size() * std::size_t(bs), diag.data(), n_diag);
      download_2d(c, info.size(), 1, info_.data(), info.size(), info.data(), info.size());
      const double *h1 = diag.data(), *h2 = h1 + n_diag, *hn = h1 + 2 * n_diag;
      for (int p = 0; p < count; ++p) {
        auto& s = state_[std::size_t(req.items[std::size_t(p)])];
        require<non_finite_value>(info[std::size_t(p)] == 0 && info[std::size_t(count + p)] == 0,
                                  "batched_ara: the samples of item " + std::to_string(req.items[std::size_t(p)]) +
                                      " are not finite");
        const int sp = req.samples[std::size_t(p)];
        const double* residual = hn + std::size_t(p) * bs;  // ||(I - Q Q^T) y_j||, sample order
        const double* pivot1 = h1 + std::size_t(p) * bs;    // diag R of pass 1, kept columns first
        const double* pivot2 = h2 + std::size_t(p) * bs;
        if (s.threshold < 0) {  // ||M||_F^2 ~ mean ||M w||^2 over the first samples (Q was empty)
          double sum = 0;
          for (int k = 0; k < sp; ++k) sum += residual[k] * residual[k];
          s.threshold = p_.tol * std::sqrt(sum / sp) / (10 * std::sqrt(2 / std::numbers::pi));
        }
        for (int k = 0; k < sp; ++k) s.run = residual[k] <= s.threshold ? s.run + 1 : 0;
        // Append the new columns up to the last in-block residual above a quarter of the threshold,
        // so that the directions left out weigh too little, together, to fail the next check; and
        // only while pass 2 kept at least half of each column: a column that pass 1 left mostly in
        // the span of the others is orthogonal only to eps / d2 after pass 2 (the next round's
        // residual check recovers what it carried).
        int append = 0, sound = 0;
        while (sound < sp && pivot2[sound] >= 0.5) ++sound;
        for (int k = 0; k < sp; ++k)
          if (pivot1[k] > s.threshold / 4) append = k + 1;
        append = std::min({append, sound, s.full - s.columns});  // rounding noise cannot add a dimension
        s.columns += append;
        s.samples += sp;
        ++s.rounds;
        s.converged = s.run >= r || s.columns >= s.full;
        // Small trailing residuals: the range is probably captured, so the next round only checks
        // (r samples); after a failed check, a full block again.
        const bool checked = s.checking;
        s.checking = append < sp && !checked;
        s.next_samples = s.checking ? std::max(r - s.run, 1) : bs;
      }
    }
    throw numerical_failure("h2expr: batched_ara: the sampling loop did not terminate (internal error)");
  }

 private:
  context_ptr<Space> ctx_;
  ara_parameters p_;
  std::vector<ara_item_state> state_;
  std::vector<std::size_t> q_offset_, y_offset_, z_offset_;
  buffer<T, Space> Q_, Y_, Yt_, Z_, W_;
  buffer<double, Space> G_, diagonals_;
  buffer<int, Space> info_;
  int rounds_ = 0;
};

}  // namespace h2expr::detail

#pragma once
// The rounds of hara's one-sample-set construction, shared by the builder of one process
// (hara_one_sample_set.hpp) and the distributed one (distributed/hara.hpp): draw s columns of Omega
// (and of Psi for M^T), build the levels from the leaves up and, when a level is short of samples,
// draw more and build again. Levels that an earlier round finished keep their bases and near blocks
// (functions of the samples they saw; new Gaussian columns are independent of them) and only compress
// the new columns for their parents; a finished level's samples are released at once.
//
// The builder (Derived) provides sample(s, round): columns s_ .. s - 1 into the leaves' panels (or,
// streamed_, through the finished levels block by block as drawn: compress_finished); level(l): level
// l's bases and near blocks, 0 or the sample count it asks for; compress_samples(l, c0): level l - 1's
// samples from level l's; root(): as level(), for the top. Level holds a level's
// samples as om, y (Omega's side) and ps, z (Psi's) (the single process's builder draws om and ps of
// its bottom levels through the bases instead).
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/randomized/hara.hpp>
#include <h2expr/detail/randomized/near_field_projection.hpp>
#include <h2expr/detail/structure/cluster_tree.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace h2expr::detail {

// Before hara allocates `adds` bytes for `what`: raises device_out_of_memory where they do not fit in
// what the space has (memory_available), an eighth of them to spare for the phase's other temporaries.
// Past the host's memory the process would be killed touching the pages, not refused the allocation;
// on a GPU the allocation would raise, but only once the work before it is done.
template <class Space>
void check_memory(context<Space>& c, std::size_t adds, const std::string& what) {
  const std::size_t available = memory_available(c);
  if (adds > available - std::min(available, adds / 8))
    throw device_out_of_memory("h2expr: " + what + " need " + number(double(adds) / 1e9) + " GB more, but " +
                               number(double(available) / 1e9) +
                               " GB are available; a looser tolerance takes fewer samples (lower ranks)");
}

// Before a round's sample panels are written: `adds` bytes more for s samples of `rows` rows.
template <class Space>
void check_sample_memory(context<Space>& c, std::size_t adds, int s, std::int64_t rows) {
  check_memory(c, adds, "hara: " + std::to_string(s) + " samples of " + std::to_string(rows) + " rows");
}

// Names the rounds' state inside a builder `Builder<T, Space>` whose levels are `Level<T, Space>`, as
// Eigen's EIGEN_DENSE_PUBLIC_INTERFACE names a base's: the base is a dependent type, so unqualified
// lookup does not find its members otherwise. Used first thing in the builder's class body.
#define H2EXPR_SAMPLE_ROUNDS(Builder, Level)                                                                      \
  using rounds = ::h2expr::detail::sample_rounds<Builder<T, Space>, Level<T, Space>, T, Space>;                  \
  friend rounds;                                                                                                \
  using level_data = Level<T, Space>;                                                                           \
  using clock = typename rounds::clock;                                                                         \
  using rounds::ctx_, rounds::p_, rounds::sym_, rounds::near_, rounds::L_, rounds::m_, rounds::cap_, rounds::leaf_, \
      rounds::s_, rounds::prev_, rounds::done_, rounds::room_, rounds::base_, rounds::omega_, rounds::y_,          \
      rounds::psi_, rounds::z_, rounds::lv_, rounds::level_seconds_, rounds::short_of

template <class Derived, class Level, class T, class Space>
class sample_rounds {
 protected:
  sample_rounds(context_ptr<Space> ctx, hara_parameters p, bool sym, std::vector<near_field> near,
                const cluster_tree& tree, int L, int m)
      : ctx_(std::move(ctx)), p_(p), sym_(sym), near_(std::move(near)), L_(L), m_(std::max(m, 1)),
        cap_(p.max_rank > 0 ? p.max_rank : 512) {
    leaf_.resize(std::size_t(1) << L_);
    for (int t = 0; t < int(leaf_.size()); ++t) leaf_[t] = tree.size(cluster_tree::level_begin(L_) + t);
  }

  // Empty levels and panels, before the first round.
  void start_rounds() {
    lv_.clear();
    lv_.resize(std::size_t(L_) + 1);
    level_seconds_.assign(std::size_t(L_) + 1, 0.0);
    done_ = L_ + 1, s_ = prev_ = room_ = base_ = 0;
    streamed_ = false, streamed_seconds_ = 0;
  }

  // Rounds until every level had samples enough, from what the leaves' near fields need at least;
  // the seconds spent sampling and building are added to the two totals.
  void run_rounds(double& sampling, double& building) {
    int s = m_ + p_.converge_samples + (p_.block_size + 1) / 2;
    for (int a = 0; a < (1 << L_); ++a) {
      int rows = 0;
      for (int e = near_[L_].ptr[a]; e < near_[L_].ptr[a + 1]; ++e) rows += leaf_[near_[L_].col[e]];
      s = std::max(s, samples_needed(rows, p_.converge_samples, p_.block_size));
    }
    for (int round = 0;; ++round) {
      const auto t0 = clock::now();
      const double streamed = streamed_seconds_;
      self().sample(s, round);
      sampling += seconds_since(*ctx_, t0) - (streamed_seconds_ - streamed);
      const auto t1 = clock::now();
      const int need = build();
      building += seconds_since(*ctx_, t1) + (streamed_seconds_ - streamed);
      if (need == 0) break;
      s = std::max(need, s + p_.block_size);
    }
    for (auto* b : {&omega_, &y_, &psi_, &z_}) *b = buffer<T, Space>();  // read no more
  }

  // Columns c0 .. s_ - 1 of a round through the finished levels (done_ .. L_) into the first
  // unfinished one's panels, which make room for `end` columns (the round's): where the builder
  // streams a round's columns as it draws them (streamed_), build() finds them compressed.
  void compress_finished(int c0, int end) {
    for (int l = L_; l >= done_; --l) {
      const auto t0 = clock::now();
      self().compress_samples(l, c0, end);
      const double t = seconds_since(*ctx_, t0);
      level_seconds_[l] += t, streamed_seconds_ += t;
    }
  }

  // How many samples a node whose near field has nin rows is short of (0: it has enough).
  int short_of(int nin) const { return samples_short(s_, nin, p_.converge_samples, p_.block_size); }

  using clock = std::chrono::steady_clock;
  context_ptr<Space> ctx_;
  hara_parameters p_;
  bool sym_;
  std::vector<near_field> near_;
  int L_ = 0, m_ = 1, cap_ = 512;
  std::vector<int> leaf_;                    // the leaves' sizes
  int s_ = 0, prev_ = 0;                     // samples now and before the last round
  int done_ = 1 << 30;                       // levels done_ .. L_ are finished
  int room_ = 0, base_ = 0;                  // columns the leaves' panels have room for; the first they hold
  bool streamed_ = false;                    // the last round's columns went through the finished levels
  double streamed_seconds_ = 0;              // compressing them (compress_finished), not sampling
  buffer<T, Space> omega_, y_, psi_, z_;     // the leaves' panels: np x (s_ - base_), padded tree order
                                             // (the single process's builder holds y_ and z_ alone and
                                             // draws Omega and Psi again where it reads them)
  std::vector<Level> lv_;
  std::vector<double> level_seconds_;        // per level: building it, or compressing its new columns

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  // The bottom-up pass on the current samples: 0 when every level had enough of them, else the
  // sample count the first short level asks for.
  int build() {
    for (int l = L_; l >= 1; --l) {
      const auto t0 = clock::now();
      const int need = l >= done_ ? (streamed_ ? 0 : (self().compress_samples(l, prev_), 0)) : self().level(l);
      level_seconds_[l] += seconds_since(*ctx_, t0);
      if (need) return need;
      done_ = std::min(done_, l);
      release_samples(l);
    }
    return self().root();
  }

  // A finished level's samples are read no more: its parent's compressed samples hold what the levels
  // above need, and a later round brings it new columns alone (compress_samples). Released at once, so
  // that at most two levels' samples are alive (3D, s = 4,024: 8.4 GB of panels over all levels). The
  // root, rebuilt from all columns in every round, keeps its own (one node's).
  void release_samples(int l) {
    if (l == L_) {
      for (auto* b : {&omega_, &y_, &psi_, &z_}) *b = buffer<T, Space>();
      base_ = s_, room_ = 0;
    } else {
      for (auto* b : {&lv_[l].om, &lv_[l].y, &lv_[l].ps, &lv_[l].z}) *b = buffer<T, Space>();
    }
  }
};

}  // namespace h2expr::detail

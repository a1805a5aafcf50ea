// Distributed HGEMV (issue 23), host space. Run under mpiexec -n P:
//   mpiexec -n P build/benchmarks/bench_distributed_host [log2 n = 16] [nv list = 1,16] [model: log2 points per rank = 12]
//                                                        [hara: log2 n = 14]
// 1. Measured on this machine: the product A X and A^T X of a 2D exponential kernel matrix (the paper's
//    first matrix set: a grid, correlation length 0.1 of its side, leaf 64, eta 0.9, rank 64), time per
//    product (best of 5) against one process's h2_matrix, and every rank's traffic.
// 2. compress at two tolerances (n as above), hara(A * A) and hara(A * B) (2^14 points; B non-symmetric) on the
//    ranks, against one process.
// 3. On rank 0 only, the split's traffic at many ranks, from the structure alone (the plans every rank
//    builds without communication): weak scaling with 2^model points per rank, the exact bytes and
//    messages of sampled ranks, up to 1,024 ranks.
#include <mpi.h>

#include <h2expr/distributed.hpp>
#include <h2expr/h2expr.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "timing.hpp"

namespace hx = h2expr;
namespace hd = h2expr::distributed;

namespace {

hx::point_cloud<double, 2> grid(int side) { return hx::point_cloud<double, 2>::grid({side, side}); }

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

// The traffic of rank p of P for one product with one vector, in values (multiply by nv and
// sizeof(T)): point-to-point sent, messages, and the C-level rows it receives from the allgather.
struct traffic {
  double sent = 0, messages = 0, gathered = 0;
  double compress_sent = 0;  // compress's R and truncation-basis exchanges, k x k per ghost node and level, each
};
traffic plan_traffic(const hx::structure<double>& s, int P, int p, int k, int m) {
  const int L = s.depth();
  hx::detail::partition part(P, p, L);
  std::vector<hx::detail::split_level> splits;
  std::vector<const hx::detail::block_sparse_level*> levels;
  for (int slot = 0; slot < part.slots(); ++slot) {
    const int l = part.slot_level(slot);
    const auto& lv = slot == part.slots() - 1 ? s.blocks().dense : s.blocks().coupling[l];
    splits.push_back(part.split(lv, l));
    levels.push_back(&lv);
  }
  traffic t;
  for (const auto& peer : part.plans(levels, splits)) {
    double values = 0;
    for (int slot = 0; slot < part.slots(); ++slot) {
      values += double(peer.send[slot].size()) * (slot == part.slots() - 1 ? m : k);
      if (slot < part.slots() - 1) t.compress_sent += 2.0 * double(peer.send[slot].size()) * k * k;
    }
    t.sent += values, t.messages += values > 0;
  }
  int top = L;
  for (int l = 0; l <= L; ++l)
    if (s.blocks().coupling[l].blocks() > 0) {
      top = l;
      break;
    }
  if (top < part.c) t.gathered = double(std::int64_t(1) << part.c) * k;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int log2n = argc > 1 ? std::atoi(argv[1]) : 16;
  const std::vector<int> nvs = parse_list(argc > 2 ? argv[2] : "1,16");
  const int model_log2 = argc > 3 ? std::atoi(argv[3]) : 12;
  const int hara_log2 = argc > 4 ? std::atoi(argv[4]) : 14;
  const int side = int(std::lround(std::sqrt(double(1 << log2n))));
  const int n = side * side;
  const hx::build_options bo{.leaf_size = 64, .eta = 0.9, .cheb_points = 8};
  const hx::kernels::exponential kernel{0.1};
  const auto points = grid(side);

  if (rank == 0)
    std::printf("# distributed HGEMV, host space, %d ranks (OMP_NUM_THREADS=%s each), double\n"
                "# 2D exponential kernel (length 0.1) on a %d x %d grid (n = %d), leaf 64, eta 0.9, rank 64\n",
                ranks, std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "default", side, side, n);
  auto t0 = std::chrono::steady_clock::now();
  const auto A = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, points, kernel, bo);
  MPI_Barrier(MPI_COMM_WORLD);
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::size_t> bytes(static_cast<std::size_t>(ranks));
  const std::size_t mine = A.memory_bytes();
  MPI_Gather(&mine, 1, MPI_UINT64_T, bytes.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  // One process's matrix, for the single-process time (rank 0 builds it alone: the others wait).
  hx::h2_matrix<double> S;
  if (rank == 0) {
    S = hx::h2_matrix<double>::from_kernel(points, kernel, bo);
    std::printf("# build: %.2f s distributed; C-level %d of depth %d; bytes per rank %.1f .. %.1f MB (one process: %.1f MB)\n",
                build, A.c_level(), A.structure().depth(), *std::min_element(bytes.begin(), bytes.end()) / 1e6,
                *std::max_element(bytes.begin(), bytes.end()) / 1e6, S.memory_bytes() / 1e6);
    std::printf("\n| %-4s | %3s | %5s | %12s | %12s | %12s | %12s | %10s | %14s | %14s |\n", "op", "nv", "ranks",
                "time (ms)", "1 proc (ms)", "waiting (ms)", "max sent KB", "max msgs", "allgather KB", "bytes/rank/vec");
    std::printf("|------|-----|-------|--------------|--------------|--------------|--------------|------------|----------------|----------------|\n");
  }
  for (int nv : nvs)
    for (bool transpose : {false, true}) {
      const hx::matrix<double> X = hx::matrix<double>::random(A.local_rows(), nv, 7);
      hd::product_report r;
      double best = 1e300, waiting = 0;
      for (int run = 0; run < 6; ++run) {
        hd::product_report one;
        MPI_Barrier(MPI_COMM_WORLD);
        const auto s0 = std::chrono::steady_clock::now();
        hd::multiply(A, X, transpose, &one);
        MPI_Barrier(MPI_COMM_WORLD);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
        if (run > 0 && sec < best) best = sec, waiting = one.seconds_waiting, r = one;  // run 0: warm-up
      }
      double one_process = 0;
      if (rank == 0) {
        const hx::matrix<double> Xs = hx::matrix<double>::random(n, nv, 7);
        one_process = hx::bench::best_seconds(S.context(), [&] {
          hx::detail::multiply(S, transpose ? hx::detail::op::transpose : hx::detail::op::none, Xs);
        });
      }
      double local[3] = {double(r.bytes_sent), double(r.messages_sent), waiting}, worst[3];
      MPI_Reduce(local, worst, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0)
        std::printf("| %-4s | %3d | %5d | %12.2f | %12.2f | %12.2f | %12.1f | %10.0f | %14.1f | %14.0f |\n",
                    transpose ? "A^T" : "A", nv, ranks, best * 1e3, one_process * 1e3, worst[2] * 1e3, worst[0] / 1e3,
                    worst[1], double(r.allgather_bytes) / 1e3, worst[0] / nv);
    }

  // 2. compress (orthogonalize included, as compress does it) and hara(A * A) on the ranks, against one
  // process; every rank's traffic in their own exchanges (the products hara samples with are not counted).
  auto worst = [&](double v) {
    double w = 0;
    MPI_Reduce(&v, &w, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return w;
  };
  if (rank == 0)
    std::printf("\n| %-14s | %5s | %10s | %10s | %16s | %12s | %12s | %10s | %12s |\n", "call", "ranks", "time (s)", "1 proc (s)",
                "H2 ranks", "max MB/rank", "max sent KB", "max msgs", "allgather KB");
  if (rank == 0)
    std::printf("|----------------|-------|------------|------------|------------------|--------------|--------------|------------|--------------|\n");
  std::string phases = "# ";
  // A first call in a process pays for the allocator's first touch of memory it then keeps (glibc raises
  // its mmap threshold after the first large free): up to 3x on the first compress here. Both sides get
  // one untimed compress first, so that neither pays it in the table; its times are printed below.
  double first_distributed = 0, first_one = 0;
  {
    auto B = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, points, kernel, bo);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto c0 = std::chrono::steady_clock::now();
    hx::compress(B, 1e-4);
    MPI_Barrier(MPI_COMM_WORLD);
    first_distributed = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    if (rank == 0) {
      auto S2 = hx::h2_matrix<double>::from_kernel(points, kernel, bo);
      const auto s0 = std::chrono::steady_clock::now();
      hx::compress(S2, 1e-4);
      first_one = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    }
  }
  for (const double tol : {1e-4, 1e-8}) {
    auto B = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, points, kernel, bo);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto c0 = std::chrono::steady_clock::now();
    const auto rep = hx::compress(B, tol);
    MPI_Barrier(MPI_COMM_WORLD);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    const double mb = worst(B.memory_bytes() / 1e6), sent = worst(double(rep.bytes_sent)), msgs = worst(double(rep.messages_sent));
    if (rank == 0) {
      auto S2 = hx::h2_matrix<double>::from_kernel(points, kernel, bo);
      const auto s0 = std::chrono::steady_clock::now();
      hx::compress(S2, tol);
      const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      char name[32], levels[64] = "";
      std::snprintf(name, sizeof name, "compress %.0e", tol);
      const auto& r = B.basis_ranks();
      std::snprintf(levels, sizeof levels, "leaf %d, max %d", r.back(), *std::max_element(r.begin(), r.end()));
      std::printf("| %-14s | %5d | %10.2f | %10.2f | %16s | %12.1f | %12.1f | %10.0f | %12.1f |\n", name, ranks, sec, one, levels, mb,
                  sent / 1e3, msgs, double(rep.allgather_bytes) / 1e3);
      phases += std::string(name) + " on rank 0: norm estimate and orthogonalize " + std::to_string(rep.seconds_orthogonalize) +
                " s, weights " + std::to_string(rep.seconds_weights) + " s, truncation " + std::to_string(rep.seconds_truncation) +
                " s, projection " + std::to_string(rep.seconds_projection) + " s\n# ";
    }
  }
  {
    // hara of a symmetric operator (A A: one basis) and of a general one (A B, B a non-symmetric kernel:
    // samples of M and M^T, two bases).
    const int hside = int(std::lround(std::sqrt(double(1 << hara_log2))));
    const auto hpoints = grid(hside);
    const auto skewed = [](const auto& x, const auto& y) {
      return std::exp(-hx::detail::distance(x, y) / 0.1) * (1.5 + std::tanh(2 * (x[0] - y[0])));
    };
    const auto Ah = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, hpoints, kernel, bo);
    const auto Bh = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, hpoints, skewed, bo);
    const auto Sa = rank == 0 ? hx::h2_matrix<double>::from_kernel(hpoints, kernel, bo) : hx::h2_matrix<double>();
    const auto Sb = rank == 0 ? hx::h2_matrix<double>::from_kernel(hpoints, skewed, bo) : hx::h2_matrix<double>();
    const double tol = 1e-4;
    std::string notes;
    for (const bool general : {false, true}) {
      hx::hara_report hr;
      MPI_Barrier(MPI_COMM_WORLD);
      const auto h0 = std::chrono::steady_clock::now();
      const auto P = general ? hx::hara(Ah * Bh, tol, {.report = &hr}) : hx::hara(Ah * Ah, tol, {.report = &hr});
      MPI_Barrier(MPI_COMM_WORLD);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
      const double err = general ? hx::relative_error(P, Ah * Bh, 10) : hx::relative_error(P, Ah * Ah, 10);
      const double mb = worst(P.memory_bytes() / 1e6);
      if (rank == 0) {
        const auto s0 = std::chrono::steady_clock::now();
        const auto Ps = general ? hx::hara(Sa * Sb, tol) : hx::hara(Sa * Sa, tol);
        const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
        const double es = general ? hx::relative_error(Ps, Sa * Sb, 10) : hx::relative_error(Ps, Sa * Sa, 10);
        char name[32], levels[64], note[256];
        std::snprintf(name, sizeof name, "hara(A %s) %.0e", general ? "B" : "A", tol);
        const auto& r = P.basis_ranks();
        std::snprintf(levels, sizeof levels, "leaf %d, max %d", r.back(), *std::max_element(r.begin(), r.end()));
        std::printf("| %-14s | %5d | %10.2f | %10.2f | %16s | %12.1f | %12s | %10s | %12s |\n", name, ranks, sec, one, levels, mb, "-", "-", "-");
        std::snprintf(note, sizeof note,
                      "# %s: %d samples, relative_error %.2e (one process: %.2e); on rank 0: sampling %.2f s, construction "
                      "%.2f s, recompression %.2f s\n",
                      name, hr.samples, err, es, hr.seconds_sampling, hr.seconds_ara, hr.seconds_compress);
        notes += note;
      }
    }
    if (rank == 0) {
      std::printf("\n%s", phases.substr(0, phases.size() - 2).c_str());
      std::printf("# the first compress of the process (1e-4, untimed in the table): %.2f s on the ranks, %.2f s in one process\n",
                  first_distributed, first_one);
      std::printf("\n# hara at n = %d (2^%d), B: a non-symmetric kernel (exponential times 1.5 + tanh(2 (x_0 - y_0))); times "
                  "include the final recompression and the sampling's distributed products\n%s",
                  hside * hside, hara_log2, notes.c_str());
    }
  }

  if (rank == 0 && model_log2 > 0) {
    std::printf("\n# The split at scale (rank 0 computes every sampled rank's plans from the structure): weak scaling, "
                "2^%d points per rank,\n# the same problem set; values per vector (x 8 bytes in double); sampled ranks: "
                "0, P/2, P - 1 and up to 13 more.\n\n",
                model_log2);
    std::printf("| %6s | %9s | %7s | %13s | %13s | %11s | %14s | %18s |\n", "ranks", "n", "C-level", "max sent KB", "mean sent KB",
                "max msgs", "allgather KB", "compress sent KB");
    std::printf("|--------|-----------|---------|---------------|---------------|-------------|----------------|--------------------|\n");
    for (int P : {2, 4, 16, 64, 256, 1024}) {
      const int s2 = int(std::lround(std::sqrt(double(P) * double(1 << model_log2))));
      const auto st = hx::structure<double>::from_points(grid(s2), bo);
      std::vector<int> sample{0, P / 2, P - 1};
      for (int i = 1; i <= 13 && int(sample.size()) < P; ++i) sample.push_back(int((std::int64_t(i) * 7919) % P));
      std::sort(sample.begin(), sample.end());
      sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
      double max_sent = 0, sum_sent = 0, max_msgs = 0, gathered = 0, compress_sent = 0;
      for (int p : sample) {
        const traffic t = plan_traffic(st, P, p, 64, std::max(st.row_tree().max_leaf_size, 1));
        max_sent = std::max(max_sent, t.sent), sum_sent += t.sent, max_msgs = std::max(max_msgs, t.messages);
        gathered = t.gathered, compress_sent = std::max(compress_sent, t.compress_sent);
      }
      hx::detail::partition part(P, 0, st.depth());
      std::printf("| %6d | %9d | %3d / %d | %13.1f | %13.1f | %11.0f | %14.1f | %18.1f |\n", P, s2 * s2, part.c, st.depth(),
                  max_sent * 8 / 1e3, sum_sent / double(sample.size()) * 8 / 1e3, max_msgs, gathered * 8 / 1e3,
                  compress_sent * 8 / 1e3);
    }
  }
  MPI_Finalize();
  return 0;
}

#pragma once
// Timing for benchmarks: the best of several runs after a warm-up, with the space synchronized.
#include <h2expr/context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace h2expr::bench {

template <class Space, class F>
double best_seconds(context<Space>& ctx, F&& f, int runs = 5) {
  f();  // warm-up: first-touch, pool allocations, lazy library initialization
  ctx.synchronize();
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ctx.synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The process's resident high-water mark in bytes since the last reset_peak_resident() (Linux:
// VmHWM, reset by writing 5 to /proc/self/clear_refs); 0 where the system does not say.
inline void reset_peak_resident() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) std::fputs("5", f), std::fclose(f);
}
inline double peak_resident_bytes() {
  double kb = 0;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    std::fclose(f);
  }
  return kb * 1024;
}

inline void print_row(const std::string& problem, double seconds, double gflop, double ceiling_gflops) {
  const double rate = gflop / seconds;
  std::printf("| %-64s | %10.3f | %10.1f | %9.1f | %5.1f%% |\n", problem.c_str(), seconds * 1e3, rate, ceiling_gflops,
              100.0 * rate / ceiling_gflops);
}
inline void print_header() {
  std::printf("| %-64s | %10s | %10s | %9s | %6s |\n", "problem", "time (ms)", "GFLOP/s", "ceiling", "of ceil");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(66, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(11, '-').c_str(), std::string(8, '-').c_str());
}

}  // namespace h2expr::bench

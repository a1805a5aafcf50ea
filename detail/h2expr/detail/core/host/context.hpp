#pragma once
// The host space's context: the number of threads to use over a batch, the cache of large blocks
// that the space's temporaries come from (host/pool.hpp), and the workspace it lends its calls
// (workspace.hpp).
#include <h2expr/detail/core/host/pool.hpp>
#include <h2expr/detail/core/workspace_slot.hpp>
#include <h2expr/detail/core/space.hpp>

#include <cstddef>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace h2expr {

template <>
class context<host> {
 public:
  context() = default;
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  ~context() { detail::host_free_bytes(pool_, workspace_.block, workspace_.bytes); }

  // Threads used over the items of a batch (OpenMP); 1 when built without OpenMP.
  static int threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
  }
  void synchronize() const {}

  // Freed blocks of 64 KB or more (4 MB where blocks cannot be split: not Linux) stay cached for reuse
  // (fresh pages are slow to touch), up to a limit:
  // an eighth of physical memory unless set here; 0 turns caching off. release_cached() returns them,
  // and the workspace when no call holds it.
  std::size_t cache_limit() const { return pool_.limit(); }
  void set_cache_limit(std::size_t bytes) { pool_.set_limit(bytes); }
  std::size_t cached_bytes() const { return pool_.cached_bytes(); }
  void release_cached() {
    const auto idle = workspace_.take_idle();
    detail::host_free_bytes(pool_, idle.block, idle.bytes);
    pool_.release(0);
  }
  // The bytes of the workspace the context keeps for its calls (0 before the first).
  std::size_t workspace_bytes() const {
    std::lock_guard<std::mutex> lock(workspace_.m);
    return workspace_.bytes;
  }
  // The most memory that one planned request of h2expr's algorithms may add, for those that know it
  // before they allocate (hara's sample panels for a round of samples): past it they raise
  // device_out_of_memory instead. 0 (the default): what the system has available (MemAvailable) and the
  // cache holds. On Linux an
  // allocation past physical memory does not fail, the process is killed when it touches it: this is
  // what turns that into an error.
  std::size_t memory_limit() const { return memory_limit_; }
  void set_memory_limit(std::size_t bytes) { memory_limit_ = bytes; }
  detail::host_pool& pool() { return pool_; }
  detail::workspace_slot& workspace_slot() { return workspace_; }
  // Whether the workspace keeps a block of `bytes` after its call: one below two huge pages (the next
  // call's, untouched by others); a larger one goes back to the cache, which keeps it touched for
  // whichever temporary comes next (held aside, the next phase's temporaries were fresh pages: HARA of
  // A * A 19% slower on the 2D reference).
  bool keeps_workspace(std::size_t bytes) const {
    return !detail::host_pool::serves(bytes) || bytes < 2 * detail::host_pool::page;
  }

 private:
  detail::host_pool pool_;
  std::size_t memory_limit_ = 0;
  mutable detail::workspace_slot workspace_;  // freed before pool_ (the destructor)
};

using host_context = context<host>;

}  // namespace h2expr

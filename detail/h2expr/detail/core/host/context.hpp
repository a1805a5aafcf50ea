#pragma once
// The host space's context: the number of threads to use over a batch, and the cache of large
// blocks that the space's temporaries come from (host/pool.hpp).
#include <h2expr/detail/core/host/pool.hpp>
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

  // Threads used over the items of a batch (OpenMP); 1 when built without OpenMP.
  static int threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
  }
  void synchronize() const {}

  // Freed blocks of 4 MB or more stay cached for reuse (fresh pages are slow to touch), up to a limit:
  // an eighth of physical memory unless set here; 0 turns caching off. release_cached() returns them.
  std::size_t cache_limit() const { return pool_.limit(); }
  void set_cache_limit(std::size_t bytes) { pool_.set_limit(bytes); }
  std::size_t cached_bytes() const { return pool_.cached_bytes(); }
  void release_cached() { pool_.release(0); }
  detail::host_pool& pool() { return pool_; }

 private:
  detail::host_pool pool_;
};

using host_context = context<host>;

}  // namespace h2expr

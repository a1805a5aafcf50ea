#pragma once
// The host space's context: nothing to own but the number of threads to use over a batch.
#include <h2expr/space.hpp>
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
};

using host_context = context<host>;

}  // namespace h2expr

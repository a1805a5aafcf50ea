#pragma once
// Contexts of the execution spaces, and the default context of the calling thread.
//
// Containers and operations share a context through a shared_ptr. Code that names none gets the
// thread's default context: created on first use and destroyed with the last object holding it
// (the thread keeps only a weak reference), so no state outlives its users.
#include <h2expr/detail/host/context.hpp>
#include <h2expr/space.hpp>
#if defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/cuda/context.cuh>
#endif

#include <memory>

namespace h2expr {

template <class Space>
context_ptr<Space> default_context() {
  static_assert(is_space_v<Space>, "h2expr: Space must be h2expr::host or h2expr::cuda");
#if !defined(H2EXPR_CUDA_SPACE)
  static_assert(std::is_same_v<Space, host>,
                "h2expr: the CUDA space is available in CUDA translation units (compile with nvcc and "
                "link h2expr::cuda), or with H2EXPR_CUDA_PRIMITIVES_EXTERN (detail/cuda/primitives.hpp)");
#endif
  thread_local std::weak_ptr<context<Space>> cached;
  if (auto ctx = cached.lock()) return ctx;
  auto ctx = std::make_shared<context<Space>>();
  cached = ctx;
  return ctx;
}

// Whether the CUDA space can run here: a translation unit that can use it, on a machine with a usable device.
inline bool cuda_available() {
#if defined(H2EXPR_CUDA_SPACE)
  int count = 0;
  bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
#else
  return false;
#endif
}

}  // namespace h2expr

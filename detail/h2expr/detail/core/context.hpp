#pragma once
// Contexts of the execution spaces, and the default context of the calling thread.
//
// Containers and operations share a context through a shared_ptr. Code that names none gets the
// thread's default context: created on first use and destroyed with the last object holding it
// (the thread keeps only a weak reference), so no state outlives its users.
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/core/space.hpp>
#if defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/core/cuda/context.cuh>
#endif

#include <chrono>
#include <memory>

namespace h2expr {

template <class Space>
context_ptr<Space> default_context() {
  static_assert(is_space_v<Space>, "h2expr: Space must be h2expr::host or h2expr::cuda");
#if !defined(H2EXPR_CUDA_SPACE)
  static_assert(std::is_same_v<Space, host>,
                "h2expr: the CUDA space is available in CUDA translation units (compile with nvcc and "
                "link h2expr::cuda), or with H2EXPR_CUDA_PRIMITIVES_EXTERN (detail/primitives/cuda/primitives.hpp)");
#endif
  thread_local std::weak_ptr<context<Space>> cached;
  if (auto ctx = cached.lock()) return ctx;
  auto ctx = std::make_shared<context<Space>>();
  cached = ctx;
  return ctx;
}

namespace detail {
// Seconds from t0 to the end of the work queued on ctx so far: a timing report is the host reading a
// result, so it waits for the stream. (Nothing else in the algorithms waits: buffers are freed in
// stream order, and transfers to the host wait by themselves.)
template <class Space>
double seconds_since(context<Space>& ctx, std::chrono::steady_clock::time_point t0) {
  ctx.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The CUDA space's device probe. Every translation unit that can use the space registers it (below),
// so that cuda_available() has one definition and one answer in all translation units of a program,
// C++ and CUDA alike: it is null where none of them can use the space. (Two bodies chosen by the
// compiler, as before, broke the one-definition rule in a program with both kinds of unit, and the
// linker kept either.)
using device_probe = bool (*)();
inline device_probe& cuda_device_probe() {
  static device_probe probe = nullptr;
  return probe;
}
#if defined(H2EXPR_CUDA_SPACE)
inline bool cuda_has_device() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}
inline const bool cuda_device_probe_registered = (cuda_device_probe() = &cuda_has_device, true);
#endif
}  // namespace detail

// Whether the CUDA space can run here: the program has a translation unit that can use it (compiled by
// nvcc, or see H2EXPR_CUDA_SPACE), and the machine a usable device. (From main on: a static
// initializer of another translation unit may run before the probe is registered.)
inline bool cuda_available() {
  const detail::device_probe probe = detail::cuda_device_probe();
  return probe != nullptr && probe();
}

}  // namespace h2expr

// The CUDA translation unit of the two-unit program (host_unit.cpp).
#include <h2expr/context.hpp>

bool cuda_unit_available() { return h2expr::cuda_available(); }

bool cuda_unit_runtime_has_device() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}

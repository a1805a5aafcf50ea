// One answer to "is there a CUDA device" in a program with a C++ and a CUDA translation unit that both
// include h2expr (this one is plain C++: it cannot use the CUDA space itself). The CUDA unit's probe
// must be registered here too, and both units must give the answer of the CUDA runtime.
#include <h2expr/context.hpp>

#include <cstdio>

bool cuda_unit_available();  // cuda_unit.cu: h2expr::cuda_available() there
bool cuda_unit_runtime_has_device();  // cuda_unit.cu: cudaGetDeviceCount, not through h2expr

int main() {
  const bool here = h2expr::cuda_available(), there = cuda_unit_available(), runtime = cuda_unit_runtime_has_device();
  std::printf("cuda_available(): C++ unit %d, CUDA unit %d; the CUDA runtime finds a device: %d\n", here, there,
              runtime);
  if (h2expr::detail::cuda_device_probe() == nullptr) {
    std::printf("FAILED: the C++ unit does not see the CUDA unit's device probe\n");
    return 1;
  }
  if (here != there || here != runtime) {
    std::printf("FAILED: the translation units disagree\n");
    return 1;
  }
  return 0;
}

#pragma once
// Checks of every CUDA runtime and library call: a failure becomes an h2expr error that carries the
// library's own status text and the call site.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include <h2expr/detail/core/error.hpp>
#include <string>

namespace h2expr::detail::cuda_check {

inline std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}

inline void runtime(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
  std::string msg = "h2expr: " + where(call, file, line) + ": " + cudaGetErrorName(status) + " (" +
                    cudaGetErrorString(status) + ")";
  if (status == cudaErrorMemoryAllocation) throw device_out_of_memory(msg);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver)
    throw no_cuda_device(msg);
  throw cuda_error(msg);
}

inline void cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::string msg = "h2expr: " + where(call, file, line) + ": " + cublasGetStatusName(status) +
                    " (" + cublasGetStatusString(status) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw device_out_of_memory(msg);
  throw cublas_error(msg);
}

inline const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "CUSOLVER_STATUS_UNKNOWN";
  }
}

inline void cusolver(cusolverStatus_t status, const char* call, const char* file, int line) {
  if (status == CUSOLVER_STATUS_SUCCESS) return;
  std::string msg = "h2expr: " + where(call, file, line) + ": " + cusolver_status_name(status) +
                    " (status " + std::to_string(int(status)) + ")";
  if (status == CUSOLVER_STATUS_ALLOC_FAILED) throw device_out_of_memory(msg);
  throw cusolver_error(msg);
}

inline void curand(curandStatus_t status, const char* call, const char* file, int line) {
  if (status == CURAND_STATUS_SUCCESS) return;
  std::string msg = "h2expr: " + where(call, file, line) + ": curandStatus " + std::to_string(int(status));
  if (status == CURAND_STATUS_ALLOCATION_FAILED) throw device_out_of_memory(msg);
  throw curand_error(msg);
}

inline void cusparse(cusparseStatus_t status, const char* call, const char* file, int line) {
  if (status == CUSPARSE_STATUS_SUCCESS) return;
  std::string msg = "h2expr: " + where(call, file, line) + ": " + cusparseGetErrorName(status) +
                    " (" + cusparseGetErrorString(status) + ")";
  if (status == CUSPARSE_STATUS_ALLOC_FAILED) throw device_out_of_memory(msg);
  throw cusparse_error(msg);
}

}  // namespace h2expr::detail::cuda_check

#define H2EXPR_CUDA(call) ::h2expr::detail::cuda_check::runtime((call), #call, __FILE__, __LINE__)
#define H2EXPR_CUBLAS(call) ::h2expr::detail::cuda_check::cublas((call), #call, __FILE__, __LINE__)
#define H2EXPR_CUSOLVER(call) ::h2expr::detail::cuda_check::cusolver((call), #call, __FILE__, __LINE__)
#define H2EXPR_CURAND(call) ::h2expr::detail::cuda_check::curand((call), #call, __FILE__, __LINE__)
#define H2EXPR_CUSPARSE(call) ::h2expr::detail::cuda_check::cusparse((call), #call, __FILE__, __LINE__)
// After every kernel launch: launch-configuration errors surface here, at the launch site.
#define H2EXPR_CUDA_LAUNCHED() H2EXPR_CUDA(cudaGetLastError())

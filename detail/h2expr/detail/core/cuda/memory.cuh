#pragma once
// Memory of the CUDA space: stream-ordered allocation from the context's pool (temporaries reuse what
// the context already holds)
// and copies on the context's stream. Transfers to the host synchronize, so host data is ready.
// Host calls only (the batched copies and element-wise kernels are in elementwise.cuh).
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/index.hpp>  // checked_bytes

#include <cstddef>

namespace h2expr::detail {

// Where the device refuses, what every context's pool on the device keeps idle goes back to the driver
// (this context's after the work queued so far, its frees included), and the allocation is tried once
// more: device_out_of_memory only when that fails too. The contexts' workspace blocks stay: they are
// allocated memory, and this may run while the caller holds this context's (workspace.hpp grows it).
template <class T>
T* allocate(context<cuda>& c, std::size_t n) {
  if (n == 0) return nullptr;
  void* p = nullptr;
  const std::size_t bytes = checked_bytes<T>(n);
  auto attempt = [&] {
    return c.pool() ? cudaMallocFromPoolAsync(&p, bytes, c.pool(), c.stream()) : cudaMallocAsync(&p, bytes, c.stream());
  };
  cudaError_t status = attempt();
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: the second attempt's status is the answer
    c.synchronize();
    detail::device_pools::trim(c.device());
    status = attempt();
  }
  H2EXPR_CUDA(status);
  return static_cast<T*>(p);
}
template <class T>
void deallocate(context<cuda>& c, T* p, std::size_t /*n: the host space's needs it*/ = 0) noexcept {
  if (p) (void)cudaFreeAsync(p, c.stream());
}

// The bytes an algorithm may still plan to hold (context::memory_limit): what the context's device has
// free and what the pools of the process keep idle there (cudaMemGetInfo counts that as used; a pool
// maps in chunks, so a partly used chunk may not all come back: a planning figure), or the limit set. Planned with as on the host: hara refuses samples that cannot fit before it writes them,
// and streams a round, or draws its test matrices again, past a share of it.
inline std::size_t memory_available(context<cuda>& c) {
  if (c.memory_limit() > 0) return c.memory_limit();
  int current = 0;
  H2EXPR_CUDA(cudaGetDevice(&current));
  if (current != c.device()) H2EXPR_CUDA(cudaSetDevice(c.device()));
  std::size_t free = 0, total = 0;
  const cudaError_t status = cudaMemGetInfo(&free, &total);
  if (current != c.device() && cudaSetDevice(current) != cudaSuccess)
    (void)cudaGetLastError();  // not left pending for the next launch check to report
  H2EXPR_CUDA(status);
  return free + device_pools::idle(c.device());
}

// Device memory for the kernels of one call, freed in stream order when it goes out of scope (after
// the work queued before), a throwing launch included.
template <class T>
class device_scratch {
 public:
  device_scratch(context<cuda>& c, std::size_t n) : c_(&c), p_(allocate<T>(c, n)) {}
  device_scratch(const device_scratch&) = delete;
  device_scratch& operator=(const device_scratch&) = delete;
  ~device_scratch() { deallocate(*c_, p_); }
  T* get() const { return p_; }

 private:
  context<cuda>* c_;
  T* p_;
};

// Page-locked host memory (MPI's staging of device data): its copies to and from the device run at
// the link's full bandwidth. From the context's staging pool in stream order where it has one, so that
// a message reuses what earlier ones freed (the host may touch it once the stream has reached the
// allocation: after a synchronization); else allocated and freed per call (cudaMallocHost, which
// synchronizes the device).
template <class T>
T* allocate_staging(context<cuda>& c, std::size_t n) {
  if (n == 0) return nullptr;
  void* p = nullptr;
  const std::size_t bytes = checked_bytes<T>(n);
  if (cudaMemPool_t pool = c.staging_pool()) H2EXPR_CUDA(cudaMallocFromPoolAsync(&p, bytes, pool, c.stream()));
  else H2EXPR_CUDA(cudaMallocHost(&p, bytes));
  return static_cast<T*>(p);
}
// After the work queued before (a copy from it still in flight included).
template <class T>
void deallocate_staging(context<cuda>& c, T* p) noexcept {
  if (!p) return;
  if (c.staging_pool()) {
    (void)cudaFreeAsync(p, c.stream());
  } else {
    (void)cudaStreamSynchronize(c.stream());
    (void)cudaFreeHost(p);
  }
}
// n values from staging memory to the device, queued without a wait: the staging memory outlives the
// copy (deallocate_staging frees it after the work queued before).
template <class T>
void upload_staged(context<cuda>& c, std::size_t n, const T* staged, T* dst) {
  if (n) H2EXPR_CUDA(cudaMemcpyAsync(dst, staged, n * sizeof(T), cudaMemcpyHostToDevice, c.stream()));
}

template <class T>
void copy(context<cuda>& c, const T* src, T* dst, std::size_t n) {
  if (n) H2EXPR_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, c.stream()));
}
// rows x cols from src (leading dimension lds) to dst (ldd) on the context's stream. Contiguous
// blocks go as one plain copy: cudaMemcpy2D refuses pitches past cudaDevAttrMaxPitch (2^31 - 1 bytes),
// which a single column of 2 GB or more (a whole buffer's transfer) would pass as its pitch.
template <class T>
void copy_2d_async(context<cuda>& c, std::size_t rows, std::size_t cols, const T* src, std::size_t lds, T* dst,
                   std::size_t ldd, cudaMemcpyKind kind) {
  if (rows == 0 || cols == 0) return;
  if (cols == 1 || (lds == rows && ldd == rows))
    H2EXPR_CUDA(cudaMemcpyAsync(dst, src, checked_bytes<T>(rows * cols), kind, c.stream()));
  else
    H2EXPR_CUDA(cudaMemcpy2DAsync(dst, ldd * sizeof(T), src, lds * sizeof(T), rows * sizeof(T), cols, kind, c.stream()));
}
template <class T>
void copy_2d(context<cuda>& c, std::size_t rows, std::size_t cols, const T* src, std::size_t lds, T* dst,
             std::size_t ldd) {
  copy_2d_async(c, rows, cols, src, lds, dst, ldd, cudaMemcpyDeviceToDevice);
}
template <class T>
void download_2d(context<cuda>& c, std::size_t rows, std::size_t cols, const T* src, std::size_t lds,
                 T* host_dst, std::size_t ldd) {
  if (rows == 0 || cols == 0) return;
  copy_2d_async(c, rows, cols, src, lds, host_dst, ldd, cudaMemcpyDeviceToHost);
  c.synchronize();
}
template <class T>
void upload_2d(context<cuda>& c, std::size_t rows, std::size_t cols, const T* host_src, std::size_t lds,
               T* dst, std::size_t ldd) {
  if (rows == 0 || cols == 0) return;
  copy_2d_async(c, rows, cols, host_src, lds, dst, ldd, cudaMemcpyHostToDevice);
  c.synchronize();  // the host source may go away when we return
}

}  // namespace h2expr::detail

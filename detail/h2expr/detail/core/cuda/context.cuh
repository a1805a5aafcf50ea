#pragma once
// The CUDA space's context: one device, one stream, the cuBLAS and cuSOLVER handles bound to that
// stream (and a cuSPARSE one, made on first use), a memory pool of its own and the workspace it lends
// its calls (workspace.hpp), and one of page-locked host memory for MPI's staging, made on first use.
// Everything the CUDA backend does is ordered on this stream.
// The pool keeps what is freed into it (release threshold: unlimited) instead of handing it back to
// the driver at every synchronization, as the device's default pool does: an algorithm's temporaries
// then come from memory the context already holds, grown to the widest request, with no
// synchronization and no new mapping per call. trim() gives the idle part back, and an allocation
// the device refuses takes back what every context's pool on the device keeps idle (not their
// workspace blocks), then tries once more (memory.cuh): a pool's idle memory is lost to other
// contexts until then.
// Random numbers come from cuRAND's device API (counter-based Philox) inside h2expr's fill kernels,
// so no generator handle is needed and a fill depends only on its seed, not on launch shapes.
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/space.hpp>
#include <h2expr/detail/core/workspace_slot.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace h2expr {

namespace detail {
// The pools of the process's CUDA contexts, per device, so that an allocation one context is refused
// can take back what the others keep idle (each pool keeps its peak; see context<cuda>).
class device_pools {
 public:
  static void add(int device, cudaMemPool_t pool) {
    std::lock_guard<std::mutex> lock(mutex());
    entries().push_back({device, pool});
  }
  static void remove(cudaMemPool_t pool) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    std::erase_if(entries(), [pool](const entry& e) { return e.pool == pool; });
  }
  // Every pool of `device` hands its idle memory back to the driver: what is neither allocated nor
  // freed by work its stream has still to run (statuses ignored: what cannot be released stays).
  static void trim(int device) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    for (const entry& e : entries())
      if (e.device == device) (void)cudaMemPoolTrimTo(e.pool, 0);
  }
  // What the pools of `device` keep idle: reserved from the driver, not allocated from them (blocks
  // freed by work their streams have run). cudaMemGetInfo counts it as used; an allocation the device
  // refuses gets it back (trim), so it is available (memory.cuh's memory_available).
  static std::size_t idle(int device) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    std::size_t bytes = 0;
    for (const entry& e : entries()) {
      if (e.device != device) continue;
      std::uint64_t reserved = 0, used = 0;
      if (cudaMemPoolGetAttribute(e.pool, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess ||
          cudaMemPoolGetAttribute(e.pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess)
        (void)cudaGetLastError();  // not sticky: this pool counts as holding nothing idle
      else if (reserved > used)
        bytes += std::size_t(reserved - used);
    }
    return bytes;
  }

 private:
  struct entry {
    int device;
    cudaMemPool_t pool;
  };
  // Never destroyed: a context in a static object may be released after any other static has gone.
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::vector<entry>& entries() {
    static auto* e = new std::vector<entry>;
    return *e;
  }
};
}  // namespace detail

template <>
class context<cuda> {
 public:
  // The current device of the calling thread, or `device` when given.
  explicit context(int device = -1) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      throw no_cuda_device(std::string("h2expr: the CUDA space needs a CUDA device, and none is usable (") +
                           (status == cudaSuccess ? "no device found" : cudaGetErrorString(status)) + ")");
    }
    if (device < 0) H2EXPR_CUDA(cudaGetDevice(&device));
    require<invalid_argument>(device < count, "CUDA device " + std::to_string(device) + " does not exist");
    device_ = device;
    H2EXPR_CUDA(cudaSetDevice(device_));
    H2EXPR_CUDA(cudaGetDeviceProperties(&properties_, device_));
    H2EXPR_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
      int pools = 0;
      H2EXPR_CUDA(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_));
      if (pools) {  // else the device's default pool, through cudaMallocAsync
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device_;
        H2EXPR_CUDA(cudaMemPoolCreate(&pool_, &props));
        std::uint64_t keep = ~std::uint64_t(0);
        H2EXPR_CUDA(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
        detail::device_pools::add(device_, pool_);
      }
      H2EXPR_CUBLAS(cublasCreate(&blas_));
      H2EXPR_CUBLAS(cublasSetStream(blas_, stream_));
      H2EXPR_CUSOLVER(cusolverDnCreate(&solver_));
      H2EXPR_CUSOLVER(cusolverDnSetStream(solver_, stream_));
    } catch (...) {
      release();
      throw;
    }
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  ~context() { release(); }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  cusolverDnHandle_t solver() const { return solver_; }
  // cuSPARSE, bound to the stream; created on first use, since most work never needs it.
  cusparseHandle_t sparse() {
    if (!sparse_) {
      cusparseHandle_t h = nullptr;
      H2EXPR_CUSPARSE(cusparseCreate(&h));
      if (cusparseStatus_t s = cusparseSetStream(h, stream_); s != CUSPARSE_STATUS_SUCCESS) {
        (void)cusparseDestroy(h);
        H2EXPR_CUSPARSE(s);
      }
      sparse_ = h;
    }
    return sparse_;
  }
  const cudaDeviceProp& properties() const { return properties_; }
  // A bound on the device memory that the algorithms plan with (memory_available; hara's sample panels,
  // bases and near blocks), as the host context's: 0, the default, for what the device has free and
  // the pools keep idle.
  std::size_t memory_limit() const { return memory_limit_; }
  void set_memory_limit(std::size_t bytes) { memory_limit_ = bytes; }
  // The context's memory pool (null where the device has none: then the default pool serves).
  cudaMemPool_t pool() const { return pool_; }
  // A stream-ordered pool of page-locked host memory (MPI's staging of device data, memory.cuh), made
  // on first use and kept like the device pool; null where the device or the toolkit has none (then
  // staging allocates page-locked memory per message).
  cudaMemPool_t staging_pool() {
#if CUDART_VERSION >= 13000
    if (!staging_tried_) {
      staging_tried_ = true;
      int supported = 0;
      if (cudaDeviceGetAttribute(&supported, cudaDevAttrHostMemoryPoolsSupported, device_) == cudaSuccess &&
          supported) {
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeHost;
        cudaMemPool_t p = nullptr;
        if (cudaMemPoolCreate(&p, &props) == cudaSuccess) {
          std::uint64_t keep = ~std::uint64_t(0);
          cudaMemAccessDesc access{};  // the copy engines of this device read and write it
          access.location.type = cudaMemLocationTypeDevice;
          access.location.id = device_;
          access.flags = cudaMemAccessFlagsProtReadWrite;
          if (cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess &&
              cudaMemPoolSetAccess(p, &access, 1) == cudaSuccess)
            staging_ = p;
          else
            (void)cudaMemPoolDestroy(p);
        }
      }
      (void)cudaGetLastError();  // a refusal above is an answer, not an error of later calls
    }
#endif
    return staging_;
  }
  // Hands the pool's idle memory back to the driver, after the work queued so far, and the workspace
  // with it when no call holds it.
  void trim() {
    if (std::byte* idle = workspace_.take_idle().block) H2EXPR_CUDA(cudaFreeAsync(idle, stream_));
    synchronize();
    if (pool_) H2EXPR_CUDA(cudaMemPoolTrimTo(pool_, 0));
    if (staging_) H2EXPR_CUDA(cudaMemPoolTrimTo(staging_, 0));
  }
  // The host space's name for it.
  void release_cached() { trim(); }
  // The bytes of the workspace the context keeps for its calls (0 before the first).
  std::size_t workspace_bytes() const {
    std::lock_guard<std::mutex> lock(workspace_.m);
    return workspace_.bytes;
  }
  detail::workspace_slot& workspace_slot() { return workspace_; }
  // Whether the workspace keeps a block of `bytes` after its call (always: the pool keeps it anyway).
  bool keeps_workspace(std::size_t) const { return true; }

  void synchronize() const { H2EXPR_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  template <class E>
  static void require(bool c, const std::string& m) {
    detail::require<E>(c, m);
  }
  void release() noexcept {
    // Destructors must not throw: statuses are ignored here on purpose.
    if (workspace_.block) (void)cudaFreeAsync(workspace_.block, stream_);
    if (stream_) (void)cudaStreamSynchronize(stream_);
    if (sparse_) (void)cusparseDestroy(sparse_);
    if (solver_) (void)cusolverDnDestroy(solver_);
    if (blas_) (void)cublasDestroy(blas_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    // Memory still allocated from the pool (none: buffers keep their context alive) would be freed
    // with its last allocation.
    if (pool_) detail::device_pools::remove(pool_), (void)cudaMemPoolDestroy(pool_);
    if (staging_) (void)cudaMemPoolDestroy(staging_);
    pool_ = nullptr, staging_ = nullptr;
    workspace_.block = nullptr, workspace_.bytes = 0;
    sparse_ = nullptr;
    solver_ = nullptr;
    blas_ = nullptr;
    stream_ = nullptr;
  }

  int device_ = 0;
  cudaDeviceProp properties_{};
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cusparseHandle_t sparse_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  cudaMemPool_t staging_ = nullptr;
  bool staging_tried_ = false;
  std::size_t memory_limit_ = 0;
  mutable detail::workspace_slot workspace_;
};

using cuda_context = context<cuda>;

}  // namespace h2expr

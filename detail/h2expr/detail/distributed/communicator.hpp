#pragma once
// The MPI side of h2expr's distributed calls: a communicator of their own (a duplicate of the
// user's, so that h2expr's messages never match the user's), the agreement run at every phase
// boundary (all ranks return, or all throw the same error: never one rank left waiting in a
// collective), and messages whose values live in a space (on the CUDA space handed to a CUDA-aware
// MPI as they are, else staged through page-locked host memory).
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/space.hpp>

#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda_support
#endif
#endif

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr::detail {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else static_assert(sizeof(T) == 0, "mpi_type: no MPI datatype for this type");
}

inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw error(std::string("h2expr: ") + call + " failed: " + std::string(text, std::size_t(length)));
}

// What went wrong on one rank, carried to the others by the next agreement: the exception's kind
// (so that every rank throws the same type) and its message.
struct rank_failure {
  enum kind_t : int { none = 0, other, invalid, dimensions, non_finite, disagree, numerical, memory, tolerance, missing };
  int kind = none;
  std::string message;
  explicit operator bool() const { return kind != none; }

  // Runs f, keeping what it throws instead of letting it leave this rank alone.
  template <class F>
  static rank_failure of(F&& f) {
    try {
      std::forward<F>(f)();
      return {};
    } catch (const dimension_mismatch& e) {
      return {dimensions, e.what()};
    } catch (const non_finite_value& e) {
      return {non_finite, e.what()};
    } catch (const invalid_tolerance& e) {
      return {tolerance, e.what()};
    } catch (const missing_structure& e) {
      return {missing, e.what()};
    } catch (const invalid_argument& e) {
      return {invalid, e.what()};
    } catch (const ranks_disagree& e) {
      return {disagree, e.what()};
    } catch (const numerical_failure& e) {
      return {numerical, e.what()};
    } catch (const device_out_of_memory& e) {
      return {memory, e.what()};
    } catch (const std::bad_alloc&) {
      return {memory, "h2expr: out of memory"};
    } catch (const std::exception& e) {
      return {other, e.what()};
    } catch (...) {  // a user's kernel may throw anything: it must not leave this rank alone either
      return {other, "h2expr: an exception not derived from std::exception"};
    }
  }
  [[noreturn]] void raise(const std::string& message_on_all) const {
    switch (kind) {
      case dimensions: throw dimension_mismatch(message_on_all);
      case non_finite: throw non_finite_value(message_on_all);
      case invalid: throw invalid_argument(message_on_all);
      case tolerance: throw invalid_tolerance(message_on_all);
      case missing: throw missing_structure(message_on_all);
      case disagree: throw ranks_disagree(message_on_all);
      case numerical: throw numerical_failure(message_on_all);
      case memory: throw device_out_of_memory(message_on_all);
      default: throw error(message_on_all);
    }
  }
};

// One value every rank must give alike, named for the message when they do not.
struct agreed_value {
  const char* name;
  std::int64_t value;
};
inline std::int64_t bits_of(double v) {
  std::int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

class communicator {
 public:
  explicit communicator(MPI_Comm user) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    require(initialized && !finalized, "distributed: MPI is not initialized (call MPI_Init before, MPI_Finalize after)");
    require(user != MPI_COMM_NULL, "distributed: the communicator is MPI_COMM_NULL");
    mpi_check(MPI_Comm_dup(user, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);  // failures come back as codes, then as h2expr::error
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~communicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Collective: every rank calls it at the same point with the values all must share and what failed
  // on it, if anything. Then all return, or all throw: the failure of the lowest failing rank (its
  // kind: dimension_mismatch, non_finite_value, invalid_argument, ranks_disagree, numerical_failure,
  // else h2expr::error; its message naming the rank), else ranks_disagree naming the first value that
  // differs.
  void agree(const std::string& what, const std::vector<agreed_value>& values, const rank_failure& failure = {}) const {
    // One MAX reduction: the lowest failing rank as size - rank, each value and its complement (~v:
    // the maximum of ~v is ~min v, with no overflow).
    std::vector<std::int64_t> mine(1 + 2 * values.size()), all(mine.size());
    mine[0] = failure ? size_ - rank_ : 0;
    for (std::size_t i = 0; i < values.size(); ++i) mine[1 + 2 * i] = values[i].value, mine[2 + 2 * i] = ~values[i].value;
    mpi_check(MPI_Allreduce(mine.data(), all.data(), int(mine.size()), MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
    if (all[0] > 0) {
      const int root = size_ - int(all[0]);
      rank_failure f = failure;
      std::int64_t head[2] = {f.kind, std::int64_t(f.message.size())};
      mpi_check(MPI_Bcast(head, 2, MPI_INT64_T, root, comm_), "MPI_Bcast");
      f.kind = int(head[0]);
      f.message.resize(std::size_t(head[1]));
      if (head[1] > 0) mpi_check(MPI_Bcast(f.message.data(), int(head[1]), MPI_CHAR, root, comm_), "MPI_Bcast");
      std::string text = f.message.rfind("h2expr: ", 0) == 0 ? f.message.substr(8) : f.message;
      f.raise("h2expr: " + what + " failed on rank " + std::to_string(root) + " of " + std::to_string(size_) + ": " + text);
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::int64_t hi = all[1 + 2 * i], lo = ~all[2 + 2 * i];
      if (hi != lo)
        throw ranks_disagree("h2expr: " + what + ": the ranks disagree on " + values[i].name + " (" + std::to_string(lo) +
                             " on some, " + std::to_string(hi) + " on others)");
    }
  }

  // Collective: values := their sum over the ranks, added in rank order on every rank, so that every
  // rank gets the same bits (an allreduce may add in another order on each) and decides alike.
  template <class T>
  void sum_in_rank_order(T* values, int n) const {
    std::vector<T> all(std::size_t(n) * std::size_t(size_));
    mpi_check(MPI_Allgather(values, n, mpi_type<T>(), all.data(), n, mpi_type<T>(), comm_), "MPI_Allgather");
    for (int i = 0; i < n; ++i) {
      T s = all[std::size_t(i)];
      for (int q = 1; q < size_; ++q) s += all[std::size_t(q) * n + i];
      values[i] = s;
    }
  }
  // Collective: values := their element-wise maximum over the ranks.
  void max(std::vector<std::int64_t>& values) const {
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  }

  // Collective: every rank's count values, one after the other in rank order (counts: every rank's).
  template <class T>
  void allgather(const T* mine, const std::vector<int>& counts, T* all) const {
    std::vector<int> displs(counts.size() + 1, 0);
    for (std::size_t q = 0; q < counts.size(); ++q) displs[q + 1] = displs[q] + counts[q];
    mpi_check(MPI_Allgatherv(mine, counts[rank_], mpi_type<T>(), all, counts.data(), displs.data(), mpi_type<T>(), comm_),
              "MPI_Allgatherv");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// Whether this process's MPI takes device pointers: Open MPI's run-time query where its mpi-ext.h
// has one (MPIX_CUDA_AWARE_SUPPORT), else no; H2EXPR_MPI_CUDA_AWARE=0 or 1 overrides it (a rank's
// choice is its own: MPI sees each rank's buffers alone).
inline bool mpi_cuda_aware() {
  static const bool aware = [] {
    if (const char* v = std::getenv("H2EXPR_MPI_CUDA_AWARE")) return std::string(v) == "1";
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return false;
#endif
  }();
  return aware;
}

// A message's values in the space, where h2expr's kernels pack and unpack them, and the memory MPI
// reads or writes: the same memory on the host space and for a CUDA-aware MPI, else a page-locked host
// copy from the context's staging pool, reused from message to message (before_send and after_receive
// move the values; after_receive's copy is queued, and the staging memory is freed after it). The values
// are the message's own, or a part of the calling product's workspace (workspace.hpp), so that a product
// allocates none per call. MPI works outside the stream, so these are the distributed algorithms' waits
// for it: before_send for the packed values, before_receive for the stream-ordered memory that MPI is
// to write.
template <class T, class Space>
class message {
 public:
  message(const context_ptr<Space>& ctx, std::size_t n) : owned_(ctx, n), values_(owned_.data()), size_(n), ctx_(ctx) {
    stage();
  }
  // n values at `values`, memory the caller holds while the message is in use.
  message(const context_ptr<Space>& ctx, T* values, std::size_t n) : values_(values), size_(n), ctx_(ctx) { stage(); }
  T* data() { return values_; }
  std::size_t size() const { return size_; }
  T* mpi() { return staged_ ? staged_.get() : values_; }
  void before_send() {
    if constexpr (!space_traits<Space>::host_memory) {
      if (staged_ && size_) download_2d(*ctx_, size_, 1, values_, size_, staged_.get(), size_);
      else ctx_->synchronize();  // MPI reads the packed values: they must be there
    }
  }
  void before_receive() {  // MPI writes the staging memory (stream-ordered too) or the values themselves
    if constexpr (!space_traits<Space>::host_memory)
      if (size_) ctx_->synchronize();
  }
  void after_receive() {
    if constexpr (!space_traits<Space>::host_memory)
      if (staged_ && size_) upload_staged(*ctx_, size_, staged_.get(), values_);
  }

 private:
  void stage() {
#if defined(H2EXPR_CUDA_SPACE)
    if constexpr (!space_traits<Space>::host_memory)
      if (!mpi_cuda_aware())
        staged_ = std::unique_ptr<T, release_staging>(allocate_staging<T>(*ctx_, size_), {ctx_.get()});
#endif
  }
  struct release_staging {
    context<Space>* c = nullptr;
    void operator()(T* p) const noexcept {
#if defined(H2EXPR_CUDA_SPACE)
      if constexpr (!space_traits<Space>::host_memory) deallocate_staging(*c, p);
#endif
      (void)p;
    }
  };
  buffer<T, Space> owned_;  // empty for values in a workspace
  T* values_;
  std::size_t size_;
  context_ptr<Space> ctx_;
  std::unique_ptr<T, release_staging> staged_;  // empty on the host space and for a CUDA-aware MPI
};

// Non-blocking point-to-point messages, completed by wait() (or on destruction, so that no buffer
// goes away under a pending request).
class pending {
 public:
  pending() = default;
  pending(const pending&) = delete;
  pending& operator=(const pending&) = delete;
  ~pending() {
    if (!requests_.empty()) MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  template <class T>
  void send(const communicator& c, const T* data, std::size_t n, int to) {
    require(n <= std::size_t(INT32_MAX), "distributed: a message of more than 2^31 - 1 values");
    requests_.push_back(MPI_REQUEST_NULL);  // what ~pending may wait on if the call fails
    mpi_check(MPI_Isend(data, int(n), mpi_type<T>(), to, tag, c.get(), &requests_.back()), "MPI_Isend");
  }
  template <class T>
  void receive(const communicator& c, T* data, std::size_t n, int from) {
    require(n <= std::size_t(INT32_MAX), "distributed: a message of more than 2^31 - 1 values");
    requests_.push_back(MPI_REQUEST_NULL);
    mpi_check(MPI_Irecv(data, int(n), mpi_type<T>(), from, tag, c.get(), &requests_.back()), "MPI_Irecv");
  }
  void wait() {
    if (requests_.empty()) return;
    const int code = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    mpi_check(code, "MPI_Waitall");
  }

 private:
  static constexpr int tag = 0x4832;  // "H2"; the communicator is h2expr's own
  std::vector<MPI_Request> requests_;
};

}  // namespace h2expr::detail

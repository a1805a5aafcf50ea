#pragma once
// workspace<Space>: the temporaries of one call (an H2 product's coefficients and reordered blocks, a
// cuSPARSE product's buffer), lent by the call's context. The context keeps one block, grown to the
// widest request and reused, so that a call allocates nothing once it has grown (the host keeps small
// blocks only: a large one goes back to its cache of large blocks, which hands it to the next request).
// One call holds the block at a time. A call that finds it lent (another thread's product on the same
// context or the same const matrix, or a call made inside one that holds it) gets a block of its own for
// the call, so that concurrent calls stay correct. Giving the block back needs no synchronization: the
// next call's work is queued after this one's on the context's stream (the host space runs in order),
// and a grown block frees the old one in stream order.
//
// A call first lists its parts (workspace_plan), then takes them all at once:
//   workspace_plan plan;
//   const auto x = plan.add<T>(n * nv);
//   workspace<Space> ws(ctx, plan);
//   T* px = ws[x];
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/workspace_slot.hpp>

#include <concepts>
#include <cstddef>
#include <mutex>

namespace h2expr::detail {

// What a context offers for it, the same for both spaces (checked below).
template <class Space>
concept lends_workspace = requires(context<Space>& c, const context<Space>& cc, std::size_t n) {
  { c.workspace_slot() } -> std::same_as<workspace_slot&>;
  { cc.keeps_workspace(n) } -> std::same_as<bool>;
  { cc.workspace_bytes() } -> std::same_as<std::size_t>;
  c.release_cached();
};
static_assert(lends_workspace<host>);
#if defined(H2EXPR_CUDA_SPACE)
static_assert(lends_workspace<cuda>);
#endif

// A part of a plan: where its n elements of T start in the block.
template <class T>
struct workspace_part {
  std::size_t offset = 0;
};

class workspace_plan {
 public:
  // Parts start at multiples of 256 bytes into the block, which starts so aligned on the device (what
  // cuBLAS and wide vector loads want of a matrix; on the host, blocks start on a cache line at least).
  static constexpr std::size_t alignment = 256;
  template <class T>
  workspace_part<T> add(std::size_t n) {
    static_assert(alignof(T) <= alignment);
    const std::size_t bytes = checked_bytes<T>(n), at = (bytes_ + alignment - 1) / alignment * alignment;
    require(at >= bytes_ && at + bytes >= at && at + bytes <= max_elements<std::byte>(),
            "workspace: the parts of one call pass the addressable size");
    bytes_ = at + bytes;
    return {at};
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

template <class Space>
class workspace {
 public:
  workspace(context<Space>& c, const workspace_plan& plan) : c_(&c), bytes_(plan.bytes()) {
    if (bytes_ == 0) return;
    workspace_slot& s = c.workspace_slot();
    {
      std::lock_guard<std::mutex> lock(s.m);
      if (!s.lent) {
        if (s.bytes < bytes_) {  // grow: the old block is freed first (after the work queued on it), so
                                 // that the new one may reuse its memory
          const auto old = s.take_unlent();
          deallocate(c, old.block, old.bytes);
          s.block = allocate<std::byte>(c, bytes_);  // may throw: the slot then has no block
          s.bytes = bytes_;
        }
        s.lent = true;
        block_ = s.block;
        lent_ = true;
        return;
      }
    }
    block_ = allocate<std::byte>(c, bytes_);
  }
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;
  ~workspace() {
    if (!block_) return;
    if (!lent_) {
      deallocate(*c_, block_, bytes_);
      return;
    }
    workspace_slot& s = c_->workspace_slot();
    std::lock_guard<std::mutex> lock(s.m);
    s.lent = false;
    if (!c_->keeps_workspace(s.bytes)) {  // a large host block: back to the cache of large blocks
      const auto t = s.take_unlent();
      deallocate(*c_, t.block, t.bytes);
    }
  }

  template <class T>
  T* operator[](workspace_part<T> p) const {
    return reinterpret_cast<T*>(block_ + p.offset);
  }
  // Whether this call holds the context's block (false: a block of its own, or none needed).
  bool holds_context_block() const { return lent_; }

 private:
  context<Space>* c_;
  std::size_t bytes_;
  std::byte* block_ = nullptr;
  bool lent_ = false;
};

}  // namespace h2expr::detail

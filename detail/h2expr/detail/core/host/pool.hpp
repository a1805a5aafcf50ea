#pragma once
// The host space's cache of blocks, backed by transparent huge pages. A fresh page costs a fault
// and a zeroing on first touch: measured on the development VM, writing 1 GB of fresh 4 KB pages took
// 0.7-3 s, of fresh 2 MB pages 0.12 s, of touched memory 0.04 s. The batched algorithms allocate their
// temporaries per level and phase, so without a cache every compression paid that again (two thirds
// of a 1.7 s orthogonalization). Freed blocks are kept for later requests, as the CUDA space's
// stream-ordered pool does, up to a limit (cache_limit) per context: each thread's default context has
// its own. A request takes the smallest cached block that holds it; on Linux a larger one is split
// (the rest stays cached), fresh memory comes in whole huge pages whose rest is cached the same way,
// and freed neighbours merge, so that an algorithm whose temporaries shrink from level to level (HARA's
// leaves to its root) reuses touched memory instead of faulting in fresh pages (a fifth to a third of
// HARA's time before). Blocks down to 64 KB come from here: below 4 MB the heap gave its memory back
// to the system and faulted it in again (glibc maps blocks from 128 KB on and trims its top): 5-10% of
// the H2 inverse's time at n = 2^12 and of HGEMV's with 16 vectors.
// Under AddressSanitizer the cache is off, so that every block stays visible to it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define H2EXPR_HOST_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H2EXPR_HOST_POOL 0
#endif
#endif
#if !defined(H2EXPR_HOST_POOL)
#define H2EXPR_HOST_POOL 1
#endif

namespace h2expr::detail {

// The memory the system can still give (Linux's MemAvailable: free and reclaimable pages); the
// largest size_t where it cannot be read.
inline std::size_t system_available_memory() noexcept {
  std::size_t bytes = std::numeric_limits<std::size_t>::max();
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[128];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        bytes = std::size_t(kb) * 1024;
        break;
      }
    std::fclose(f);
  }
#endif
  return bytes;
}

class host_pool {
 public:
  static constexpr std::size_t page = std::size_t(2) << 20;  // a huge page: what fresh mappings are made of

  // Whether cached blocks are split and merged (where parts of one mapping can be unmapped alone).
#if defined(__linux__)
  static constexpr bool splits = true;
#else
  static constexpr bool splits = false;
#endif
  // Blocks are multiples of `grain`. Where blocks split, a fresh mapping's rest past a request is cached,
  // so small blocks share huge pages; elsewhere each block is its own mapping of whole huge pages, and
  // only requests from two of them on (where rounding up wastes less than half) come here.
  static constexpr std::size_t grain = splits ? std::size_t(64) << 10 : page;
  static constexpr std::size_t min_bytes = splits ? grain : 2 * page;
  // Whether a request of `bytes` goes through the pool (the same answer when it is freed); smaller ones
  // go to the ordinary heap, which recycles them itself.
  static constexpr bool serves(std::size_t bytes) { return H2EXPR_HOST_POOL && bytes >= min_bytes; }

  using available_fn = std::size_t (*)() noexcept;
  // `available`: what the system can still give (a test's stand-in for system_available_memory).
  explicit host_pool(available_fn available = system_available_memory)
      : limit_(physical_memory() / 8), available_(available) {}
  host_pool(const host_pool&) = delete;
  host_pool& operator=(const host_pool&) = delete;
  ~host_pool() { release(0); }

  // A block of at least `bytes` (serves(bytes)), aligned to a grain: the front of the smallest cached
  // block that holds it (without splitting: one at most a quarter larger), or of a fresh mapping.
  // Throws std::bad_alloc.
  void* allocate(std::size_t bytes) {
    const std::size_t size = (bytes + grain - 1) / grain * grain;
    {
      std::lock_guard<std::mutex> lock(m_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && (splits || it->first <= size + size / 4)) {
        char* p = static_cast<char*>(it->second);
        const std::size_t have = it->first, take = splits ? size : have;
        used_.emplace(p, take);  // may throw: nothing changed yet
        forget(it);
        if (have > take) remember(p + take, have - take);
        return p;
      }
    }
    const std::size_t fresh = (size + page - 1) / page * page;
    // What the cache holds counts as available (memory_available, which algorithms plan with), so
    // fresh pages must not come on top of it where the system is short: the cache keeps at most half of
    // what the system has left past them (its largest blocks go first). Pages are taken when first
    // written, so neither these nor those of blocks handed out before and not yet written are missing
    // from `avail` yet: the half is their margin. (The n = 2^17 inverse was killed with 3 GB cached.)
    if (const std::size_t avail = available_(); avail != std::numeric_limits<std::size_t>::max()) {
      const std::size_t keep = avail > fresh ? (avail - fresh) / 2 : 0;
      std::lock_guard<std::mutex> lock(m_);
      trim(keep);
    }
    void* p = map(fresh);
    if (!p) {  // the cache may hold what the system lacks
      release(0);
      p = map(fresh);
      if (!p) throw std::bad_alloc();
    }
    const std::size_t take = splits ? size : fresh;
    try {
      std::lock_guard<std::mutex> lock(m_);
      used_.emplace(p, take);
      if (fresh > take) remember(static_cast<char*>(p) + take, fresh - take), trim(limit_);
    } catch (...) {
      unmap(p, fresh);
      throw;
    }
    return p;
  }
  // Takes back a block of allocate(); the cache then gives up its largest blocks beyond the limit.
  void deallocate(void* p) noexcept {
    std::lock_guard<std::mutex> lock(m_);
    auto it = used_.find(p);
    if (it == used_.end()) return;  // not ours: cannot happen through buffer
    std::size_t size = it->second;
    used_.erase(it);
    char* q = static_cast<char*>(p);
    if (splits) {  // merge with free neighbours
      auto next = at_.find(q + size);
      if (next != at_.end()) size += next->second, forget(by_size(next));
      auto prev = at_.lower_bound(q);
      if (prev != at_.begin() && static_cast<char*>((--prev)->first) + prev->second == q)
        q = static_cast<char*>(prev->first), size += prev->second, forget(by_size(prev));
    }
    remember(q, size);
    trim(limit_);
  }
  // Returns cached blocks to the system until at most `keep` bytes stay cached.
  void release(std::size_t keep) noexcept {
    std::lock_guard<std::mutex> lock(m_);
    trim(keep);
  }
  std::size_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(m_);
    return cached_;
  }
  std::size_t limit() const {
    std::lock_guard<std::mutex> lock(m_);
    return limit_;
  }
  void set_limit(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(m_);
      limit_ = bytes;
    }
    release(bytes);
  }

 private:
  static std::size_t physical_memory() {
#if defined(__linux__)
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) return std::size_t(pages) * std::size_t(size);
#endif
    return std::size_t(8) << 30;
  }
  // `size` bytes (a multiple of page) starting on a page boundary, huge pages advised; null on failure.
  static void* map(std::size_t size) noexcept {
#if defined(__linux__)
    void* raw = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto begin = reinterpret_cast<std::uintptr_t>(raw), aligned = (begin + page - 1) / page * page;
    if (aligned > begin) munmap(raw, aligned - begin);  // trim to the aligned range
    if (const std::uintptr_t end = begin + size + page; end > aligned + size)
      munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
#if defined(MADV_HUGEPAGE)
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint: fine if refused
#endif
    return reinterpret_cast<void*>(aligned);
#else
    return ::operator new(size, std::align_val_t(page), std::nothrow);
#endif
  }
  static void unmap(void* p, std::size_t size) noexcept {
#if defined(__linux__)
    munmap(p, size);
#else
    (void)size;
    ::operator delete(p, std::align_val_t(page));
#endif
  }

  // The cache's bookkeeping (under m_). Blocks enter both maps; a block that cannot be remembered
  // (no memory for the map node) goes back to the system.
  void remember(void* p, std::size_t size) noexcept {
    try {
      auto s = free_.emplace(size, p);
      try {
        at_.emplace(p, size);
      } catch (...) {
        free_.erase(s);
        throw;
      }
      cached_ += size;
    } catch (...) {
      unmap(p, size);
    }
  }
  std::multimap<std::size_t, void*>::iterator by_size(std::map<void*, std::size_t>::iterator a) {
    auto [first, last] = free_.equal_range(a->second);
    for (auto it = first; it != last; ++it)
      if (it->second == a->first) return it;
    return free_.end();  // cannot happen: both maps hold every cached block
  }
  void forget(std::multimap<std::size_t, void*>::iterator it) noexcept {
    cached_ -= it->first;
    at_.erase(it->second);
    free_.erase(it);
  }
  void trim(std::size_t keep) noexcept {
    while (cached_ > keep && !free_.empty()) {
      auto largest = std::prev(free_.end());
      void* p = largest->second;
      const std::size_t size = largest->first;
      forget(largest);
      unmap(p, size);
    }
  }

  mutable std::mutex m_;
  std::multimap<std::size_t, void*> free_;  // cached blocks by size
  std::map<void*, std::size_t> at_;         // the same blocks by address (for merging neighbours)
  std::map<void*, std::size_t> used_;       // blocks handed out, with their sizes
  std::size_t cached_ = 0, limit_;
  available_fn available_;
};

inline constexpr std::size_t host_alignment = 64;  // a cache line; enough for any SIMD width

// The host space's allocation rule: large blocks from the pool, small ones from the heap (which
// recycles them itself); host_free_bytes gives a block back by the same rule. Throws std::bad_alloc.
inline void* host_allocate_bytes(host_pool& pool, std::size_t bytes) {
  if (host_pool::serves(bytes)) return pool.allocate(bytes);
  return ::operator new[](bytes, std::align_val_t(host_alignment));
}
inline void host_free_bytes(host_pool& pool, void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (host_pool::serves(bytes)) pool.deallocate(p);
  else ::operator delete[](p, std::align_val_t(host_alignment));
}

}  // namespace h2expr::detail

#pragma once
// The context's side of workspace.hpp: the one block a context keeps for the temporaries of its calls,
// and whether a call holds it now. The context frees the block with itself.
#include <cstddef>
#include <mutex>

namespace h2expr::detail {

struct workspace_slot {
  struct taken {
    std::byte* block;
    std::size_t bytes;
  };
  std::mutex m;
  std::byte* block = nullptr;
  std::size_t bytes = 0;
  bool lent = false;

  // The block, handed over to the caller to free, when no call holds it (else nothing); m held.
  taken take_unlent() {
    if (lent) return {nullptr, 0};
    const taken t{block, bytes};
    block = nullptr, bytes = 0;
    return t;
  }
  // The same, taking the lock: a context's release of its idle memory.
  taken take_idle() {
    std::lock_guard<std::mutex> lock(m);
    return take_unlent();
  }
};

}  // namespace h2expr::detail

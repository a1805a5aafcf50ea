#pragma once
// The context's side of workspace.hpp: the one block a context keeps for the temporaries of its calls,
// and whether a call holds it now. The context frees the block with itself.
#include <cstddef>
#include <mutex>

namespace h2expr::detail {

struct workspace_slot {
  std::mutex m;
  std::byte* block = nullptr;
  std::size_t bytes = 0;
  bool lent = false;
};

}  // namespace h2expr::detail

#pragma once
// Launch shapes shared by the CUDA backend's batch kernels.
#include <algorithm>

namespace h2expr::detail {

// A batch's items in launches of at most 65,535 blocks along y (the grid's limit): f(first, items)
// launches items first .. first + items - 1.
template <class Launch>
void for_item_chunks(int count, Launch&& f) {
  constexpr int most = 65535;
  for (int first = 0; first < count; first += most) f(first, std::min(count - first, most));
}

}  // namespace h2expr::detail

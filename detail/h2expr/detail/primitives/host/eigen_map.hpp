#pragma once
// Eigen maps of column-major blocks with a leading dimension: how the host backend sees batch items.
#include <Eigen/Dense>

namespace h2expr::detail {

template <class T>
using dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using block_map = Eigen::Map<dense<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using const_block_map = Eigen::Map<const dense<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class T, class I>
block_map<T> map_block(T* p, I rows, I cols, I ld) {
  return block_map<T>(p, Eigen::Index(rows), Eigen::Index(cols), Eigen::OuterStride<>(ld > 0 ? ld : 1));
}
template <class T, class I>
const_block_map<T> map_block(const T* p, I rows, I cols, I ld) {
  return const_block_map<T>(p, Eigen::Index(rows), Eigen::Index(cols), Eigen::OuterStride<>(ld > 0 ? ld : 1));
}

}  // namespace h2expr::detail

#pragma once
// point_cloud<T, D>: the points a kernel matrix is built on, and grid generators.
// Defined in detail/h2expr/detail/structure/point_cloud.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/structure/point_cloud.hpp>

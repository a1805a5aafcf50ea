#pragma once
// structure<T>: cluster trees and the matrix tree of a hierarchical matrix, shareable.
// Defined in detail/h2expr/detail/structure/structure.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/structure/structure.hpp>

#pragma once
// Instances of batched ARA, from a batched sampler and from explicit blocks.
#include <h2expr/batched_ara.hpp>

#include "instances/primitives.hpp"
#include "instances/spaces.hpp"

#define H2EXPR_BATCHED_ARA_INSTANCES(kind, T, S)                                                           \
  kind ::h2expr::low_rank_batch<T, S> h2expr::batched_ara<T, S>(const ::h2expr::batched_sampler<T, S>&,  \
                                                                double, const ::h2expr::ara_options&);   \
  kind ::h2expr::low_rank_batch<T, S> h2expr::batched_ara<T, S>(const std::vector<::h2expr::matrix<T, S>>&, \
                                                                double, const ::h2expr::ara_options&);

H2EXPR_INSTANCES(H2EXPR_BATCHED_ARA_INSTANCES, extern template)

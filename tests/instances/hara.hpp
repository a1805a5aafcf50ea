#pragma once
// Instances of HARA (every hara(expression) ends in hara(sampler)) and of relative_error's probes.
#include <h2expr/hara.hpp>

#include "instances/h2_matrix.hpp"
#include "instances/spaces.hpp"

#define H2EXPR_HARA_INSTANCES(kind, T, S)                                                                  \
  kind ::h2expr::h2_matrix<T, S> h2expr::hara<T, S>(const ::h2expr::sampler<T, S>&, double,              \
                                                    const ::h2expr::hara_options<T>&);                    \
  kind ::h2expr::detail::probe_errors h2expr::detail::probe<T, S>(                                        \
      const ::h2expr::sampler<T, S>&, const ::h2expr::sampler<T, S>&, int, std::uint64_t);

H2EXPR_INSTANCES(H2EXPR_HARA_INSTANCES, extern template)

#pragma once
// h2expr: H2 hierarchical matrix algebra on CPUs and GPUs. The one header users include.
#include <h2expr/batched_ara.hpp>
#include <h2expr/batched_sampler.hpp>
#include <h2expr/build_options.hpp>
#include <h2expr/compress.hpp>
#include <h2expr/context.hpp>
#include <h2expr/error.hpp>
#include <h2expr/h2_matrix.hpp>
#include <h2expr/kernels.hpp>
#include <h2expr/orthogonalize.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/point_cloud.hpp>
#include <h2expr/space.hpp>
#include <h2expr/structure.hpp>
#include <h2expr/view.hpp>

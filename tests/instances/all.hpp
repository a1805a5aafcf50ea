#pragma once
// Every instance declaration: the project's examples and benchmarks get it as a forced include
// (h2expr_prebuilt_host/_cuda in tests/instances/CMakeLists.txt), so their sources stay what a user writes.
#include "instances/batched_ara.hpp"
#include "instances/hara.hpp"

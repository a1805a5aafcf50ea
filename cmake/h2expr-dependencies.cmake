# Finds the header-only dependencies of h2expr: Eigen 3.4 and Boost.Hana, and OpenMP when present.
# Used by the build and by the installed package config. Works with distribution packages and with a
# plain include folder (CMAKE_PREFIX_PATH=.deps from shared/tools/stage-deps.sh).
if(NOT TARGET Eigen3::Eigen)
  find_package(Eigen3 3.4 QUIET NO_MODULE)
endif()
if(NOT TARGET Eigen3::Eigen)
  find_path(H2EXPR_EIGEN_INCLUDE_DIR Eigen/Core PATH_SUFFIXES eigen3 REQUIRED)
  add_library(Eigen3::Eigen INTERFACE IMPORTED)
  set_target_properties(Eigen3::Eigen PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${H2EXPR_EIGEN_INCLUDE_DIR}")
endif()
if(NOT TARGET h2expr_deps::hana)
  find_path(H2EXPR_HANA_INCLUDE_DIR boost/hana.hpp REQUIRED)
  add_library(h2expr_deps::hana INTERFACE IMPORTED)
  set_target_properties(h2expr_deps::hana PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${H2EXPR_HANA_INCLUDE_DIR}")
endif()
if(NOT OpenMP_CXX_FOUND)
  find_package(OpenMP QUIET COMPONENTS CXX)
endif()

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

# CHOLMOD (SuiteSparse) for cholesky(S): a supernodal factorization on BLAS, when found. Its
# supernodal module is GPL-licensed, so it is an option; without it, cholesky uses Eigen's simplicial
# factorization (same API and errors, much slower on 3D problems).
# The installed package config defaults both options to what the package was built with, so a
# package built without CHOLMOD does not link it into its consumers.
if(NOT DEFINED h2expr_use_cholmod_default)
  set(h2expr_use_cholmod_default ON)
endif()
if(NOT DEFINED h2expr_use_openblas_default)
  set(h2expr_use_openblas_default ON)
endif()
option(H2EXPR_USE_CHOLMOD "cholesky(S) through SuiteSparse's CHOLMOD (GPL) when it is found" ${h2expr_use_cholmod_default})
if(H2EXPR_USE_CHOLMOD AND NOT TARGET CHOLMOD::CHOLMOD)
  set(h2expr_saved_module_path "${CMAKE_MODULE_PATH}")  # FindCHOLMOD.cmake lies beside this file
  list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
  find_package(CHOLMOD QUIET)
  set(CMAKE_MODULE_PATH "${h2expr_saved_module_path}")
endif()
# OpenBLAS for the host's dense products (detail/primitives/host/blas.hpp): it picks its kernels for the CPU at
# run time, so a build with the default flags (no -march) still runs AVX2/AVX-512 kernels. Found
# through its CMake config (Debian's libopenblas-dev, Fedora's openblas-devel); BSD-licensed.
option(H2EXPR_USE_OPENBLAS "Host dense products through OpenBLAS when it is found" ${h2expr_use_openblas_default})
if(H2EXPR_USE_OPENBLAS AND NOT TARGET h2expr_deps::openblas)
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND AND OpenBLAS_LIBRARIES AND EXISTS "${OpenBLAS_INCLUDE_DIRS}/cblas.h")
    add_library(h2expr_deps::openblas INTERFACE IMPORTED)
    set_target_properties(h2expr_deps::openblas PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
                          INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
  endif()
endif()

# Adds the optional dependencies found above to an interface target (the build's h2expr, or the
# installed h2expr::h2expr): CHOLMOD and OpenBLAS, each with the definition that turns it on.
function(h2expr_link_optional target)
  get_target_property(defined ${target} INTERFACE_COMPILE_DEFINITIONS)
  if(defined AND ("H2EXPR_HAS_CHOLMOD" IN_LIST defined OR "H2EXPR_HAS_OPENBLAS" IN_LIST defined))
    return()  # a second find_package(h2expr)
  endif()
  if(H2EXPR_USE_CHOLMOD AND TARGET CHOLMOD::CHOLMOD)
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_LIBRARIES CHOLMOD::CHOLMOD)
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS H2EXPR_HAS_CHOLMOD)
  endif()
  if(H2EXPR_USE_OPENBLAS AND TARGET h2expr_deps::openblas)
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_LIBRARIES h2expr_deps::openblas)
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS H2EXPR_HAS_OPENBLAS)
  endif()
endfunction()

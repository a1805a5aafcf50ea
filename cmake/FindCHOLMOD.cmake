# FindCHOLMOD: SuiteSparse's CHOLMOD (sparse Cholesky), for h2expr's supernodal factorization.
# Debian's libsuitesparse-dev (SuiteSparse 5) ships no CMake config; SuiteSparse 7 does, and is
# preferred where found. Defines CHOLMOD_FOUND and the imported target CHOLMOD::CHOLMOD.
if(TARGET CHOLMOD::CHOLMOD)
  set(CHOLMOD_FOUND TRUE)
  return()
endif()
find_package(CHOLMOD CONFIG QUIET NAMES CHOLMOD)  # SuiteSparse >= 7: SuiteSparse::CHOLMOD
if(TARGET SuiteSparse::CHOLMOD)
  add_library(CHOLMOD::CHOLMOD INTERFACE IMPORTED)
  set_target_properties(CHOLMOD::CHOLMOD PROPERTIES INTERFACE_LINK_LIBRARIES SuiteSparse::CHOLMOD)
  set(CHOLMOD_FOUND TRUE)
  return()
endif()
find_path(CHOLMOD_INCLUDE_DIR cholmod.h PATH_SUFFIXES suitesparse)
find_library(CHOLMOD_LIBRARY cholmod)
# The shared library pulls in SuiteSparse_config, AMD, COLAMD and BLAS/LAPACK itself; name
# SuiteSparse_config for static builds and linkers that want every symbol's owner named.
find_library(CHOLMOD_SUITESPARSECONFIG_LIBRARY suitesparseconfig)
mark_as_advanced(CHOLMOD_INCLUDE_DIR CHOLMOD_LIBRARY CHOLMOD_SUITESPARSECONFIG_LIBRARY)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CHOLMOD REQUIRED_VARS CHOLMOD_LIBRARY CHOLMOD_INCLUDE_DIR)
if(CHOLMOD_FOUND)
  add_library(CHOLMOD::CHOLMOD UNKNOWN IMPORTED)
  set_target_properties(CHOLMOD::CHOLMOD PROPERTIES IMPORTED_LOCATION "${CHOLMOD_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CHOLMOD_INCLUDE_DIR}")
  if(CHOLMOD_SUITESPARSECONFIG_LIBRARY)
    set_property(TARGET CHOLMOD::CHOLMOD APPEND PROPERTY INTERFACE_LINK_LIBRARIES "${CHOLMOD_SUITESPARSECONFIG_LIBRARY}")
  endif()
endif()

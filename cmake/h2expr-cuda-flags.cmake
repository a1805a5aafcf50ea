# Flags and libraries of the CUDA space, for the build tree's h2expr::cuda and the installed one.
function(h2expr_configure_cuda_target target)
  # C++20 for nvcc as an option: CMake 3.25 does not know the compile features of nvcc 13.
  target_compile_options(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
  target_link_libraries(${target} INTERFACE CUDA::cudart CUDA::cublas CUDA::cusolver CUDA::curand CUDA::cusparse)
  target_compile_options(${target} INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda --expt-relaxed-constexpr -diag-suppress=20012>)
  # Eigen is host-only in h2expr: keep it from annotating its functions for the device.
  target_compile_definitions(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:EIGEN_NO_CUDA>)
endfunction()

# CUDA tests. Those labelled gpu exit 77 ("SKIP: ...") where the device they need is absent, which
# CTest reports as skipped, never as passed. Built only with the CUDA backend (cmake/cuda.cmake).
if(VECANNEAL_HAVE_CUDA AND VECANNEAL_CUDA_SOURCES_ADDED)
  # cuBLAS opened at first use: needs no device, so it is not labelled gpu and runs everywhere.
  add_executable(test_cuda_blas ${VA_TEST_DIR}/cuda/test_cuda_blas.cu)
  target_link_libraries(test_cuda_blas PRIVATE vecanneal_core)
  target_include_directories(test_cuda_blas PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  add_test(NAME cuda_blas_load COMMAND test_cuda_blas)
  set_tests_properties(cuda_blas_load PROPERTIES TIMEOUT 120)

  add_executable(test_cuda_kernels ${VA_TEST_DIR}/cuda/test_cuda_kernels.c)
  target_link_libraries(test_cuda_kernels PRIVATE vecanneal_core)
  add_test(NAME cuda_kernels COMMAND test_cuda_kernels)
  set_tests_properties(cuda_kernels PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

  if(VECANNEAL_HAVE_NCCL)
    add_executable(test_nccl ${VA_TEST_DIR}/cuda/test_nccl.c)
    target_link_libraries(test_nccl PRIVATE vecanneal_core)
    # Two ranks, one GPU each: skipped (77) on machines with fewer than two devices.
    add_test(NAME cuda_nccl_allreduce
             COMMAND ${VA_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_nccl> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(cuda_nccl_allreduce PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;NCCL_NVLS_ENABLE=0")
  endif()
endif()

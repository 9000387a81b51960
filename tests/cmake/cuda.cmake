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
  target_link_libraries(test_cuda_kernels PRIVATE vecanneal_cuda_probe vecanneal_core)
  add_test(NAME cuda_kernels COMMAND test_cuda_kernels)
  set_tests_properties(cuda_kernels PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

  # The GPU search engine against the CPU engine, bit for bit (backend/search.h, cuda/search.cu).
  add_executable(test_search_cuda ${VA_TEST_DIR}/cuda/test_search_cuda.c)
  target_link_libraries(test_search_cuda PRIVATE vecanneal_core)
  add_test(NAME cuda_search COMMAND test_search_cuda)
  set_tests_properties(cuda_search PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

  # The GPU engine's scan on PQ codes against the CPU engine's, bit for bit (cuda/pq_search.cu).
  add_executable(test_pq_search_cuda ${VA_TEST_DIR}/cuda/test_pq_search_cuda.c)
  target_link_libraries(test_pq_search_cuda PRIVATE vecanneal_core)
  add_test(NAME cuda_pq_search COMMAND test_pq_search_cuda)
  set_tests_properties(cuda_pq_search PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

  # The device PQ encoder against the host path, bit for bit (cuda/pq_encode.cu).
  add_executable(test_pq_encode_cuda ${VA_TEST_DIR}/cuda/test_pq_encode_cuda.c)
  target_link_libraries(test_pq_encode_cuda PRIVATE vecanneal_core)
  add_test(NAME cuda_pq_encode COMMAND test_pq_encode_cuda)
  set_tests_properties(cuda_pq_encode PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

  # The hooks of src/cuda/probe.h (vecanneal_cuda_probe) stay out of the shipped code: neither the
  # executable nor vecanneal_core defines or references one of them. Needs no device.
  add_test(NAME source_cuda_probe_apart COMMAND sh -c "for f in $<TARGET_FILE:vecanneal> $<TARGET_FILE:vecanneal_core>; do nm -C \"$f\" > /dev/null || exit 1; if nm -C \"$f\" | grep -E 'va_cuda_(bench_|debug_|set_assign_variant|set_stats_variant|set_fused_config|set_gemm_rows)|mma_peak_kernel|poison_kernel'; then echo \"FAIL: $f carries test and benchmark hooks\"; exit 1; fi; done")
  set_tests_properties(source_cuda_probe_apart PROPERTIES LABELS "cpu;source" TIMEOUT 60)

  if(VECANNEAL_HAVE_NCCL)
    add_executable(test_nccl ${VA_TEST_DIR}/cuda/test_nccl.c)
    target_link_libraries(test_nccl PRIVATE vecanneal_core)
    # 1, 2, 3 and 4 ranks, one GPU each: a run is skipped (77) where the node has fewer devices than
    # ranks, so a one-GPU machine still runs the wrapper through a one-rank communicator.
    foreach(ranks 1 2 3 4)
      add_test(NAME cuda_nccl_allreduce_${ranks}
               COMMAND ${VA_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_nccl> ${MPIEXEC_POSTFLAGS})
      set_tests_properties(cuda_nccl_allreduce_${ranks} PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300
        ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;NCCL_NVLS_ENABLE=0")
    endforeach()
  endif()
endif()

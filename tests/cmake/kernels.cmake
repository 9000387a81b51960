# Unit tests of the CPU kernels, the update rule and maintenance against plain references.
add_executable(test_kernels ${VA_TEST_DIR}/unit/test_kernels.c)
target_link_libraries(test_kernels PRIVATE vecanneal_core)
add_test(NAME kernels_cpu COMMAND test_kernels)
set_tests_properties(kernels_cpu PROPERTIES LABELS "cpu" TIMEOUT 120)

add_executable(test_maintenance ${VA_TEST_DIR}/unit/test_maintenance.c)
target_link_libraries(test_maintenance PRIVATE vecanneal_core)
add_test(NAME maintenance_cpu COMMAND test_maintenance)
set_tests_properties(maintenance_cpu PROPERTIES LABELS "cpu" TIMEOUT 120
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# The read into caller-handed buffers (a GPU job's read into its staging buffers or pinned copy) against the
# whole-shard read, on 1-4 ranks (collective transfers where the HDF5 is parallel).
add_executable(test_read ${VA_TEST_DIR}/unit/test_read.c)
target_link_libraries(test_read PRIVATE vecanneal_core)
foreach(p 1 2 3 4)
  add_test(NAME read_into_np${p} COMMAND ${VA_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} ${p} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_read> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(read_into_np${p} PROPERTIES LABELS "cpu;mpi" TIMEOUT 120
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()

# The search kernels (cpu/search.h): the AVX2 distance bitwise the portable one, both against the double
# reference; the top-k heap, the scan (thread and shard invariance) and the probe.
add_executable(test_search ${VA_TEST_DIR}/unit/test_search.c)
target_link_libraries(test_search PRIVATE vecanneal_core)
add_test(NAME search_kernels_cpu COMMAND test_search)
set_tests_properties(search_kernels_cpu PROPERTIES LABELS "cpu" TIMEOUT 120)

# Residual product quantization (cpu/pq.h, docs/codes.md): the encoder against its double reference, thread
# invariance, ties to the lower code, the subspace split. tests/jobs/codes.sh runs the same program on indexes.
add_executable(test_pq ${VA_TEST_DIR}/unit/test_pq.c)
target_link_libraries(test_pq PRIVATE vecanneal_core)
add_test(NAME pq_kernels_cpu COMMAND test_pq)
set_tests_properties(pq_kernels_cpu PROPERTIES LABELS "cpu" TIMEOUT 120
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# Search on PQ codes (cpu/pq_search.h, docs/search.md "Search on codes"): the tables and scanned distances
# bitwise their recipe and within tolerance of the decoding reference, the list scan the same for 1-3 threads.
add_executable(test_pq_search ${VA_TEST_DIR}/unit/test_pq_search.c)
target_link_libraries(test_pq_search PRIVATE vecanneal_core)
add_test(NAME pq_search_kernels_cpu COMMAND test_pq_search)
set_tests_properties(pq_search_kernels_cpu PROPERTIES LABELS "cpu" TIMEOUT 120
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# The choice of a rank's GPU before the CUDA driver starts (backend/visible.h): device-file counts and
# CUDA_VISIBLE_DEVICES lists, no GPU needed.
add_executable(test_visible ${VA_TEST_DIR}/unit/test_visible.c)
target_link_libraries(test_visible PRIVATE vecanneal_core)
add_test(NAME visible_gpus COMMAND test_visible)
set_tests_properties(visible_gpus PROPERTIES LABELS "cpu" TIMEOUT 60)

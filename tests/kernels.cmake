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

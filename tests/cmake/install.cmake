# The install rules (cmake/install.cmake): install this build tree into a fresh prefix and run the
# installed binary and Slurm script there, away from the source tree.
add_test(NAME install_prefix COMMAND bash ${VA_TEST_DIR}/jobs/install.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/install_prefix)
set_tests_properties(install_prefix PROPERTIES LABELS "cpu;mpi" TIMEOUT 300)
# The build as a cluster user configures it: another BLAS (BLA_VENDOR) and no tests (BUILD_TESTING=OFF).
add_test(NAME blas_vendor COMMAND bash ${VA_TEST_DIR}/jobs/blas_vendor.sh ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/blas_vendor)
set_tests_properties(blas_vendor PROPERTIES LABELS "cpu;mpi" TIMEOUT 600 SKIP_RETURN_CODE 77)

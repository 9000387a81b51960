# Sanitizer and valgrind tests (label sanitize; docs/testing.md).
#  sanitize_asan_ubsan: configures and builds a second tree, ${CMAKE_BINARY_DIR}/asan, with
#    -DVECANNEAL_SANITIZE=ON (ASan + UBSan) -DVECANNEAL_CUDA=OFF and runs its cpu|mpi tests with
#    every sanitizer report fatal and collected (tests/sanitize/asan_tree.sh).
#  sanitize_valgrind: a short single-rank compress (and gen, info) under valgrind memcheck
#    (tests/sanitize/valgrind.sh); SKIP (77) when valgrind is not installed.
# Not registered inside the sanitizer tree itself (no recursion).
if(VECANNEAL_SANITIZE)
  return()
endif()
set(VECANNEAL_SANITIZE_EXCLUDE "serial_hdf5_build|reliability_memory" CACHE STRING
    "Regex of tests the sanitizer tree does not run (serial_hdf5_build builds a third, unsanitized tree)")
add_test(NAME sanitize_asan_ubsan
         COMMAND bash ${VA_TEST_DIR}/sanitize/asan_tree.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/asan
                 "${VECANNEAL_SANITIZE_EXCLUDE}")
set_tests_properties(sanitize_asan_ubsan PROPERTIES LABELS sanitize TIMEOUT 1500 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
add_test(NAME sanitize_valgrind
         COMMAND bash ${VA_TEST_DIR}/sanitize/valgrind.sh $<TARGET_FILE:vecanneal> ${CMAKE_BINARY_DIR}/testwork/valgrind)
set_tests_properties(sanitize_valgrind PROPERTIES LABELS sanitize TIMEOUT 600 SKIP_RETURN_CODE 77)

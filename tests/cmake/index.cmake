# The index file (docs/index-format.md): format 2's self-description, info on a format-1 file, and the
# Python reader (python/vecanneal_index.py) with its faiss export. Uses va_job_test and h5tool of jobs.cmake.
va_job_test(index_format index_format.sh)
set_tests_properties(index_format PROPERTIES LABELS "cpu;mpi" TIMEOUT 300)
# SKIP (77) only for the faiss part, when faiss cannot be imported; the reader's checks run first.
add_test(NAME python_index_reader COMMAND python3 ${VA_TEST_DIR}/python/test_index_reader.py
  --vecanneal $<TARGET_FILE:vecanneal> --source ${CMAKE_SOURCE_DIR}
  --work ${CMAKE_BINARY_DIR}/testwork/python_index_reader)
set_tests_properties(python_index_reader PROPERTIES LABELS "cpu" TIMEOUT 600 SKIP_RETURN_CODE 77)

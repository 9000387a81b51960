# Checks of the source tree itself (label source): no include loops between modules, the layout.
add_test(NAME source_include_cycles COMMAND python3 ${VA_TEST_DIR}/tools/include_cycles.py ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(source_include_cycles PROPERTIES LABELS "cpu;source" TIMEOUT 60)
# Every C/C++/CUDA file laid out by .clang-format (SKIP without clang-format 14).
add_test(NAME source_format COMMAND bash ${VA_TEST_DIR}/tools/format_check.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(source_format PROPERTIES LABELS "cpu;source" TIMEOUT 300 SKIP_RETURN_CODE 77)
# docs/config.md is the key table as markdown: generated, and kept so.
add_executable(config_doc ${VA_TEST_DIR}/tools/config_doc.c)
target_link_libraries(config_doc PRIVATE vecanneal_core)
add_test(NAME config_doc COMMAND sh -c "$<TARGET_FILE:config_doc> | diff - ${CMAKE_SOURCE_DIR}/docs/config.md")
set_tests_properties(config_doc PROPERTIES LABELS "cpu;source" TIMEOUT 60)
# The hardware seam: job/ and core/ see no CUDA or NCCL (headers, ifdefs, va_cuda_ calls); the backend/
# layer does (backend/encoder.h holds the embedding job's choice between its CPU and GPU encoders).
add_test(NAME source_backend_seam COMMAND sh -c "! grep -lE '#[[:space:]]*if.*VECANNEAL_(CUDA|NCCL)|#include \"cuda/|#include <cuda|#include <nccl|va_cuda_[a-z_]*\\(' ${CMAKE_SOURCE_DIR}/src/core/* ${CMAKE_SOURCE_DIR}/src/job/*")
set_tests_properties(source_backend_seam PROPERTIES LABELS "cpu;source" TIMEOUT 60)
# scripts/visible-gpus, by which the GPU tests and benchmarks count their devices.
add_test(NAME scripts_visible_gpus COMMAND bash ${VA_TEST_DIR}/tools/visible_gpus_check.sh ${CMAKE_SOURCE_DIR}/scripts)
set_tests_properties(scripts_visible_gpus PROPERTIES LABELS "cpu;source" TIMEOUT 60)

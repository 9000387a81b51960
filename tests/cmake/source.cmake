# Checks of the source tree itself (label source): no include loops between modules, the layout.
add_test(NAME source_include_cycles COMMAND python3 ${VA_TEST_DIR}/tools/include_cycles.py ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(source_include_cycles PROPERTIES LABELS "cpu;source" TIMEOUT 60)
# Every C/C++/CUDA file laid out by .clang-format (SKIP without clang-format 14).
add_test(NAME source_format COMMAND bash ${VA_TEST_DIR}/tools/format_check.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(source_format PROPERTIES LABELS "cpu;source" TIMEOUT 300 SKIP_RETURN_CODE 77)

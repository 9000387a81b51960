# Fuzzing (docs/testing.md). Two kinds of tests:
#  - label fuzz: libFuzzer harnesses (tests/fuzz/fuzz_*.c), built at test time with clang by
#    tests/fuzz/run_fuzz.sh (fuzz_build; SKIP, exit 77, without clang + libclang-rt), each fuzzed for
#    VECANNEAL_FUZZ_SECONDS from its committed corpus (fuzz_<target>; fails on any finding in our
#    code, faults inside libhdf5 are listed but do not fail), and every committed corpus/regression
#    input replayed under the libFuzzer build (fuzz_regressions).
#  - labels cpu;fuzz: the same harnesses with a plain main() (tests/fuzz/replay_main.c), built here
#    with the project's compiler, replaying the committed corpus and regressions, and the expected
#    verdicts on the committed HDF5 files (h5probe.expect). Cheap (seconds), need no clang, and run
#    under ASan/UBSan too in the sanitizer tree (test sanitize_asan_ubsan runs its cpu tests).
set(VA_FUZZ_DIR ${VA_TEST_DIR}/fuzz)

# --- plain replay drivers ---------------------------------------------------------------------------
function(va_fuzz_replay target)
  add_executable(replay_${target} ${VA_FUZZ_DIR}/replay_main.c ${VA_FUZZ_DIR}/fuzz_${target}.c ${ARGN})
  target_link_libraries(replay_${target} PRIVATE vecanneal_core)
  target_compile_definitions(replay_${target} PRIVATE VA_FUZZ_DIR="${VA_FUZZ_DIR}")
  add_test(NAME fuzz_replay_${target} COMMAND replay_${target} ${VA_FUZZ_DIR}/regressions/${target} ${VA_FUZZ_DIR}/corpus/${target})
  set_tests_properties(fuzz_replay_${target} PROPERTIES LABELS "cpu;fuzz" TIMEOUT 120)
endfunction()
va_fuzz_replay(config_file)
va_fuzz_replay(config_kv)
va_fuzz_replay(h5probe)
va_fuzz_replay(vecfile)
# The embed parsers (tokenizer, vocab.txt, JSON, safetensors): part of vecanneal_core when
# cmake/embed.cmake adds them (VA_EMBED_SOURCES), else compiled in from src/embed when present.
set(_embed ${CMAKE_SOURCE_DIR}/src/embed)
set(VA_FUZZ_EMBED OFF)
if(EXISTS ${_embed}/tokenizer.c AND EXISTS ${_embed}/unicode_tables.c AND EXISTS ${_embed}/json.c AND EXISTS ${_embed}/safetensors.c)
  set(VA_FUZZ_EMBED ON)
  if(DEFINED VA_EMBED_SOURCES)
    set(_tok "")
    set(_json "")
    set(_st "")
  else()
    set(_tok ${_embed}/tokenizer.c ${_embed}/unicode_tables.c)
    set(_json ${_embed}/json.c)
    set(_st ${_embed}/safetensors.c)
  endif()
  va_fuzz_replay(tokenizer ${_tok})
  va_fuzz_replay(vocab ${_tok})
  va_fuzz_replay(json ${_json} ${_tok})
  va_fuzz_replay(safetensors ${_st} ${_json} ${_tok})
endif()
add_executable(h5probe_expect ${VA_FUZZ_DIR}/h5probe_expect.c)
target_link_libraries(h5probe_expect PRIVATE vecanneal_core)
add_test(NAME fuzz_h5probe_expect COMMAND h5probe_expect ${VA_FUZZ_DIR})
set_tests_properties(fuzz_h5probe_expect PROPERTIES LABELS "cpu;fuzz" TIMEOUT 120)
# The fuzz runs' crash triage (ours vs libhdf5's) on stored reports.
add_test(NAME fuzz_classify COMMAND bash ${VA_FUZZ_DIR}/classify/check.sh)
set_tests_properties(fuzz_classify PROPERTIES LABELS "cpu;fuzz" TIMEOUT 60)

# --- libFuzzer runs (label fuzz) ------------------------------------------------------------------
# Not in the sanitizer tree (it runs only cpu|mpi tests, and the libFuzzer build has its own sanitizers).
if(VECANNEAL_SANITIZE)
  return()
endif()
set(VECANNEAL_FUZZ_SECONDS 25 CACHE STRING "Seconds each fuzz_<target> test fuzzes (libFuzzer -max_total_time)")
set(VA_FUZZ_OUT ${CMAKE_BINARY_DIR}/fuzz)
# The HDF5 and MPI this project was configured with, for the clang build of the h5probe harness.
set(_cflags "")
foreach(d IN LISTS HDF5_INCLUDE_DIRS MPI_C_INCLUDE_DIRS)
  string(APPEND _cflags " -I${d}")
endforeach()
foreach(d IN LISTS HDF5_DEFINITIONS MPI_C_COMPILE_OPTIONS)
  string(APPEND _cflags " ${d}")
endforeach()
foreach(d IN LISTS MPI_C_COMPILE_DEFINITIONS)
  string(APPEND _cflags " -D${d}")
endforeach()
if(HDF5_IS_PARALLEL)
  string(APPEND _cflags " -DVECANNEAL_PARALLEL_HDF5=1")
endif()
string(JOIN " " _libs ${HDF5_C_LIBRARIES} ${MPI_C_LIBRARIES})
file(WRITE ${VA_FUZZ_OUT}/toolchain.env "FUZZ_H5_CFLAGS='${_cflags}'\nFUZZ_H5_LIBS='${_libs}'\n")

set(VA_FUZZ_RUN bash ${VA_FUZZ_DIR}/run_fuzz.sh)
add_test(NAME fuzz_build COMMAND ${VA_FUZZ_RUN} build ${VA_FUZZ_OUT})
set_tests_properties(fuzz_build PROPERTIES LABELS fuzz TIMEOUT 300 SKIP_RETURN_CODE 77 FIXTURES_SETUP va_fuzz_bins)
set(_targets config_file config_kv h5probe vecfile)
if(VA_FUZZ_EMBED)
  list(APPEND _targets tokenizer vocab json safetensors)
endif()
foreach(t IN LISTS _targets)
  add_test(NAME fuzz_${t} COMMAND ${VA_FUZZ_RUN} run ${VA_FUZZ_OUT} ${t} ${VECANNEAL_FUZZ_SECONDS})
  # h5probe (fork mode) finishes its last job after the time limit; then every saved input is replayed.
  math(EXPR _timeout "${VECANNEAL_FUZZ_SECONDS} * 2 + 120")
  set_tests_properties(fuzz_${t} PROPERTIES LABELS fuzz TIMEOUT ${_timeout} SKIP_RETURN_CODE 77
                       FIXTURES_REQUIRED va_fuzz_bins)
endforeach()
add_test(NAME fuzz_regressions COMMAND ${VA_FUZZ_RUN} replay ${VA_FUZZ_OUT})
set_tests_properties(fuzz_regressions PROPERTIES LABELS fuzz TIMEOUT 300 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED va_fuzz_bins)

# CTest registrations. Labels: cpu (plain), mpi (runs mpirun), gpu (SKIP without a device), slurm,
# reliability (failure classes), fuzz, sanitize, embed, soak, source (checks of the source tree).
# Each concern registers its tests in its own file next to this one.
get_filename_component(VA_TEST_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(VA_MPIEXEC ${MPIEXEC_EXECUTABLE})
foreach(part source kernels jobs index install slurm embed cuda sanitize fuzz)
  include(${CMAKE_CURRENT_LIST_DIR}/${part}.cmake)
endforeach()
# The gpu tests share the machine's GPUs, and gpu_backend reads a device's free memory as its jobs' use:
# `ctest -j` runs them one at a time (a shared resource lock), beside the other tests.
get_property(va_all_tests DIRECTORY PROPERTY TESTS)
foreach(test ${va_all_tests})
  get_test_property(${test} LABELS labels)
  if(labels MATCHES "gpu")
    set_tests_properties(${test} PROPERTIES RESOURCE_LOCK gpu)
  endif()
endforeach()

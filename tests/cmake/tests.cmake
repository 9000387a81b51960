# CTest registrations. Labels: cpu (plain), mpi (runs mpirun), gpu (SKIP without a device), slurm,
# reliability (failure classes), fuzz, sanitize, embed, soak, source (checks of the source tree).
# Each concern registers its tests in its own file next to this one.
get_filename_component(VA_TEST_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(VA_MPIEXEC ${MPIEXEC_EXECUTABLE})
foreach(part source kernels jobs index install slurm embed cuda sanitize fuzz)
  include(${CMAKE_CURRENT_LIST_DIR}/${part}.cmake)
endforeach()

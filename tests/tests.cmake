# CTest registrations. Labels: cpu (plain), mpi (runs mpirun), gpu (SKIP without a device), slurm.
# Each concern registers its tests in its own file next to this one.
set(VA_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
set(VA_MPIEXEC ${MPIEXEC_EXECUTABLE})
foreach(part kernels jobs badinput slurm embed cuda sanitize fuzz)
  include(${VA_TEST_DIR}/${part}.cmake OPTIONAL)
endforeach()

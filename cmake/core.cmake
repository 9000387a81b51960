# Core library and the vecanneal executable (CPU backend; CUDA sources join when VECANNEAL_HAVE_CUDA).
add_library(vecanneal_core STATIC
  src/util.c src/stop.c src/files.c src/checksum.c src/memlimit.c src/stall.c src/config.c src/h5io.c src/gen.c src/init.c src/anneal.c src/compress.c
  src/index.c src/info.c src/metrics.c src/checkpoint.c src/backend_cpu.c
  src/dist/comm.c
  src/kernels/cpu_assign.c src/kernels/cpu_stats.c)
target_include_directories(vecanneal_core PUBLIC src ${CBLAS_INCLUDE_DIR} ${HDF5_INCLUDE_DIRS})
target_compile_definitions(vecanneal_core PUBLIC ${HDF5_DEFINITIONS}
  VECANNEAL_VERSION="${PROJECT_VERSION}"
  $<$<BOOL:${HDF5_IS_PARALLEL}>:VECANNEAL_PARALLEL_HDF5=1>
  $<$<BOOL:${OpenMP_C_FOUND}>:VECANNEAL_OPENMP=1>)
target_link_libraries(vecanneal_core PUBLIC MPI::MPI_C ${HDF5_C_LIBRARIES} ${BLAS_LIBRARIES} Threads::Threads m)
if(OpenMP_C_FOUND)
  target_link_libraries(vecanneal_core PUBLIC OpenMP::OpenMP_C)
endif()

add_executable(vecanneal src/main.c)
target_link_libraries(vecanneal PRIVATE vecanneal_core)

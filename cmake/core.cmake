# Core library and the vecanneal executable (CPU backend; CUDA sources join when VECANNEAL_HAVE_CUDA).
add_library(vecanneal_core STATIC
  src/util/util.c src/util/checksum.c src/util/memlimit.c src/util/stall.c src/util/json.c src/util/heartbeat.c src/util/format.c
  src/core/config.c src/core/stop.c src/core/metrics.c src/core/init.c src/core/anneal.c src/core/checkpoint.c src/core/pq.c
  src/core/sample.c
  src/io/files.c src/io/h5io.c src/io/vecfile.c src/io/index.c
  src/comm/comm.c
  src/cpu/assign.c src/cpu/stats.c src/cpu/pq.c
  src/backend/cpu.c src/backend/plan.c src/backend/rows.c src/backend/visible.c
  src/job/compress.c src/job/codes.c src/job/gen.c src/job/info.c
  src/comm/topk.c src/cpu/search.c src/backend/search.c src/job/search.c src/cli/search.c src/cpu/pq_search.c src/job/search_codes.c
  src/io/index_read.c src/io/index_add.c src/job/nearest.c src/job/assign.c src/job/add.c
  src/cli/index_args.c src/cli/assign.c src/cli/add.c
  src/cli/options.c src/cli/compress.c src/cli/gen.c src/cli/info.c)
# HDF5 through its imported target where FindHDF5 makes one (CMake 3.19+ does for the C component).
if(TARGET hdf5::hdf5)
  set(VA_HDF5 hdf5::hdf5)
else()
  set(VA_HDF5 ${HDF5_C_LIBRARIES})
endif()
target_include_directories(vecanneal_core PUBLIC src ${CBLAS_INCLUDE_DIR} ${HDF5_INCLUDE_DIRS})
target_compile_definitions(vecanneal_core PUBLIC ${HDF5_DEFINITIONS}
  VECANNEAL_VERSION="${PROJECT_VERSION}"
  $<$<BOOL:${HDF5_IS_PARALLEL}>:VECANNEAL_PARALLEL_HDF5=1>
  $<$<BOOL:${OpenMP_C_FOUND}>:VECANNEAL_OPENMP=1>)
target_link_libraries(vecanneal_core PUBLIC MPI::MPI_C ${VA_HDF5} BLAS::BLAS Threads::Threads m)
if(OpenMP_C_FOUND)
  target_link_libraries(vecanneal_core PUBLIC OpenMP::OpenMP_C)
endif()

# The commit the metrics files name (util/json.c), refreshed at every build.
add_custom_target(vecanneal_git_commit
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DOUT=${CMAKE_BINARY_DIR}/generated/git_commit.h
          -P ${CMAKE_SOURCE_DIR}/cmake/git_commit.cmake
  BYPRODUCTS ${CMAKE_BINARY_DIR}/generated/git_commit.h)
add_dependencies(vecanneal_core vecanneal_git_commit)
set_property(SOURCE src/util/json.c APPEND PROPERTY INCLUDE_DIRECTORIES ${CMAKE_BINARY_DIR}/generated)

add_executable(vecanneal src/cli/main.c)
target_link_libraries(vecanneal PRIVATE vecanneal_core)

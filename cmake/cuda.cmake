# CUDA backend: device kernels (src/cuda/*.cu) and the NCCL wrapper (src/comm/nccl.c), added to
# vecanneal_core; the test and benchmark hooks (src/cuda/probe.cu) as vecanneal_cuda_probe. Included by
# the top-level CMakeLists.txt when VECANNEAL_HAVE_CUDA (the CUDA language is enabled and CUDAToolkit
# found there); VECANNEAL_HAVE_NCCL adds NCCL.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# The kernels are built for CMAKE_CUDA_ARCHITECTURES (the top-level CMakeLists.txt sets its default, 90;80).

target_sources(vecanneal_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/context.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/assign.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/stats.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/seg_sort.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/init.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/set_assign.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/blas.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/vmm.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/search.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/pq_search.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/pq_encode.cu)
set_target_properties(vecanneal_core PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_RUNTIME_LIBRARY Shared
  POSITION_INDEPENDENT_CODE ON)
target_compile_options(vecanneal_core PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xptxas=-warn-spills -lineinfo>)
# The search scans and the PQ encoder compute with the CPU's recipes bit for bit (cuda/search.cu,
# cuda/pq_search.cu, cuda/pq_encode.cu): IEEE float32 whatever CMAKE_CUDA_FLAGS say. Source options come
# after the global and target ones on nvcc's command line, and a later -ftz=false wins even over
# --use_fast_math (which would flush denormals to zero).
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/search.cu ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/pq_search.cu
  ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/pq_encode.cu APPEND PROPERTY COMPILE_OPTIONS -ftz=false -prec-div=true
  -prec-sqrt=true)
# The Hopper argmin kernel (wgmma) exists for sm_90a alone: its own object library built for that target
# only, whatever CMAKE_CUDA_ARCHITECTURES says, so no sm_90 or sm_80 image of it can be picked at run
# time (cuda/assign.cu launches it on compute capability 9.0 only).
add_library(vecanneal_wgmma OBJECT ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/assign_wgmma.cu)
set_target_properties(vecanneal_wgmma PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_ARCHITECTURES OFF
  POSITION_INDEPENDENT_CODE ON)
target_compile_options(vecanneal_wgmma PRIVATE
  --generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas=-warn-spills -lineinfo)
target_include_directories(vecanneal_wgmma PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src)
target_sources(vecanneal_core PRIVATE $<TARGET_OBJECTS:vecanneal_wgmma>)
target_compile_definitions(vecanneal_core PUBLIC VECANNEAL_CUDA=1)
target_include_directories(vecanneal_core PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
# cuBLAS and cuBLASLt are opened at their first use (cuda/blas.cuh says why), not linked: the
# directory the toolkit's libcublas was found in is the loader's fallback after the sonames.
get_target_property(VA_CUBLAS_LOCATION CUDA::cublas IMPORTED_LOCATION)
get_filename_component(VA_CUBLAS_DIR "${VA_CUBLAS_LOCATION}" DIRECTORY)
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/blas.cu APPEND PROPERTY COMPILE_DEFINITIONS
  VA_CUBLAS_DIR="${VA_CUBLAS_DIR}")
target_link_libraries(vecanneal_core PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})

if(VECANNEAL_HAVE_NCCL)
  target_sources(vecanneal_core PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/comm/nccl.c)
  target_compile_definitions(vecanneal_core PUBLIC VECANNEAL_NCCL=1)
  target_link_libraries(vecanneal_core PUBLIC NCCL::NCCL)
endif()

# The test and benchmark hooks (src/cuda/probe.h): a library of their own, linked by the CUDA tests and
# the kernel benchmarks only, so that neither vecanneal_core nor the vecanneal executable carries them
# (CTest source_cuda_probe_apart checks both with nm). Built for the architectures and with the options
# of the kernels whose launchers it calls.
add_library(vecanneal_cuda_probe STATIC ${CMAKE_CURRENT_LIST_DIR}/../src/cuda/probe.cu)
set_target_properties(vecanneal_cuda_probe PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_RUNTIME_LIBRARY Shared
  POSITION_INDEPENDENT_CODE ON)
target_compile_options(vecanneal_cuda_probe PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xptxas=-warn-spills -lineinfo>)
target_link_libraries(vecanneal_cuda_probe PUBLIC vecanneal_core)

# Kernel benchmark (not a test): bench/gpu_kernels [n d k reps].
add_executable(gpu_kernels_bench ${CMAKE_CURRENT_LIST_DIR}/../bench/gpu_kernels.c)
target_link_libraries(gpu_kernels_bench PRIVATE vecanneal_cuda_probe vecanneal_core)
# Out-of-core benchmark (not a test): bench/gpu_stream [n d k chunk_mb reps].
add_executable(gpu_stream_bench ${CMAKE_CURRENT_LIST_DIR}/../bench/gpu_stream.c)
target_link_libraries(gpu_stream_bench PRIVATE vecanneal_cuda_probe vecanneal_core)
set(VECANNEAL_CUDA_SOURCES_ADDED ON)

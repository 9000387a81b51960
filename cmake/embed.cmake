# `vecanneal embed`: all-MiniLM-L6-v2 sentence embeddings in C (BERT WordPiece tokenizer with generated
# Unicode tables, safetensors reader, OpenBLAS encoder). Joins vecanneal_core so the CLI and the tests
# link it like every other command. The model is not part of the build: scripts/fetch-model installs
# it under models/ (docs/embed.md).
set(VA_EMBED_SOURCES
  src/cli/embed.c src/job/embed.c src/job/embed_lines.c src/embed/tokenizer.c src/embed/unicode_tables.c
  src/embed/json.c src/embed/safetensors.c src/embed/bert_cpu.c src/backend/encoder.c)
target_sources(vecanneal_core PRIVATE ${VA_EMBED_SOURCES})
# The source tree's model directory is embed's last fallback, so a build run from anywhere finds it.
set_property(SOURCE src/job/embed.c APPEND PROPERTY COMPILE_DEFINITIONS
  VA_EMBED_SOURCE_MODEL_DIR="${CMAKE_CURRENT_SOURCE_DIR}/models/all-MiniLM-L6-v2")
# Lets gcc if-convert and vectorise the encoder's element-wise loops (GELU, softmax exp): neither flag
# reorders arithmetic or assumes finite values, so results are those of the plain build.
set_property(SOURCE src/embed/bert_cpu.c APPEND PROPERTY COMPILE_OPTIONS -fno-trapping-math -fno-math-errno)
# The CUDA encoder (src/embed/bert_cuda.cu) joins when the CUDA backend is built (cmake/cuda.cmake,
# included before this file, sets the architectures and opens cuBLAS/cuBLASLt at first use); its dense
# layers go through cuBLASLt.
if(VECANNEAL_HAVE_CUDA)
  target_sources(vecanneal_core PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/embed/bert_cuda.cu)
  # The encoder alone, timed with CUDA events (bench/embed_gpu.sh; not a test).
  find_package(ZLIB REQUIRED)
  add_executable(embed_gpu_bench ${CMAKE_CURRENT_LIST_DIR}/../bench/embed_gpu_bench.c)
  target_include_directories(embed_gpu_bench PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../tests/embed)
  target_link_libraries(embed_gpu_bench PRIVATE vecanneal_core ZLIB::ZLIB)
endif()

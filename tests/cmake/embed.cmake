# embed tests (label embed; CPU ones first; the model must be installed first by scripts/fetch-model, and a
# test FAILS with that hint when it is not):
#   embed_tokenizer  token ids identical to Hugging Face's fast tokenizer on 15k+ corpus lines
#   embed_encoder    cosine >= 0.9999 to sentence-transformers' fp32 embeddings on 200 lines
#   embed_e2e        mpirun -n 2 vecanneal embed (text and JSONL) then vecanneal compress, plus the
#                    agreed error exits (usage 2, missing model / empty corpus / bad JSONL 3)
#   embed_token_ids  embed --token-ids-out on 1, 2 and 3 ranks: the ids equal the reference ids of
#                    embed_tokenizer (also truncated, also with the encoder); failures leave nothing
find_package(ZLIB REQUIRED)
set(VA_EMBED_MODEL_DIR "${CMAKE_SOURCE_DIR}/models/all-MiniLM-L6-v2" CACHE PATH "all-MiniLM-L6-v2 directory for the embed tests")
set(VA_EMBED_DATA_DIR "${VA_TEST_DIR}/data")

add_executable(test_embed_tokenizer ${VA_TEST_DIR}/embed/test_tokenizer.c)
add_executable(test_embed_encoder ${VA_TEST_DIR}/embed/test_encoder.c)
add_executable(test_embed_h5check ${VA_TEST_DIR}/embed/test_h5check.c)
add_executable(test_embed_idcheck ${VA_TEST_DIR}/embed/test_idcheck.c)
foreach(t test_embed_tokenizer test_embed_encoder test_embed_h5check test_embed_idcheck)
  target_include_directories(${t} PRIVATE ${VA_TEST_DIR}/embed)
  target_link_libraries(${t} PRIVATE vecanneal_core ZLIB::ZLIB)
endforeach()

add_test(NAME embed_tokenizer COMMAND test_embed_tokenizer ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR})
add_test(NAME embed_encoder COMMAND test_embed_encoder ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR} 1)
add_test(NAME embed_e2e COMMAND bash ${VA_TEST_DIR}/embed/e2e.sh $<TARGET_FILE:vecanneal> $<TARGET_FILE:test_embed_h5check>
                                ${VA_MPIEXEC} ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR} ${CMAKE_CURRENT_BINARY_DIR}/embed_e2e)
add_test(NAME embed_token_ids COMMAND bash ${VA_TEST_DIR}/embed/token_ids.sh $<TARGET_FILE:vecanneal> $<TARGET_FILE:test_embed_idcheck>
                                      ${VA_MPIEXEC} ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR} ${CMAKE_CURRENT_BINARY_DIR}/embed_token_ids)
set_tests_properties(embed_tokenizer embed_encoder embed_e2e embed_token_ids PROPERTIES LABELS "embed;cpu" TIMEOUT 600
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
set_tests_properties(embed_e2e embed_token_ids PROPERTIES LABELS "embed;cpu;mpi")

# GPU embed tests (labels embed and gpu; exit 77 = SKIP without a device, never a pass). They use
# model-fp16.safetensors, the weights file that travels to GPU machines:
#   embed_encoder_cuda  CUDA encoder vs the reference and vs the CPU encoder on the same weights, per
#                       precision (cosine >= 0.9999 / 0.999999 fp32, >= 0.999 fp16/bf16), batch
#                       independence, unit norms, repeat and in-flight exactness
#   embed_e2e_cuda      vecanneal embed --backend cuda vs --backend cpu row by row, metrics, defaults,
#                       compress on the output and compress --embed, the no-device exits
if(VECANNEAL_HAVE_CUDA)
  add_executable(test_embed_encoder_cuda ${VA_TEST_DIR}/embed/test_encoder_cuda.c)
  target_include_directories(test_embed_encoder_cuda PRIVATE ${VA_TEST_DIR}/embed)
  target_link_libraries(test_embed_encoder_cuda PRIVATE vecanneal_core ZLIB::ZLIB)
  add_test(NAME embed_encoder_cuda COMMAND test_embed_encoder_cuda ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR})
  add_test(NAME embed_e2e_cuda COMMAND bash ${VA_TEST_DIR}/embed/e2e_cuda.sh $<TARGET_FILE:vecanneal> $<TARGET_FILE:test_embed_h5check>
                                       $<TARGET_FILE:test_embed_encoder_cuda> ${VA_MPIEXEC} ${VA_EMBED_MODEL_DIR} ${VA_EMBED_DATA_DIR}
                                       ${CMAKE_CURRENT_BINARY_DIR}/embed_e2e_cuda $<TARGET_FILE:h5tool>)
  set_tests_properties(embed_encoder_cuda PROPERTIES LABELS "embed;gpu" SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  set_tests_properties(embed_e2e_cuda PROPERTIES LABELS "embed;gpu;mpi" SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;NCCL_NVLS_ENABLE=0")
endif()

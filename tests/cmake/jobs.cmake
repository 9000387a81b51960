# Job-level tests: the whole compress job under mpirun (1-4 ranks), parity, bad inputs, configs.
add_executable(h5tool ${VA_TEST_DIR}/tools/h5tool.c)
target_include_directories(h5tool PRIVATE ${HDF5_INCLUDE_DIRS})
target_compile_definitions(h5tool PRIVATE ${HDF5_DEFINITIONS})
target_link_libraries(h5tool PRIVATE ${HDF5_C_LIBRARIES} MPI::MPI_C m)

set(VA_JOB_ENV "VECANNEAL_BIN=$<TARGET_FILE:vecanneal>;VECANNEAL_H5TOOL=$<TARGET_FILE:h5tool>;VECANNEAL_SOURCE=${CMAKE_SOURCE_DIR}")
function(va_job_test name script)
  add_test(NAME ${name} COMMAND bash ${VA_TEST_DIR}/jobs/${script} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "mpi" TIMEOUT 900
    ENVIRONMENT "${VA_JOB_ENV};VECANNEAL_WORK=${CMAKE_BINARY_DIR}/testwork/${name}")
endfunction()

va_job_test(ranks_default ranks.sh default --anchors 16)
va_job_test(ranks_trim_farthest_maint ranks.sh trim --anchors 16 --set robust=trim --set init=farthest
  --set maintenance_interval=3 --set k_min=4 --set k_max=24 --set split_count_factor=1.5 --set max_iter=12)
va_job_test(ranks_huber_random_momentum ranks.sh huber --anchors 20 --set robust=huber --set init=random
  --set momentum=0.5 --set max_step=0.05 --set cooling_rate=0.05 --set max_iter=15)
va_job_test(ranks_cosine ranks.sh cosine --anchors 12 --set metric=cosine --set max_iter=15)
va_job_test(parity_vlc_demo parity.sh)
va_job_test(bad_inputs badinput.sh)
# .fvecs, .bvecs, .ivecs and .npy inputs against HDF5 (numpy writes the .npy files: SKIP without it).
va_job_test(formats formats.sh)
set_tests_properties(formats PROPERTIES LABELS "cpu;mpi" TIMEOUT 300 SKIP_RETURN_CODE 77)
va_job_test(configs configs.sh)
va_job_test(metrics metrics.sh)
va_job_test(progress progress.sh)
va_job_test(serial_hdf5_build serial_hdf5.sh)
set_tests_properties(serial_hdf5_build PROPERTIES SKIP_RETURN_CODE 77)
va_job_test(checkpoint_resume resume.sh)
va_job_test(gpu_backend gpu_backend.sh)
set_tests_properties(gpu_backend PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77)
va_job_test(rank_death rankdeath.sh cpu)
va_job_test(rank_death_gpu rankdeath.sh cuda)
set_tests_properties(rank_death_gpu PROPERTIES LABELS "gpu;mpi" SKIP_RETURN_CODE 77)
va_job_test(embed_compress embed_compress.sh)
set_tests_properties(embed_compress PROPERTIES LABELS "embed;mpi")
# A short soak in CI (40 random configurations x 2 runs); the full one is tests/soak/soak.py --jobs 200.
add_test(NAME soak_short COMMAND python3 ${VA_TEST_DIR}/soak/soak.py --vecanneal $<TARGET_FILE:vecanneal>
  --h5tool $<TARGET_FILE:h5tool> --jobs 40 --seed 11 --time-limit 600)
set_tests_properties(soak_short PROPERTIES LABELS "soak;mpi" TIMEOUT 900)
# Failure classes (tests/jobs/reliability.sh): one CTest per case; label reliability runs them all.
foreach(case sparse_chunks disk_full write_fault outputs one_job config stop resume memory info)
  va_job_test(reliability_${case} reliability.sh ${case})
  set_tests_properties(reliability_${case} PROPERTIES LABELS "mpi;reliability" SKIP_RETURN_CODE 77)
endforeach()
va_job_test(reliability_gpu reliability.sh gpu)
set_tests_properties(reliability_gpu PROPERTIES LABELS "gpu;mpi;reliability" SKIP_RETURN_CODE 77)
# assign and add (new rows placed in an index, codes extended), compress --train-sample.
va_job_test(assign_add assign_add.sh)
set_property(TEST assign_add APPEND PROPERTY ENVIRONMENT "VECANNEAL_TEST_PQ=$<TARGET_FILE:test_pq>")
set_tests_properties(assign_add PROPERTIES LABELS "cpu;mpi" TIMEOUT 300 SKIP_RETURN_CODE 77)
# compress --train-sample: bitwise the same on 1-4 ranks, 1 and 3 threads, and resumed; the input read once (strace).
va_job_test(train_sample_ranks train_sample.sh ranks)
set_tests_properties(train_sample_ranks PROPERTIES LABELS "cpu;mpi" TIMEOUT 300)
va_job_test(train_sample_read_once train_sample.sh read_once)
set_tests_properties(train_sample_read_once PROPERTIES LABELS "cpu;mpi" TIMEOUT 300 SKIP_RETURN_CODE 77)
# search: exact = gen's /neighbors, monotone recall over nprobe, bitwise the same on 1-4 ranks, bad inputs.
va_job_test(search search.sh)
set_tests_properties(search PROPERTIES LABELS "cpu;mpi" TIMEOUT 300)
# search --backend cuda on 1 and 2 ranks: /neighbors and /distances bitwise those of --backend cpu.
va_job_test(search_gpu search_gpu.sh)
set_tests_properties(search_gpu PROPERTIES LABELS "gpu;mpi" TIMEOUT 600 SKIP_RETURN_CODE 77)
# compress --codes pq: codes and codebooks bitwise the same on 1-4 ranks, 1 and 3 threads, both io modes; the
# stored codes are the rows encoded again (test_pq --index); errors, info and metrics (docs/codes.md).
va_job_test(codes codes.sh)
set_property(TEST codes APPEND PROPERTY ENVIRONMENT "VECANNEAL_TEST_PQ=$<TARGET_FILE:test_pq>")
set_tests_properties(codes PROPERTIES LABELS "cpu;mpi" TIMEOUT 600)
# search on the codes: bitwise the same on 1-3 ranks (alone and --rerank), recall over nprobe, M and rerank,
# no source row read without --rerank, bad inputs (docs/search.md "Search on codes").
va_job_test(search_codes search_codes.sh)
set_tests_properties(search_codes PROPERTIES LABELS "cpu;mpi" TIMEOUT 600)

# Slurm test (label slurm): a throw-away one-node Slurm cluster (munged + slurmctld + slurmd on
# localhost, state in a temp dir, two fake GPUs) runs the scripts of jobs/slurm/: compress,
# scaling array, the time-limit signal -> checkpoint -> exit 75 -> requeue -> --resume flow, scancel,
# GPU binding, and embed/pipeline when the model is installed. Installs slurm-wlm + munge with
# apt-get when missing (as root); exits 77 (SKIP) with the reason when Slurm cannot be installed or
# started here. docs/slurm.md has more.
add_test(NAME slurm_jobs
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/run_slurm_test.sh
                 ${CMAKE_BINARY_DIR}/vecanneal ${CMAKE_SOURCE_DIR})
set_tests_properties(slurm_jobs PROPERTIES LABELS slurm TIMEOUT 300 SKIP_RETURN_CODE 77
                     RUN_SERIAL TRUE)

# Slurm test (label slurm): a throw-away one-node Slurm cluster (munged + slurmctld + slurmd on
# localhost, state in a temp dir) runs jobs/slurm/compress.sbatch, scaling.sbatch and the
# signal/requeue flow. Installs slurm-wlm + munge with apt-get when missing (as root); exits 77
# (SKIP) with the reason when Slurm cannot be installed or started here. docs/SLURM.md has more.
add_test(NAME slurm_jobs
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/slurm/run_slurm_test.sh
                 ${CMAKE_BINARY_DIR}/vecanneal ${CMAKE_SOURCE_DIR})
set_tests_properties(slurm_jobs PROPERTIES LABELS slurm TIMEOUT 300 SKIP_RETURN_CODE 77
                     RUN_SERIAL TRUE)

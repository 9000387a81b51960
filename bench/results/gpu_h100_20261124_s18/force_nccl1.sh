#!/bin/bash
# Experiment only (never on main): in the tree $1, a one-rank CUDA job makes a one-rank NCCL
# communicator and takes the NCCL paths of a multi-rank job when VA_NCCL1 is set, so one GPU shows
# what the statistics' NCCL sum costs the loop apart from the link itself.
cd "$1" || exit 1
sed -i 's/int nccl = va_proc.nranks > 1 \&\& cfg/int nccl = (va_proc.nranks > 1 || getenv("VA_NCCL1")) \&\& cfg/' src/compress.c
sed -i 's/if (va_proc.nranks == 1) return/if (va_proc.nranks == 1 \&\& !getenv("VA_NCCL1")) return/' src/dist/comm.c
sed -i 's/if (va_proc.nranks > 1) va_cuda_sync(g);/if (va_proc.nranks > 1 || getenv("VA_NCCL1")) va_cuda_sync(g);/' src/backend_cuda.c
echo "$1: $(grep -c VA_NCCL1 src/compress.c) $(grep -c VA_NCCL1 src/dist/comm.c) $(grep -c VA_NCCL1 src/backend_cuda.c) patched lines"

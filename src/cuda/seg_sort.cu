/* cuda_seg_sort.cu: the rows of a view grouped by segment for the sorted statistics (cuda_stats.cu): the
 * view's rows stably ordered by key (vals_sorted: row numbers within the view) and each segment's
 * [start, end) in that order (seg_start, seg_end). Two ways, the same order:
 *  COUNT (up to 2047 segments, where the table below fits the rows' buffer): a stable counting sort. The rows are
 *    cut into tiles of consecutive rows, one block each. A first pass counts each tile's keys into a bin-major
 *    table (counts[bin * tiles + tile]); one device-wide exclusive scan over the table gives every
 *    (bin, tile) the first position of its rows; a second pass places each tile's rows in row order, each
 *    warp over its own run of the tile, 32 rows at a time (the lanes holding one key rank among themselves by
 *    __match_any_sync). The table takes the radix sort's key buffer (keys_sorted), which this way does not
 *    use.
 *  RADIX: cub's stable radix sort of (key, row) pairs, then the bounds from the sorted keys; for many
 *    segments, where the table would be larger than the rows.
 * Keys lie in [0, nseg]; nseg marks a row that joins no segment (sorted last, in no segment). A segment
 * with no rows gets start == end (its value differs between the two ways; nothing reads it). */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda/internal.cuh"

static const int SEG_THREADS = 256;
/* COUNT: tiles of 1024 rows or more (a power of two), each cut into COUNT_WARPS consecutive runs, one a warp;
 * the placing block stages the tile's keys and each run's next position per bin in shared memory. */
static const int COUNT_TILE_MIN = 1024, COUNT_TILE_MAX = 4096, COUNT_BINS_MAX = 2048, COUNT_WARPS = 8;

static int seg_grid(int64_t n) {
  int64_t b = (n + SEG_THREADS - 1) / SEG_THREADS;
  return (int)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* --- COUNT ------------------------------------------------------------------------------------------ */
/* One block per tile: its keys counted into shared memory, the counts written to the tile's column. */
__global__ void __launch_bounds__(COUNT_WARPS * 32)
    count_tiles_kernel(const uint32_t *__restrict__ keys, int64_t n, int bins, int tile, int64_t tiles,
                       int32_t *__restrict__ counts) {
  extern __shared__ int32_t hist[];
  const int64_t t = blockIdx.x, r0 = t * tile;
  const int m = (int)min((int64_t)tile, n - r0);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = 0;
  __syncthreads();
#pragma unroll 4
  for (int i = threadIdx.x; i < m; i += blockDim.x) atomicAdd(&hist[keys[r0 + i]], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) counts[(int64_t)b * tiles + t] = hist[b];
}

/* One block per tile. The tile's keys into shared memory; each warp counts its run's keys per bin; each
 * bin's first position in the tile (the scanned table) handed on from run to run gives every run its own
 * next position per bin; then each warp places its run's rows in order, 32 at a time: the lanes holding
 * one key take consecutive positions in lane order, and the highest of them moves the bin's next
 * position on past the group. */
__global__ void __launch_bounds__(COUNT_WARPS * 32)
    count_place_kernel(const uint32_t *__restrict__ keys, int64_t n, int bins, int tile, int64_t tiles,
                       const int32_t *__restrict__ first, uint32_t *__restrict__ rows) {
  extern __shared__ int32_t smem[];
  int32_t *next = smem;                                     /* COUNT_WARPS x bins: run w's row at w * bins */
  uint32_t *skey = (uint32_t *)(smem + COUNT_WARPS * bins); /* tile */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x, r0 = t * tile;
  const int m = (int)min((int64_t)tile, n - r0), run = tile / COUNT_WARPS;
  for (int e = threadIdx.x; e < COUNT_WARPS * bins; e += blockDim.x) next[e] = 0;
#pragma unroll 4
  for (int i = threadIdx.x; i < m; i += blockDim.x) skey[i] = keys[r0 + i];
  __syncthreads();
  int32_t *mine = next + warp * bins;
  const int i1 = min(m, (warp + 1) * run);
  for (int i = warp * run + lane; i < i1; i += 32) atomicAdd(&mine[skey[i]], 1);
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    int32_t at = first[(int64_t)b * tiles + t];
    for (int w = 0; w < COUNT_WARPS; w++) {
      const int32_t c = next[w * bins + b];
      next[w * bins + b] = at;
      at += c;
    }
  }
  __syncthreads();
  const unsigned below = (1u << lane) - 1u;
  for (int i0 = warp * run; i0 < i1; i0 += 32) {
    const int i = i0 + lane;
    const unsigned live = __ballot_sync(0xffffffffu, i < i1);
    if (i < i1) {
      const uint32_t key = skey[i];
      const unsigned peers = __match_any_sync(live, key);
      const int32_t pos = mine[key] + __popc(peers & below);
      rows[pos] = (uint32_t)(r0 + i);
      __syncwarp(live);                               /* every lane has read mine[] before the groups move it on */
      if ((peers >> lane) == 1u) mine[key] = pos + 1; /* the group's highest lane */
    }
    __syncwarp();
  }
}

/* Segment j's bounds from the scanned table: its first tile's first position, and the next bin's. */
__global__ void count_bounds_kernel(const int32_t *__restrict__ first, int64_t tiles, int64_t nseg,
                                    int32_t *__restrict__ start, int32_t *__restrict__ end) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nseg; j += (int64_t)gridDim.x * blockDim.x) {
    start[j] = first[j * tiles];
    end[j] = first[(j + 1) * tiles];
  }
}

/* The tile COUNT takes for these rows and bins: the smallest power of two from COUNT_TILE_MIN whose table
 * fits the rows' buffer, or 0 when none up to COUNT_TILE_MAX does (or the bins are too many). */
static int count_tile(int64_t n, int64_t bins, int64_t cap) {
  if (n <= 0 || bins > COUNT_BINS_MAX) return 0;
  for (int tile = COUNT_TILE_MIN; tile <= COUNT_TILE_MAX; tile *= 2)
    if (bins * ((n + tile - 1) / tile) <= cap) return tile;
  return 0;
}

static void count_sort(va_cuda_t *c, const uint32_t *keys, int64_t n, int64_t nseg, int tile) {
  const int bins = (int)(nseg + 1);
  const int64_t tiles = (n + tile - 1) / tile, cells = bins * tiles;
  int32_t *table = (int32_t *)c->keys_sorted;
  count_tiles_kernel<<<(unsigned)tiles, COUNT_WARPS * 32, (size_t)bins * 4, c->stream>>>(keys, n, bins, tile, tiles,
                                                                                         table);
  VA_LAUNCHED();
  size_t need = 0;
  VA_CUDA(cub::DeviceScan::ExclusiveSum(NULL, need, table, table, (int)cells, c->stream));
  va_cuda_cub_scratch(c, need);
  need = c->cub_tmp_bytes;
  VA_CUDA(cub::DeviceScan::ExclusiveSum(c->cub_tmp, need, table, table, (int)cells, c->stream)); /* in place */
  /* up to 80 KB; above the default 48 KB only with many bins (k 1024 takes 41 KB), so the attribute is set there
   * alone, not on every pass of the loop */
  const size_t place_smem = (size_t)(COUNT_WARPS * bins + tile) * 4;
  if (place_smem > 48 * 1024)
    VA_CUDA(cudaFuncSetAttribute(count_place_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)place_smem));
  count_place_kernel<<<(unsigned)tiles, COUNT_WARPS * 32, place_smem, c->stream>>>(keys, n, bins, tile, tiles, table,
                                                                                   c->vals_sorted);
  VA_LAUNCHED();
  count_bounds_kernel<<<seg_grid(nseg), SEG_THREADS, 0, c->stream>>>(table, tiles, nseg, c->seg_start, c->seg_end);
  VA_LAUNCHED();
}

/* --- RADIX ------------------------------------------------------------------------------------------ */
__global__ void radix_bounds_kernel(const uint32_t *__restrict__ ks, int64_t n, int64_t nseg, int32_t *start,
                                    int32_t *end) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t key = ks[i];
    if (key >= (uint64_t)nseg) continue; /* the excluded segment */
    if (i == 0 || ks[i - 1] != key) start[key] = (int32_t)i;
    if (i == n - 1 || ks[i + 1] != key) end[key] = (int32_t)(i + 1);
  }
}

static void radix_sort(va_cuda_t *c, const uint32_t *keys, int64_t n, int64_t nseg) {
  int bits = 1;
  while (bits < 32 && ((uint64_t)1 << bits) <= (uint64_t)nseg) bits++;
  size_t need = 0;
  VA_CUDA(cub::DeviceRadixSort::SortPairs(NULL, need, keys, c->keys_sorted, c->iota, c->vals_sorted, (int)n, 0, bits,
                                          c->stream));
  va_cuda_cub_scratch(c, need);
  need = c->cub_tmp_bytes;
  VA_CUDA(cub::DeviceRadixSort::SortPairs(c->cub_tmp, need, keys, c->keys_sorted, c->iota, c->vals_sorted, (int)n, 0,
                                          bits, c->stream));
  VA_CUDA(cudaMemsetAsync(c->seg_start, 0, (size_t)(nseg + 1) * 4, c->stream));
  VA_CUDA(cudaMemsetAsync(c->seg_end, 0, (size_t)(nseg + 1) * 4, c->stream));
  radix_bounds_kernel<<<seg_grid(n), SEG_THREADS, 0, c->stream>>>(c->keys_sorted, n, nseg, c->seg_start, c->seg_end);
  VA_LAUNCHED();
}

int va_cuda_segment_rows(va_cuda_t *c, const uint32_t *keys, int64_t n, int64_t nseg, int way) {
  const int tile = count_tile(n, nseg + 1, c->view_rows);
  if (tile && way != VA_SEG_RADIX) {
    count_sort(c, keys, n, nseg, tile);
    return VA_SEG_COUNT;
  }
  radix_sort(c, keys, n, nseg);
  return VA_SEG_RADIX;
}

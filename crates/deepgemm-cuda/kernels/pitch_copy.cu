// Repacks pitched operands into 16-byte-aligned workspaces for the fast copy path of a GEMM
// kernel: line y of `width` bytes moves from src + y * src_pitch to dst + y * dst_pitch.
// dst and dst_pitch are multiples of 16, so every thread writes whole aligned 16-byte chunks. The
// source may have any alignment and is read in aligned 16-byte words all the same: a chunk's 16
// source bytes lie in at most two of them, which funnel shifts join (dg_bytes_from). Loads as
// wide as the source's alignment allows (eight 2-byte loads per chunk for a bf16 matrix with an
// odd number of columns) moved a 3001x3001 one at 2.4 TB/s on the H200, half of DRAM speed.
//
// The chunks of all lines of a copy are one sequence, line after line, that the grid walks with
// a grid-stride loop, so no thread idles at the end of a line of a few KB, and a warp stores 512
// contiguous bytes but where it crosses into the next line. The launcher sizes the grid to the
// GPU (two waves of the blocks it holds at once), not to the copy.
//
// One launch moves up to DG_MAX_COPIES operands (blockIdx.z picks one): a small GEMM's repack is
// launch-bound, about 3.4 us per copy kernel on the H200, so A and B go in one launch, not two.

#define DG_MAX_COPIES 4

struct dg_pitch_copy {
  const unsigned char* src;
  unsigned long long src_pitch;
  unsigned char* dst;
  unsigned long long dst_pitch;
  unsigned long long width;
  unsigned long long height;
};

// By value, as a kernel parameter (192 bytes): the grid reads it from the parameter bank.
struct dg_pitch_copies {
  dg_pitch_copy copy[DG_MAX_COPIES];
};

// dg_bytes_from: the deepgemm crate's kernels/bytes.cuh, which the launcher puts before this file.

// Chunk `x` (bytes [16x, 16x + 16) of the line, or fewer at its end) of line y. `src_end` is the
// byte after the copy's last source byte.
__device__ __forceinline__ void copy_chunk(const dg_pitch_copy& c, const unsigned char* src_end,
                                           unsigned long long y, unsigned long long x) {
  const unsigned char* from = c.src + y * c.src_pitch + 16 * x;
  unsigned char* to = c.dst + y * c.dst_pitch + 16 * x;
  const int at = (int)(reinterpret_cast<unsigned long long>(from) % 16);
  const uint4* word = reinterpret_cast<const uint4*>(from - at);
  // `word` never starts before the source's allocation, which is 16-byte aligned. A whole chunk
  // from a misaligned source takes the word after it too, which holds byte from + 15 of the line
  // but may run up to 15 bytes past the line's end: on any line but the last, into the pitch's
  // gap or the next line, still inside the source; on the last, maybe past the allocation as
  // compute-sanitizer's memcheck counts it (by the requested size; CI runs it on repacked
  // operands). There (one chunk per copy at most) the bytes go one by one, as they do in a
  // line's last, partial chunk: never past `width`.
  const bool whole = 16 * x + 16 <= c.width;
  if (whole && at == 0) {
    *reinterpret_cast<uint4*>(to) = word[0];
  } else if (whole && reinterpret_cast<const unsigned char*>(word + 2) <= src_end) {
    *reinterpret_cast<uint4*>(to) = dg_bytes_from(word[0], word[1], at);
  } else {
    const int bytes = (int)min(c.width - 16 * x, 16ull);
    for (int b = 0; b < bytes; ++b) to[b] = from[b];
  }
}

// gridDim.z copies of `copies`, each walked by all gridDim.x blocks (gridDim.y is 1). The
// launcher leaves empty copies out.
extern "C" __global__ void deepgemm_pitch_copy_batch(const __grid_constant__ dg_pitch_copies copies) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The GEMM behind this copy may be launched now (its threads wait for this grid to finish and
  // its writes to be visible before they read): its launch overlaps the copy.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const dg_pitch_copy& c = copies.copy[blockIdx.z];
  const unsigned long long chunks = (c.width + 15) / 16;  // per line
  const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (first >= chunks * c.height) return;  // a copy smaller than the grid
  const unsigned char* src_end = c.src + (c.height - 1) * c.src_pitch + c.width;
  // The thread's chunk as (line y, chunk x of it), and the grid's stride as whole lines plus
  // chunks: two divisions per thread, none in the loop.
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long stride_lines = stride / chunks, stride_chunks = stride % chunks;
  unsigned long long y = first / chunks, x = first % chunks;
  while (y < c.height) {
    copy_chunk(c, src_end, y, x);
    y += stride_lines;
    x += stride_chunks;
    if (x >= chunks) {
      x -= chunks;
      ++y;
    }
  }
}

// Transposes a matrix of 1-byte elements (fp8 operands, which wgmma reads K-major only): line y
// of `cols` bytes at src + y * src_pitch becomes column y of dst, whose line x holds `rows`
// bytes at dst + x * dst_pitch. 32x32 tiles go through shared memory, so that a warp reads 32
// consecutive bytes of a source line and writes 32 consecutive bytes of a destination line. The
// grid covers the columns in x and walks the rows' tiles with a stride of gridDim.y.
extern "C" __global__ void deepgemm_transpose_bytes(const unsigned char* __restrict__ src,
                                                    unsigned long long src_pitch,
                                                    unsigned char* __restrict__ dst,
                                                    unsigned long long dst_pitch,
                                                    unsigned long long rows,
                                                    unsigned long long cols) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // As the copy above: the GEMM behind it may be launched now.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  __shared__ unsigned char tile[32][33];  // one byte of padding: column reads spread over banks
  const unsigned long long x0 = (unsigned long long)blockIdx.x * 32;  // the tile's first column
  for (unsigned long long y0 = (unsigned long long)blockIdx.y * 32; y0 < rows;
       y0 += (unsigned long long)gridDim.y * 32) {
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      const unsigned long long y = y0 + r, x = x0 + threadIdx.x;
      if (y < rows && x < cols) tile[r][threadIdx.x] = src[y * src_pitch + x];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      const unsigned long long x = x0 + r, y = y0 + threadIdx.x;  // byte y of line x
      if (x < cols && y < rows) dst[x * dst_pitch + y] = tile[threadIdx.x][r];
    }
    __syncthreads();  // the tile is refilled by the next rows
  }
}

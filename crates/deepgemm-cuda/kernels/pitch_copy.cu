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
// bytes at dst + x * dst_pitch (dst and dst_pitch are multiples of 16: a workspace).
//
// A block of 256 threads moves 64x64-byte tiles, each thread 16 bytes in and 16 out:
//   1. every thread reads 16 bytes of one of the tile's 64 source lines (one aligned 16-byte
//      load, or two joined by funnel shifts when the source is misaligned, as in the copy above)
//      into `in`, four words per thread;
//   2. every thread takes a 4x4 block of bytes (four words of four consecutive lines at one
//      4-byte column), transposes it with byte permutes and writes the four words of the
//      destination lines into `out`;
//   3. every thread stores 16 bytes of one of the 64 destination lines.
// So each warp reads and writes whole 64-byte pieces of lines with 16-byte global accesses. The first
// version moved a byte per thread through a 32x32 tile: 0.65 TB/s on the H200, 7% of DRAM's
// peak. The grid covers the columns' tiles in x and walks the rows' tiles with a stride of
// gridDim.y.
constexpr int DG_T = 64;          // tile edge, bytes
constexpr int DG_T_WORDS = 16;    // a tile line, in 4-byte words
constexpr int DG_IN_PITCH = 20;   // words per `in` line: four 4-line groups 16 banks apart
// Words per `out` line. Step 2 writes a word to each of 16 lines 4 apart: 17 spreads them over 16
// banks (two threads share each: 2-way), where a 16-byte-aligned pitch (for vector reads in step
// 3) would put 16 threads on each of two banks.
constexpr int DG_OUT_PITCH = 17;

__device__ __forceinline__ uint4 dg_load_16(const unsigned char* from, const unsigned char* src_end,
                                            int bytes) {
  const int at = (int)(reinterpret_cast<unsigned long long>(from) % 16);
  const uint4* word = reinterpret_cast<const uint4*>(from - at);
  if (bytes == 16 && at == 0) return word[0];
  // As copy_chunk: the second word is read only where it lies inside the source.
  if (bytes == 16 && reinterpret_cast<const unsigned char*>(word + 2) <= src_end)
    return dg_bytes_from(word[0], word[1], at);
  unsigned w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int b = 0; b < 16; ++b)
    if (b < bytes) w[b / 4] |= (unsigned)from[b] << (8 * (b % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(256) deepgemm_transpose_bytes(
    const unsigned char* __restrict__ src, unsigned long long src_pitch,
    unsigned char* __restrict__ dst, unsigned long long dst_pitch, unsigned long long rows,
    unsigned long long cols) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // As the copy above: the GEMM behind it may be launched now.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  __shared__ __align__(16) unsigned in[DG_T * DG_IN_PITCH];
  __shared__ unsigned out[DG_T * DG_OUT_PITCH];
  const int t = threadIdx.x;
  const int line = t / 4, piece = t % 4;           // steps 1 and 3: a line's 16-byte piece
  const int col_quad = t % 16, line_quad = t / 16;  // step 2: a 4x4 block of bytes
  const unsigned char* src_end = src + (rows - 1) * src_pitch + cols;
  const unsigned long long x0 = (unsigned long long)blockIdx.x * DG_T;  // the tile's first column
  for (unsigned long long y0 = (unsigned long long)blockIdx.y * DG_T; y0 < rows;
       y0 += (unsigned long long)gridDim.y * DG_T) {
    // 1. Source line y0 + line, bytes x0 + 16 * piece ...
    {
      const unsigned long long y = y0 + line, x = x0 + 16 * piece;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (y < rows && x < cols)
        v = dg_load_16(src + y * src_pitch + x, src_end, (int)min(cols - x, 16ull));
      *reinterpret_cast<uint4*>(&in[line * DG_IN_PITCH + 4 * piece]) = v;
    }
    __syncthreads();
    // 2. w[i]: bytes 4 * col_quad .. + 3 of source line 4 * line_quad + i. Destination line
    // 4 * col_quad + j takes byte j of each, in order of i.
    {
      unsigned w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = in[(4 * line_quad + i) * DG_IN_PITCH + col_quad];
      const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
      const unsigned lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
      unsigned* o = &out[4 * col_quad * DG_OUT_PITCH + line_quad];
      o[0 * DG_OUT_PITCH] = __byte_perm(lo01, lo23, 0x5410);
      o[1 * DG_OUT_PITCH] = __byte_perm(lo01, lo23, 0x7632);
      o[2 * DG_OUT_PITCH] = __byte_perm(hi01, hi23, 0x5410);
      o[3 * DG_OUT_PITCH] = __byte_perm(hi01, hi23, 0x7632);
    }
    __syncthreads();
    // 3. Destination line x0 + line, bytes y0 + 16 * piece ...
    {
      const unsigned long long x = x0 + line, y = y0 + 16 * piece;
      if (x < cols && y < rows) {
        const unsigned* o = &out[line * DG_OUT_PITCH + 4 * piece];
        const unsigned w[4] = {o[0], o[1], o[2], o[3]};
        unsigned char* to = dst + x * dst_pitch + y;
        if (y + 16 <= rows) {
          *reinterpret_cast<uint4*>(to) = make_uint4(w[0], w[1], w[2], w[3]);
        } else {
#pragma unroll
          for (int b = 0; b < 16; ++b)
            if (y + b < rows) to[b] = (unsigned char)(w[b / 4] >> (8 * (b % 4)));
        }
      }
    }
    // `in` is refilled by the next rows only after every thread has read it (step 2 ended at the
    // barrier above), and `out` is rewritten after the next barrier: no third barrier needed.
  }
}

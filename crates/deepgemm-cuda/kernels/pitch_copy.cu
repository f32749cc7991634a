// Repacks pitched operands into 16-byte-aligned workspaces for the fast copy path of a GEMM
// kernel: line y of `width` bytes moves from src + y * src_pitch to dst + y * dst_pitch.
// dst and dst_pitch are multiples of 16, so every thread writes one aligned 16-byte chunk; the
// source is read in UNIT-byte loads, UNIT being the largest power of two (up to 16) dividing
// both src and src_pitch, so any source alignment works. A warp reads 512 contiguous bytes per
// group of loads, which L1 merges into full lines: close to DRAM speed, where cuMemcpy2D moves a
// 2-byte-aligned bf16 matrix at about a quarter of it on the H200.
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

template <int UNIT, typename T>
__device__ __forceinline__ void pitch_copy(const dg_pitch_copy& c) {
  const unsigned long long chunks = (c.width + 15) / 16;
  const unsigned long long chunk_step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long y = blockIdx.y; y < c.height; y += gridDim.y) {
    const unsigned char* line_src = c.src + y * c.src_pitch;
    unsigned char* line_dst = c.dst + y * c.dst_pitch;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < chunks; i += chunk_step) {
      const unsigned long long x = i * 16;
      if (x + 16 <= c.width) {
        uint4 chunk;
        T* parts = reinterpret_cast<T*>(&chunk);
        const T* from = reinterpret_cast<const T*>(line_src + x);
#pragma unroll
        for (int k = 0; k < 16 / UNIT; ++k) parts[k] = from[k];
        *reinterpret_cast<uint4*>(line_dst + x) = chunk;
      } else {
        // The line's last, partial chunk: byte by byte, never past `width`.
        for (unsigned long long b = x; b < c.width; ++b) line_dst[b] = line_src[b];
      }
    }
  }
}

// gridDim.z copies of `copies`; a copy smaller than the grid leaves the extra blocks idle.
extern "C" __global__ void deepgemm_pitch_copy_batch(const __grid_constant__ dg_pitch_copies copies) {
  const dg_pitch_copy& c = copies.copy[blockIdx.z];
  // The widest load every line start allows (uniform across the block: one copy per z).
  const unsigned long long starts = (unsigned long long)c.src | c.src_pitch;
  const int unit_log2 = starts == 0 ? 4 : min(__ffsll((long long)starts) - 1, 4);
  switch (unit_log2) {
    case 0: pitch_copy<1, unsigned char>(c); break;
    case 1: pitch_copy<2, unsigned short>(c); break;
    case 2: pitch_copy<4, unsigned int>(c); break;
    case 3: pitch_copy<8, unsigned long long>(c); break;
    default: pitch_copy<16, uint4>(c); break;
  }
}

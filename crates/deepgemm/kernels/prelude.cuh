// ---------------------------------------------------------------------------------------------
// DeepGEMM prelude: element types, conversions and epilogue functions.
// Self-contained on purpose: NVRTC ships no CUDA headers, so the 16- and 8-bit float types are
// plain bit containers converted with PTX `cvt` or integer arithmetic (valid on every arch).
// ---------------------------------------------------------------------------------------------

struct dg_f16  { unsigned short bits; };  // IEEE binary16
struct dg_bf16 { unsigned short bits; };  // bfloat16 (the top half of an f32)
struct dg_e4m3 { unsigned char bits; };   // OCP FP8 E4M3: bias 7, no infinities, max 448
struct dg_e5m2 { unsigned char bits; };   // OCP FP8 E5M2: bias 15, the top byte of an f16
typedef signed char dg_i8;

// ---- element -> f32 ------------------------------------------------------------------------
__device__ __forceinline__ float dg_to_float(float x) { return x; }
__device__ __forceinline__ float dg_to_float(int x) { return (float)x; }
__device__ __forceinline__ float dg_to_float(dg_i8 x) { return (float)x; }
__device__ __forceinline__ float dg_to_float(dg_f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float dg_to_float(dg_bf16 x) {
  return __uint_as_float(((unsigned)x.bits) << 16);
}
__device__ __forceinline__ float dg_to_float(dg_e5m2 x) {
  dg_f16 h;
  h.bits = (unsigned short)(x.bits << 8);
  return dg_to_float(h);
}
__device__ __forceinline__ float dg_to_float(dg_e4m3 x) {
  const unsigned sign = ((unsigned)x.bits & 0x80u) << 24;
  const unsigned exponent = ((unsigned)x.bits >> 3) & 0xFu;
  const unsigned mantissa = (unsigned)x.bits & 0x7u;
  float magnitude;
  if (exponent == 15u && mantissa == 7u) {
    magnitude = __uint_as_float(0x7FC00000u);                               // the one NaN code
  } else if (exponent == 0u) {
    magnitude = (float)mantissa * 0.001953125f;                             // subnormal: m * 2^-9
  } else {
    magnitude = __uint_as_float(((exponent + 120u) << 23) | (mantissa << 20));  // (1+m/8) * 2^(e-7)
  }
  return __uint_as_float(__float_as_uint(magnitude) | sign);
}

// ---- f32 -> element (round to nearest even) ------------------------------------------------
__device__ __forceinline__ unsigned short dg_f16_bits(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ unsigned short dg_bf16_bits(float x) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x40u);  // quiet NaN
  return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// The shared-memory address of a generic pointer into shared memory, as PTX operands take it.
__device__ __forceinline__ unsigned dg_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void dg_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void dg_store(dg_f16* p, float v) { p->bits = dg_f16_bits(v); }
__device__ __forceinline__ void dg_store(dg_bf16* p, float v) { p->bits = dg_bf16_bits(v); }

// Two adjacent elements in one store; `p` is aligned to two elements.
__device__ __forceinline__ void dg_store2(float* p, float v0, float v1) {
  *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}
__device__ __forceinline__ void dg_store2(dg_f16* p, float v0, float v1) {
  *reinterpret_cast<unsigned*>(p) = (unsigned)dg_f16_bits(v0) | ((unsigned)dg_f16_bits(v1) << 16);
}
__device__ __forceinline__ void dg_store2(dg_bf16* p, float v0, float v1) {
  *reinterpret_cast<unsigned*>(p) = (unsigned)dg_bf16_bits(v0) | ((unsigned)dg_bf16_bits(v1) << 16);
}

// ---- f32 -> fp8 -----------------------------------------------------------------------------
// Nearest, ties to even, saturating to the largest finite value (NaN stays NaN): the value of
// `cast<e4m3>` / `cast<e5m2>` (dg_round_fp8, below), stored. sm_89 and later convert two values
// with one `cvt.rn.satfinite`; elsewhere the code is assembled from dg_round_fp8's value
// (codec.rs transcribes that one).
__device__ __forceinline__ float dg_round_fp8(float x, int mantissa_bits, int min_exponent,
                                              float max_finite);
__device__ __forceinline__ unsigned dg_fp8_code(float x, int mantissa_bits, int min_exponent,
                                                int bias, float max_finite) {
  const float v = dg_round_fp8(x, mantissa_bits, min_exponent, max_finite);
  if (v != v) return 0x7Fu;
  const unsigned sign = (__float_as_uint(v) >> 24) & 0x80u;
  const float magnitude = fabsf(v);
  const int exponent = (int)((__float_as_uint(magnitude) >> 23) & 0xFFu) - 127;
  if (magnitude == 0.0f) return sign;
  if (exponent < min_exponent) {
    // A subnormal: a whole number of the smallest quantum, 2^(min_exponent - mantissa_bits).
    const float per_quantum = __uint_as_float((unsigned)(127 - (min_exponent - mantissa_bits)) << 23);
    return sign | (unsigned)(magnitude * per_quantum);
  }
  const unsigned mantissa = (__float_as_uint(magnitude) >> (23 - mantissa_bits)) &
                            ((1u << mantissa_bits) - 1u);
  return sign | ((unsigned)(exponent + bias) << mantissa_bits) | mantissa;
}
// Two values, `lo` in the low byte; E4M3 picks the format (else e5m2).
template <bool E4M3>
__device__ __forceinline__ unsigned short dg_fp8x2_bits(float lo, float hi) {
  unsigned short d;
#if __CUDA_ARCH__ >= 890
  if constexpr (E4M3) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  }
#else
  constexpr int mantissa_bits = E4M3 ? 3 : 2, min_exponent = E4M3 ? -6 : -14;
  constexpr int bias = E4M3 ? 7 : 15;
  constexpr float max_finite = E4M3 ? 448.0f : 57344.0f;
  d = (unsigned short)(dg_fp8_code(lo, mantissa_bits, min_exponent, bias, max_finite) |
                       (dg_fp8_code(hi, mantissa_bits, min_exponent, bias, max_finite) << 8));
#endif
  return d;
}
__device__ __forceinline__ unsigned short dg_e4m3x2_bits(float lo, float hi) {
  return dg_fp8x2_bits<true>(lo, hi);
}
__device__ __forceinline__ unsigned short dg_e5m2x2_bits(float lo, float hi) {
  return dg_fp8x2_bits<false>(lo, hi);
}
__device__ __forceinline__ void dg_store(dg_e4m3* p, float v) {
  p->bits = (unsigned char)dg_e4m3x2_bits(v, 0.0f);
}
__device__ __forceinline__ void dg_store(dg_e5m2* p, float v) {
  p->bits = (unsigned char)dg_e5m2x2_bits(v, 0.0f);
}
__device__ __forceinline__ void dg_store2(dg_e4m3* p, float v0, float v1) {
  *reinterpret_cast<unsigned short*>(p) = dg_e4m3x2_bits(v0, v1);
}
__device__ __forceinline__ void dg_store2(dg_e5m2* p, float v0, float v1) {
  *reinterpret_cast<unsigned short*>(p) = dg_e5m2x2_bits(v0, v1);
}

// ---- epilogue functions (the spec's built-ins) ---------------------------------------------
__device__ __forceinline__ float dg_relu(float x) { return fmaxf(x, 0.0f); }
__device__ __forceinline__ float dg_gelu(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
__device__ __forceinline__ float dg_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float dg_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float dg_silu(float x) { return x * dg_sigmoid(x); }
__device__ __forceinline__ float dg_clamp(float x, float lo, float hi) {
  return fminf(fmaxf(x, lo), hi);
}

// cast<dtype>: round an f32 to the dtype's nearest value and back, as storing it would.
__device__ __forceinline__ float dg_round_f16(float x) {
  dg_f16 h;
  h.bits = dg_f16_bits(x);
  return dg_to_float(h);
}
__device__ __forceinline__ float dg_round_bf16(float x) {
  dg_bf16 b;
  b.bits = dg_bf16_bits(x);
  return dg_to_float(b);
}
__device__ __forceinline__ float dg_round_tf32(float x) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;            // inf and NaN pass through
  return __uint_as_float((u + 0x1000u) & 0xFFFFE000u);        // nearest, ties away from zero
}
// FP8 rounding with saturation to the largest finite value (the `satfinite` convention).
__device__ __forceinline__ float dg_round_fp8(float x, int mantissa_bits, int min_exponent,
                                              float max_finite) {
  if (x != x) return x;
  const float magnitude = fabsf(x);
  int exponent = (int)((__float_as_uint(magnitude) >> 23) & 0xFFu) - 127;
  exponent = max(exponent, min_exponent);                     // subnormals share the min quantum
  const float quantum = __uint_as_float((unsigned)(exponent - mantissa_bits + 127) << 23);
  const float rounded = fminf(rintf(magnitude / quantum) * quantum, max_finite);
  return copysignf(rounded, x);
}
__device__ __forceinline__ float dg_round_e4m3(float x) { return dg_round_fp8(x, 3, -6, 448.0f); }
__device__ __forceinline__ float dg_round_e5m2(float x) { return dg_round_fp8(x, 2, -14, 57344.0f); }
__device__ __forceinline__ float dg_round_i8(float x) { return fminf(fmaxf(rintf(x), -128.0f), 127.0f); }
__device__ __forceinline__ float dg_round_i32(float x) { return (float)__float2int_rn(x); }

// ---- amax outputs (`amax_of D`) ------------------------------------------------------------
// The largest |value| the epilogue computes (before its rounding to D's dtype), over D or per
// row: each thread keeps a running maximum per row slot (PER_ROW: the rows of a tile it holds,
// whose row index the caller passes; else one) and adds it into the output with atomicMax on the
// float's bits, which order as the floats do for non-negative values (the launcher zeroes the
// output before the kernel). NaN values are ignored (fmaxf); infinities count. ON = false
// (no amax output) compiles to nothing.
template <bool ON, bool PER_ROW, int SLOTS>
struct dg_amax {
  static constexpr int N_SLOTS = PER_ROW ? SLOTS : 1;
  float* out;
  float value[N_SLOTS];
  int row[N_SLOTS];
  __device__ __forceinline__ explicit dg_amax(float* o) : out(o) {
#pragma unroll
    for (int s = 0; s < N_SLOTS; ++s) {
      value[s] = 0.0f;
      row[s] = -1;
    }
  }
  // Element (m, ...) of D, in the caller's row slot `slot`, has value v.
  __device__ __forceinline__ void add(int slot, int m, float v) {
    if constexpr (ON) {
      const int s = PER_ROW ? slot : 0;
      value[s] = fmaxf(value[s], fabsf(v));
      row[s] = m;
    }
  }
  // PER_ROW, once a tile's rows are done: the maximum over the LANES adjacent lanes that hold
  // parts of the same rows, then one atomic per row from the first of them. Every lane of the
  // warp calls it.
  template <int LANES>
  __device__ __forceinline__ void flush_rows() {
    if constexpr (ON && PER_ROW) {
#pragma unroll
      for (int s = 0; s < SLOTS; ++s) {
        float v = value[s];
        int r = row[s];
#pragma unroll
        for (int x = 1; x < LANES; x *= 2) {
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, x));
          r = max(r, __shfl_xor_sync(0xffffffffu, r, x));
        }
        if (threadIdx.x % LANES == 0 && r >= 0 && v > 0.0f)
          atomicMax(reinterpret_cast<unsigned*>(out + r), __float_as_uint(v));
        value[s] = 0.0f;
        row[s] = -1;
      }
    }
  }
  // Per tensor, once the thread is done: the warp's maximum, one atomic per warp. Every lane of
  // the warp calls it.
  __device__ __forceinline__ void finish() {
    if constexpr (ON && !PER_ROW) {
      float v = value[0];
#pragma unroll
      for (int x = 16; x > 0; x /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, x));
      if (threadIdx.x % 32 == 0 && v > 0.0f)
        atomicMax(reinterpret_cast<unsigned*>(out), __float_as_uint(v));
    }
  }
};

// ---- warp sums ---------------------------------------------------------------------------
// Sums v[0..N) over the warp's lanes, transposing as it goes: each halving trades half the
// values with the lane `offset` away, so N values (a power of two, at most 32) take
// N - 1 + (5 - log2 N) shuffles in all. Lane l ends with the sum of value (l >> (5 - log2 N)).
// The CUDA-core kernels whose lanes split K (gemv's FFMA sums, tiny) reduce with it.
template <int N, int SIZE>
__device__ __forceinline__ float dg_warp_transpose_sum(float (&v)[SIZE]) {
  static_assert(N <= SIZE && N <= 32 && (N & (N - 1)) == 0, "2^n <= 32 values of the array");
  const int lane = threadIdx.x % 32;
  int live = N;
#pragma unroll
  for (int offset = 16; offset >= 1; offset /= 2) {
    if (live > 1) {
      const int half = live / 2;
      const bool upper = lane & offset;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if (i < half) {
          const float send = upper ? v[i] : v[i + half];
          const float keep = upper ? v[i + half] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
        }
      }
      live = half;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], offset);
    }
  }
  return v[0];
}

// ---- tile order -----------------------------------------------------------------------------
// Programmatic dependent launch: right behind the repack copy the GEMM is launched early, so
// its launch overlaps the copy. Every thread waits here, first thing in the kernel (the scales
// and scalars it reads up front may be the copy's output), until the grid ahead of it has
// finished and its writes are visible. A kernel launched without that attribute passes at once;
// before sm_90 there is no such launch.
__device__ __forceinline__ void dg_wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Output tiles are visited in column-major groups of GROUP_M tile rows, so the blocks resident
// at one time share A rows and B columns in L2. GROUP_M = 1 is plain row-major order.
template <int GROUP_M>
__device__ __forceinline__ void dg_tile_coords(int block, int tiles_m, int tiles_n,
                                               int& tile_m, int& tile_n) {
  // int suffices: extents are below 2^31 - 2^16 (codegen::MAX_EXTENT) and tiles at least 8 wide
  // wherever GROUP_M > 1 (gemv's 1-wide tiles keep GROUP_M = 1), so GROUP_M * tiles_n < 2^31;
  // 64-bit division here costs the sm90 consumers registers they do not have.
  static_assert(GROUP_M >= 1 && GROUP_M <= 8, "raster groups of 1 to 8 tile rows");
  // Unsigned (every value is non-negative), and every group but the last has GROUP_M rows, a
  // power of two or a constant divisor: one runtime division instead of two on the way to a
  // block's first load.
  const unsigned blocks_per_group = GROUP_M * (unsigned)tiles_n;
  const unsigned group = (unsigned)block / blocks_per_group;
  const int first_tile_m = (int)group * GROUP_M;
  const unsigned group_rows = (unsigned)min(tiles_m - first_tile_m, GROUP_M);
  const unsigned in_group = (unsigned)block - group * blocks_per_group;
  const unsigned column = group_rows == GROUP_M ? in_group / GROUP_M : in_group / group_rows;
  tile_m = first_tile_m + (int)(in_group - column * group_rows);
  tile_n = (int)column;
}

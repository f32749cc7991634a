//! What each backend's generator can produce. The search enumerates plans and asks here whether
//! a plan is generable and how its shared memory is laid out, so the model, the search and the
//! generated kernel agree on every byte (one source of truth).

use crate::dtype::DType;
use crate::plan::{Backend, SmemLayout, SmemSwizzle, Tile, WarpLayout};
use crate::spec::{KernelSpec, Layout};

/// Backends with a working generator. The model can predict others; the search only returns these.
pub const GENERATED_BACKENDS: [Backend; 3] = [Backend::Sm90, Backend::Sm80, Backend::Simt];

/// How the sm80 kernel stages a row of `dtype`: 16-bit operands (read by ldmatrix) are
/// XOR-swizzled in 16-byte chunks, which keeps both ldmatrix's 8 row reads and the cp.async writes
/// of whole rows free of bank conflicts with no padding; other types (tf32's 32-bit loads) pad each
/// row by 16 bytes, which makes 8 consecutive rows start in distinct 4-bank groups.
pub fn sm80_swizzle(dtype: DType) -> SmemSwizzle {
    if dtype.size_bytes() == 2 {
        SmemSwizzle::XorChunks
    } else {
        SmemSwizzle::Padded {
            pad_elems: 16 / dtype.size_bytes(),
        }
    }
}

/// Elements of padding per staged row of the sm80 kernel (0 when swizzled).
pub fn sm80_pad_elems(dtype: DType) -> u32 {
    match sm80_swizzle(dtype) {
        SmemSwizzle::Padded { pad_elems } => pad_elems,
        SmemSwizzle::XorChunks | SmemSwizzle::None => 0,
    }
}

/// Elements of padding per smem row of the SIMT kernel (f32 staging): 4 floats.
pub const SIMT_PAD_ELEMS: u32 = 4;

/// The shared-memory layout a backend uses for this spec, tile and thread layout.
pub fn smem_layout(
    spec: &KernelSpec,
    backend: Backend,
    tile: Tile,
    warps: &WarpLayout,
) -> SmemLayout {
    let a = spec.a();
    let b = spec.b();
    match backend {
        Backend::Sm90 => super::sm90::smem_layout(spec, tile, warps),
        Backend::Sm80 => {
            let e = a.dtype.size_bytes();
            let pad = sm80_pad_elems(a.dtype);
            // A is staged in its global order: K-major rows of tile.k for `row`, M-major rows of
            // tile.m for `col`. Likewise B: `col` (N rows of K) is K-major.
            let a_stage = match a.layout {
                Layout::Row => tile.m * (tile.k + pad),
                Layout::Col => tile.k * (tile.m + pad),
            } * e;
            let b_stage = match b.layout {
                Layout::Col => tile.n * (tile.k + pad),
                Layout::Row => tile.k * (tile.n + pad),
            } * e;
            SmemLayout {
                a_stage_bytes: a_stage,
                b_stage_bytes: b_stage,
                epilogue_bytes: 0,
                barrier_bytes: 0,
                scale_bytes: 0,
                swizzle: sm80_swizzle(a.dtype),
            }
        }
        Backend::Simt => SmemLayout {
            a_stage_bytes: tile.k * (tile.m + SIMT_PAD_ELEMS) * 4,
            b_stage_bytes: tile.k * (tile.n + SIMT_PAD_ELEMS) * 4,
            epilogue_bytes: 0,
            barrier_bytes: 0,
            scale_bytes: 0,
            swizzle: SmemSwizzle::Padded {
                pad_elems: SIMT_PAD_ELEMS,
            },
        },
    }
}

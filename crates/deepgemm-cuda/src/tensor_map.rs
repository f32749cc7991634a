//! TMA tensor maps (`cuTensorMapEncodeTiled`) for the kernel arguments that ask for one: a 2-D
//! view of an operand, contiguous dimension first, or a 1-D view of all its elements (`flat`), as
//! the kernel's metadata describes it.

use crate::error::{driver, CudaError};
use cudarc::driver::sys;
use deepgemm::codegen::TensorMapArg;
use deepgemm::dtype::DType;
use deepgemm::reference::Geometry;

/// TMA reads global rows whose address and pitch are multiples of this many bytes.
pub const GLOBAL_ALIGNMENT_BYTES: u64 = 16;

/// Whether TMA can address rows at `ptr`, `pitch_bytes` apart (the kernels test the same for
/// their D stores).
pub fn readable(ptr: sys::CUdeviceptr, pitch_bytes: u64) -> bool {
    ptr.is_multiple_of(GLOBAL_ALIGNMENT_BYTES) && pitch_bytes.is_multiple_of(GLOBAL_ALIGNMENT_BYTES)
}

/// Encodes `map` over the operand at `ptr` (already repacked if it had to be). Out-of-bounds
/// parts of a box read as zeros, which is how the kernels handle edge tiles and K tails.
pub fn encode(
    map: &TensorMapArg,
    ptr: sys::CUdeviceptr,
    dtype: DType,
    geometry: &Geometry,
) -> Result<sys::CUtensorMap, CudaError> {
    let invalid = |problem: String| CudaError::InvalidOperand {
        operand: map.operand.clone(),
        problem,
    };
    let data_type = match dtype {
        DType::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::F32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        // The copy engine rounds each f32 to tf32 as it loads (to nearest, ties away from zero,
        // as sm80's cvt.rna: gpu_tf32_inputs_round_ties_away_on_sm90); wgmma would otherwise drop
        // the 13 low mantissa bits, a truncation biased toward zero.
        DType::Tf32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
        DType::E4m3 | DType::E5m2 | DType::I8 => {
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8
        }
        DType::I32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
    };
    let swizzle = match map.swizzle_bytes {
        0 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        other => return Err(invalid(format!("no TMA swizzle of {other} bytes"))),
    };
    // A flat view has no pitch: the operand is dense (a scale tensor), one row of all its elements.
    let pitch = if map.flat {
        GLOBAL_ALIGNMENT_BYTES
    } else {
        geometry.ld * dtype.size_bytes() as u64
    };
    if !readable(ptr, pitch) {
        return Err(invalid(format!(
            "TMA needs a 16-byte aligned address and pitch (address {ptr:#x}, pitch {pitch} bytes)"
        )));
    }
    let (dims, rank) = if map.flat {
        ([geometry.inner() * geometry.outer(), 1], 1)
    } else {
        ([geometry.inner(), geometry.outer()], 2)
    };
    if dims.iter().any(|&d| d == 0 || d > u32::MAX as u64) {
        return Err(invalid(format!(
            "extents {}x{} are outside TMA's 1..2^32 range",
            dims[0], dims[1]
        )));
    }
    // The kernels address a flat view's elements with signed 32-bit TMA coordinates.
    if map.flat && dims[0] > i32::MAX as u64 {
        return Err(invalid(format!(
            "{} elements are beyond the 2^31 a flat TMA view can address",
            dims[0]
        )));
    }
    if pitch >= 1 << 40 {
        return Err(invalid(format!(
            "a pitch of {pitch} bytes is beyond TMA's 2^40 limit"
        )));
    }
    let strides = [pitch];
    let boxes = [map.box_inner, map.box_outer];
    let element_strides = [1u32, 1];
    let mut encoded = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every array holds at least the rank's entries (the driver reads `rank` dims, boxes
    // and element strides and `rank - 1` strides); the address is a live device allocation of the
    // caller's; the driver writes the 128-byte map into `encoded`.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            encoded.as_mut_ptr(),
            data_type,
            rank,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(driver("cuTensorMapEncodeTiled"))?;
    // SAFETY: the call succeeded, so the driver initialised the map.
    Ok(unsafe { encoded.assume_init() })
}

//! What a runtime launch reuses: tensor maps encoded once per operand address, and scratch
//! memory (repack buffers, workspaces) kept per stream.
//!
//! Scratch is per stream because work on one stream runs in order: the next launch on a stream
//! may reuse a buffer the previous one used. A buffer that is too small is replaced by a larger
//! one (at least twice the size) and the old one is kept until the kernel is dropped, since a
//! launch still in flight may be reading it; nothing here synchronizes, so launching into a CUDA
//! graph capture works once the pool has been sized by one launch outside the capture
//! (allocation is not allowed while a stream captures).

use cudarc::driver::sys;
use deepgemm::codegen::TensorMapArg;
use deepgemm::dtype::DType;
use deepgemm::reference::Geometry;
use deepgemm_cuda::device::{DeviceBuffer, Gpu, RawStream};
use deepgemm_cuda::launch::{LaunchResources, Scratch};
use deepgemm_cuda::pitch_copy::PitchCopy;
use deepgemm_cuda::{tensor_map, CudaError};
use std::collections::HashMap;
use std::mem::Discriminant;
use std::sync::Arc;

/// Encoded maps kept per variant; past this many (a caller cycling through fresh buffers) the
/// cache starts over rather than grow without bound.
const MAX_CACHED_MAPS: usize = 4096;

/// Everything a map's 128 bytes depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MapKey {
    ptr: u64,
    dtype: Discriminant<DType>,
    rows: u64,
    cols: u64,
    ld: u64,
    col_major: bool,
    box_inner: u32,
    box_outer: u32,
    swizzle_bytes: u32,
}

/// One variant's reusable state (behind the variant's lock).
#[derive(Default)]
pub(crate) struct VariantState {
    maps: HashMap<MapKey, sys::CUtensorMap>,
    /// Per stream, one buffer per scratch slot of a launch.
    scratch: HashMap<RawStream, Vec<Option<DeviceBuffer>>>,
    /// Buffers replaced by larger ones, kept for launches still in flight.
    retired: Vec<DeviceBuffer>,
    /// Counters for tests and `inspect`-style reports.
    pub(crate) encodes: u64,
    pub(crate) allocations: u64,
}

/// [`LaunchResources`] over a variant's state for one launch on `stream`.
pub(crate) struct Pooled<'a> {
    pub(crate) state: &'a mut VariantState,
    pub(crate) stream: RawStream,
    pub(crate) pitch_copy: &'a Arc<PitchCopy>,
}

impl LaunchResources for Pooled<'_> {
    fn scratch(&mut self, gpu: &Gpu, slot: usize, bytes: usize) -> Result<Scratch, CudaError> {
        let slots = self.state.scratch.entry(self.stream).or_default();
        if slots.len() <= slot {
            slots.resize_with(slot + 1, || None);
        }
        let current = slots[slot].as_ref().map_or(0, DeviceBuffer::len);
        if current < bytes {
            let grown = gpu.alloc(bytes.max(current.saturating_mul(2)))?;
            self.state.allocations += 1;
            if let Some(old) = slots[slot].replace(grown) {
                self.state.retired.push(old);
            }
        }
        Ok(Scratch::Lent(
            slots[slot].as_ref().map_or(0, DeviceBuffer::ptr),
        ))
    }

    fn tensor_map(
        &mut self,
        map: &TensorMapArg,
        ptr: sys::CUdeviceptr,
        dtype: DType,
        geometry: &Geometry,
    ) -> Result<sys::CUtensorMap, CudaError> {
        let key = MapKey {
            ptr,
            dtype: std::mem::discriminant(&dtype),
            rows: geometry.rows,
            cols: geometry.cols,
            ld: geometry.ld,
            col_major: geometry.layout == deepgemm::spec::Layout::Col,
            box_inner: map.box_inner,
            box_outer: map.box_outer,
            swizzle_bytes: map.swizzle_bytes,
        };
        if let Some(encoded) = self.state.maps.get(&key) {
            return Ok(*encoded);
        }
        let encoded = tensor_map::encode(map, ptr, dtype, geometry)?;
        if self.state.maps.len() >= MAX_CACHED_MAPS {
            self.state.maps.clear();
        }
        self.state.maps.insert(key, encoded);
        self.state.encodes += 1;
        Ok(encoded)
    }

    fn pitch_copy(&mut self, _gpu: &Gpu) -> Result<Arc<PitchCopy>, CudaError> {
        Ok(self.pitch_copy.clone())
    }
}

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
use deepgemm::plan::Shape;
use deepgemm::reference::Geometry;
use deepgemm_cuda::device::{DeviceBuffer, Gpu, RawStream};
use deepgemm_cuda::launch::{KernelOnly, LaunchResources, Scratch};
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
    /// The last launch, when it was the kernel alone: the next one with the same arguments
    /// enqueues it again without checking and planning them again.
    pub(crate) last: Option<RepeatableLaunch>,
    /// Counters for tests and `inspect`-style reports.
    pub(crate) encodes: u64,
    pub(crate) allocations: u64,
}

/// The last planned launch of a variant and the arguments its plan was made from; `launch` is
/// `None` when it was more than the kernel alone (repacks, zeroing, a workspace). Updated in
/// place, so that a caller alternating buffers allocates nothing here.
pub(crate) struct RepeatableLaunch {
    pub(crate) key: LaunchKey,
    pub(crate) launch: Option<KernelOnly>,
}

/// Everything a launch's checks and plan depend on: the shape, the stream, each operand as
/// given (name, address, leading dimension, dtype) and each param.
#[derive(Debug)]
pub(crate) struct LaunchKey {
    shape: Shape,
    stream: RawStream,
    operands: Vec<(String, u64, u64, Option<DType>)>,
    params: Vec<(String, u64)>,
}

impl LaunchKey {
    pub(crate) fn new(
        shape: Shape,
        stream: RawStream,
        operands: &[crate::Operand],
        params: &[(&str, f64)],
    ) -> LaunchKey {
        let mut key = LaunchKey {
            shape,
            stream,
            operands: Vec::new(),
            params: Vec::new(),
        };
        key.set(shape, stream, operands, params);
        key
    }

    /// Makes these arguments the key's, reusing its names' allocations.
    pub(crate) fn set(
        &mut self,
        shape: Shape,
        stream: RawStream,
        operands: &[crate::Operand],
        params: &[(&str, f64)],
    ) {
        fn set_name(slot: &mut String, name: &str) {
            if slot != name {
                slot.clear();
                slot.push_str(name);
            }
        }
        self.shape = shape;
        self.stream = stream;
        self.operands.truncate(operands.len());
        for (i, o) in operands.iter().enumerate() {
            match self.operands.get_mut(i) {
                Some(slot) => {
                    set_name(&mut slot.0, o.name);
                    (slot.1, slot.2, slot.3) = (o.ptr, o.ld, o.dtype);
                }
                None => self
                    .operands
                    .push((o.name.to_string(), o.ptr, o.ld, o.dtype)),
            }
        }
        self.params.truncate(params.len());
        for (i, &(name, value)) in params.iter().enumerate() {
            match self.params.get_mut(i) {
                Some(slot) => {
                    set_name(&mut slot.0, name);
                    slot.1 = value.to_bits();
                }
                None => self.params.push((name.to_string(), value.to_bits())),
            }
        }
    }

    /// Whether these arguments are the key's, given in the same order (a param is compared by
    /// its bits, so that NaN equals itself and 0.0 differs from -0.0).
    pub(crate) fn is(
        &self,
        shape: Shape,
        stream: RawStream,
        operands: &[crate::Operand],
        params: &[(&str, f64)],
    ) -> bool {
        self.shape == shape
            && self.stream == stream
            && self.operands.len() == operands.len()
            && self.params.len() == params.len()
            && self
                .operands
                .iter()
                .zip(operands)
                .all(|((name, ptr, ld, dtype), o)| {
                    name == o.name && *ptr == o.ptr && *ld == o.ld && *dtype == o.dtype
                })
            && self
                .params
                .iter()
                .zip(params)
                .all(|((name, bits), &(given, value))| name == given && *bits == value.to_bits())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Operand;

    fn operand(name: &str, ptr: u64, ld: u64) -> Operand<'_> {
        Operand {
            name,
            ptr,
            ld,
            dtype: None,
        }
    }

    #[test]
    fn a_launch_key_matches_only_the_same_arguments() {
        let shape = Shape::new(64, 256, 384);
        let stream = RawStream(std::ptr::null_mut());
        let ops = [operand("A", 0x1000, 384), operand("D", 0x9000, 256)];
        let params = [("alpha", 1.5)];
        let key = LaunchKey::new(shape, stream, &ops, &params);
        assert!(key.is(shape, stream, &ops, &params));

        let other_stream = RawStream(0x10 as sys::CUstream);
        assert!(!key.is(Shape::new(65, 256, 384), stream, &ops, &params));
        assert!(!key.is(shape, other_stream, &ops, &params));
        let changed: [[Operand; 2]; 5] = [
            [operand("A", 0x1000, 384), operand("D", 0x9100, 256)],
            [operand("A", 0x1000, 385), operand("D", 0x9000, 256)],
            [operand("D", 0x9000, 256), operand("A", 0x1000, 384)],
            [operand("A", 0x1000, 384), operand("C", 0x9000, 256)],
            [
                operand("A", 0x1000, 384),
                Operand {
                    dtype: Some(DType::Bf16),
                    ..operand("D", 0x9000, 256)
                },
            ],
        ];
        for ops in &changed {
            assert!(!key.is(shape, stream, ops, &params), "{ops:?}");
        }
        assert!(!key.is(shape, stream, &ops[..1], &params));
        assert!(!key.is(shape, stream, &ops, &[("alpha", 1.25)]));
        assert!(!key.is(shape, stream, &ops, &[("beta", 1.5)]));
        assert!(!key.is(shape, stream, &ops, &[]));
        let zero = LaunchKey::new(shape, stream, &ops, &[("alpha", 0.0)]);
        assert!(!zero.is(shape, stream, &ops, &[("alpha", -0.0)]));
        let nan = LaunchKey::new(shape, stream, &ops, &[("alpha", f64::NAN)]);
        assert!(nan.is(shape, stream, &ops, &[("alpha", f64::NAN)]));

        // `set` makes another launch's arguments the key's, more of them or fewer.
        let mut key = key;
        for ops in &changed {
            key.set(shape, other_stream, ops, &[("beta", 2.0)]);
            assert!(
                key.is(shape, other_stream, ops, &[("beta", 2.0)]),
                "{ops:?}"
            );
            assert!(!key.is(shape, stream, ops, &[("beta", 2.0)]), "{ops:?}");
        }
        key.set(shape, stream, &ops[..1], &[]);
        assert!(key.is(shape, stream, &ops[..1], &[]));
        assert!(!key.is(shape, stream, &ops, &[]));
        key.set(shape, stream, &ops, &params);
        assert!(key.is(shape, stream, &ops, &params));
    }
}

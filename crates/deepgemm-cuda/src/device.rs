//! The GPU: driver discovery, a context and stream on one device, device memory, and which
//! compiled architectures the device can run.

use crate::error::{driver, CudaError};
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::sync::Arc;

/// Whether `libcuda.so.1` can be loaded (checked before any driver call: cudarc panics otherwise).
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { sys::is_culib_present() }
}

/// `cuDriverGetVersion` (e.g. 13000 for CUDA 13.0), or `None` without a driver. Needs no GPU.
pub fn driver_version() -> Option<i32> {
    if !driver_present() {
        return None;
    }
    let mut version = 0;
    // SAFETY: the library is present; the pointer is valid for writes.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .ok()
        .map(|()| version)
}

/// The code architecture NVRTC should target for a compute capability: the `a` variant where
/// the arch-specific features (wgmma, setmaxnreg) live (9.0, 10.0), the plain one otherwise.
pub fn arch_for(compute_capability: (u32, u32)) -> String {
    let (major, minor) = compute_capability;
    let suffix = if matches!((major, minor), (9, 0) | (10, 0)) {
        "a"
    } else {
        ""
    };
    format!("sm_{major}{minor}{suffix}")
}

/// Whether a cubin compiled for `arch` (`sm_86`, `sm_90a`) runs on a device of this compute
/// capability: the same major version and a minor no newer than the device's; `a` variants run
/// only on exactly their own capability.
pub fn arch_runs_on(arch: &str, compute_capability: (u32, u32)) -> bool {
    let Some(digits) = arch.strip_prefix("sm_") else {
        return false;
    };
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let Ok(number) = digits.parse::<u32>() else {
        return false;
    };
    let (major, minor) = (number / 10, number % 10);
    if specific {
        (major, minor) == compute_capability
    } else {
        major == compute_capability.0 && minor <= compute_capability.1
    }
}

/// What the driver says about the device.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (u32, u32),
    /// The architecture to compile for, e.g. `sm_90a`.
    pub arch: String,
    pub sms: u32,
    /// Dynamic shared memory one block may opt in to, bytes.
    pub max_smem_per_block_bytes: u32,
    pub l2_bytes: u64,
    pub total_memory_bytes: u64,
    pub clock_mhz: u32,
    pub driver_version: i32,
}

/// A context and a stream on one device. Every operation of this crate enqueues on that stream:
/// the one [`Gpu::open`] creates, or a caller's (an inference engine's, torch's) in the view
/// [`Gpu::on_stream`] returns.
#[derive(Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    /// The stream `open` created, kept alive by every view (even one on another stream); work
    /// reaches it through `stream`.
    _own_stream: Arc<CudaStream>,
    /// Where work goes: `own_stream`, or the caller's.
    stream: RawStream,
    /// Shared, so that a per-call view costs two reference counts and no copy.
    info: Arc<GpuInfo>,
}

/// A `CUstream` handle as the driver gives it (null is the legacy default stream).
///
/// The driver's stream handles may be used from any thread; the raw pointer only lacks the
/// marker traits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawStream(pub sys::CUstream);

// SAFETY: a CUstream is an opaque driver handle, valid on every thread of the process.
unsafe impl Send for RawStream {}
// SAFETY: as above; the handle is never dereferenced on the host.
unsafe impl Sync for RawStream {}

impl Gpu {
    /// Opens device `ordinal`. Without a driver or a GPU this is an error that says so.
    pub fn open(ordinal: usize) -> Result<Gpu, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|source| CudaError::NoDevice { ordinal, source })?;
        let stream = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let attribute = |a: sys::CUdevice_attribute| -> Result<u32, CudaError> {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(driver("cuDeviceGetAttribute"))
        };
        use sys::CUdevice_attribute::*;
        let compute_capability = (
            attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let info = GpuInfo {
            ordinal,
            name: ctx.name().map_err(driver("cuDeviceGetName"))?,
            compute_capability,
            arch: arch_for(compute_capability),
            sms: attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_smem_per_block_bytes: attribute(
                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            l2_bytes: attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            total_memory_bytes: ctx.total_mem().map_err(driver("cuDeviceTotalMem"))? as u64,
            clock_mhz: attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000,
            driver_version: driver_version().unwrap_or(0),
        };
        Ok(Gpu {
            ctx,
            stream: RawStream(stream.cu_stream()),
            _own_stream: stream,
            info: Arc::new(info),
        })
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// A view of this GPU whose work goes to `stream`, a stream of this device's primary context
    /// that the caller owns (null: the legacy default stream). Nothing is synchronised: work is
    /// ordered after what the caller enqueued there before, as any kernel of theirs would be.
    pub fn on_stream(&self, stream: RawStream) -> Gpu {
        Gpu {
            stream,
            ..self.clone()
        }
    }

    /// The stream this view enqueues on.
    pub fn raw_stream(&self) -> RawStream {
        self.stream
    }

    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream.0
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Makes this device's context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))
    }

    /// Waits for everything enqueued so far; kernel faults surface here.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.bind()?;
        // SAFETY: the stream belongs to this context (`open` made it, or `on_stream`'s caller).
        unsafe { result::stream::synchronize(self.stream()) }.map_err(driver("cuStreamSynchronize"))
    }

    /// Allocates `bytes` of device memory (contents undefined).
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        self.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            // SAFETY: the context is current; the size is non-zero.
            unsafe { result::malloc_sync(bytes) }.map_err(driver("cuMemAlloc"))?
        };
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx: self.ctx.clone(),
        })
    }

    /// Fills `bytes` bytes at `ptr` with `value`, in stream order.
    pub fn memset(&self, ptr: sys::CUdeviceptr, value: u8, bytes: usize) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the caller passes memory it owns on this device.
        unsafe { result::memset_d8_async(ptr, value, bytes, self.stream()) }
            .map_err(driver("cuMemsetD8Async"))
    }

    /// Copies host bytes to `buffer` at `offset` in stream order and waits for the copy.
    ///
    /// Not `cuMemcpyHtoD`: from pageable memory it returns once the bytes are staged, and its DMA
    /// then runs on the legacy default stream, which this crate's non-blocking stream does not
    /// wait for. A kernel launched right after could read (or a copy-back be overwritten by) the
    /// upload still in flight: it was seen as poison left in a 32 KB output.
    pub fn upload(
        &self,
        buffer: &DeviceBuffer,
        offset: usize,
        data: &[u8],
    ) -> Result<(), CudaError> {
        buffer.check_range(offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range lies inside the buffer; `data` outlives the copy, which the
        // synchronisation below waits for.
        unsafe { result::memcpy_htod_async(buffer.ptr + offset as u64, data, self.stream()) }
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        self.synchronize()
    }

    /// Copies `out.len()` bytes from `buffer` at `offset` to the host, after the stream's work.
    pub fn download(
        &self,
        buffer: &DeviceBuffer,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), CudaError> {
        buffer.check_range(offset, out.len())?;
        self.synchronize()?;
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: the range lies inside the buffer; the stream is idle.
        unsafe { result::memcpy_dtoh_sync(out, buffer.ptr + offset as u64) }
            .map_err(driver("cuMemcpyDtoH"))
    }

    /// Enqueues a strided copy of `height` lines of `width` bytes between device pointers with
    /// any pitches (cuMemcpy2D handles unaligned addresses and pitches).
    pub fn copy_2d(&self, copy: Copy2d) -> Result<(), CudaError> {
        if copy.width == 0 || copy.height == 0 {
            return Ok(());
        }
        self.bind()?;
        let params = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: copy.src,
            srcArray: std::ptr::null_mut(),
            srcPitch: copy.src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: copy.dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: copy.dst_pitch,
            WidthInBytes: copy.width,
            Height: copy.height,
        };
        // SAFETY: both ranges are device memory the caller owns; the struct outlives the call.
        unsafe { sys::cuMemcpy2DAsync_v2(&params, self.stream()) }
            .result()
            .map_err(driver("cuMemcpy2DAsync"))
    }
}

/// A 2-D device-to-device copy (all sizes in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy2d {
    pub src: sys::CUdeviceptr,
    pub src_pitch: usize,
    pub dst: sys::CUdeviceptr,
    pub dst_pitch: usize,
    pub width: usize,
    pub height: usize,
}

/// Device memory owned by this process, freed on drop.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    /// The device address (0 for an empty buffer).
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<(), CudaError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(CudaError::InvalidOperand {
                operand: "device buffer".into(),
                problem: format!(
                    "bytes {offset}..{offset}+{len} lie outside its {} bytes",
                    self.bytes
                ),
            }),
        }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by cuMemAlloc in this context and freed only here. A failure
            // (a context already broken by a kernel fault) leaves nothing else to do.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_follow_compute_capability() {
        assert_eq!(arch_for((9, 0)), "sm_90a");
        assert_eq!(arch_for((8, 0)), "sm_80");
        assert_eq!(arch_for((8, 9)), "sm_89");
        assert_eq!(arch_for((12, 0)), "sm_120");
    }

    #[test]
    fn cubins_run_within_their_major_version() {
        assert!(arch_runs_on("sm_90a", (9, 0)));
        assert!(arch_runs_on("sm_90", (9, 0)));
        assert!(arch_runs_on("sm_80", (8, 6)));
        assert!(arch_runs_on("sm_80", (8, 9)));
        assert!(!arch_runs_on("sm_86", (8, 0)));
        assert!(!arch_runs_on("sm_80", (9, 0)));
        assert!(!arch_runs_on("sm_90a", (10, 0)));
        assert!(!arch_runs_on("sm_100a", (10, 3)));
        assert!(!arch_runs_on("compute_90", (9, 0)));
        assert!(!arch_runs_on("sm_x", (9, 0)));
    }

    #[test]
    fn without_a_driver_open_is_an_error_not_a_panic() {
        if driver_present() {
            return; // a machine with a driver tests the other branch in the gpu_ tests
        }
        let err = Gpu::open(0).err().expect("no driver here");
        assert!(err
            .to_string()
            .contains("no CUDA driver found (libcuda.so.1)"));
        assert_eq!(driver_version(), None);
    }
}

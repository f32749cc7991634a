//! Loading a compiled kernel and launching it on device operands.
//!
//! [`LoadedKernel::prepare`] checks every operand against the spec and the shape (null pointers,
//! extents, leading dimensions shorter than a row, dtypes), builds the parameter buffer in the
//! kernel's argument order, and plans a repack for every operand whose address or leading
//! dimension breaks the kernel's alignment: such an operand is copied (by the pitched-copy kernel
//! of [`crate::pitch_copy`], any source alignment) into a workspace with a pitch rounded up to 16
//! bytes before the launch, and an output is copied back after it (cuMemcpy2D, whose destination
//! is the caller's misaligned buffer). [`Prepared::enqueue`] then runs copies, kernel and copies in stream
//! order, with no allocation, so it can be timed.
//!
//! Where the scratch memory, the tensor maps and the copy kernel come from is the caller's
//! choice ([`LaunchResources`]): `prepare` allocates and encodes afresh (what `run` and the tests
//! want), the runtime (`deepgemm-runtime`) hands out pooled workspaces and cached maps so that a
//! launch costs microseconds.

use crate::device::{arch_runs_on, Copy2d, DeviceBuffer, Gpu};
use crate::error::{driver, CudaError};
use crate::nvrtc::{Compiled, Resources};
use crate::pitch_copy::{PitchCopy, Transpose};
use crate::tensor_map;
use cudarc::driver::{result, sys};
use deepgemm::codegen::{GeneratedKernel, KernelArg, TensorMapArg};
use deepgemm::dtype::DType;
use deepgemm::plan::Shape;
use deepgemm::reference::{operand_geometry, Geometry};
use deepgemm::spec::{Direction, KernelSpec, Role, ShapeSym};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// Where a launch gets what it needs besides the caller's operands.
pub trait LaunchResources {
    /// Device memory of at least `bytes` that stays valid, and unused by any other launch that
    /// may run at the same time, for as long as the [`Prepared`] lives. `slot` numbers the
    /// requests of one launch (0, 1, ...), so a pool can keep one buffer per slot.
    fn scratch(&mut self, gpu: &Gpu, slot: usize, bytes: usize) -> Result<Scratch, CudaError>;
    /// The TMA descriptor of `map` over the operand at `ptr`.
    fn tensor_map(
        &mut self,
        map: &TensorMapArg,
        ptr: sys::CUdeviceptr,
        dtype: DType,
        geometry: &Geometry,
    ) -> Result<sys::CUtensorMap, CudaError>;
    /// The repack copy kernel, loaded on this GPU.
    fn pitch_copy(&mut self, gpu: &Gpu) -> Result<Arc<PitchCopy>, CudaError>;
}

/// Scratch memory for one launch: owned by the launch, or lent by a pool that outlives it.
pub enum Scratch {
    Owned(DeviceBuffer),
    /// Memory the lender keeps alive and reserves for this launch.
    Lent(sys::CUdeviceptr),
}

impl Scratch {
    pub fn ptr(&self) -> sys::CUdeviceptr {
        match self {
            Scratch::Owned(buffer) => buffer.ptr(),
            Scratch::Lent(ptr) => *ptr,
        }
    }
}

/// Fresh allocations, fresh encodings, and the copy kernel compiled (through the cubin cache)
/// on first use: nothing kept between launches.
#[derive(Default)]
pub struct FreshResources {
    pitch_copy: Option<Arc<PitchCopy>>,
}

impl LaunchResources for FreshResources {
    fn scratch(&mut self, gpu: &Gpu, _slot: usize, bytes: usize) -> Result<Scratch, CudaError> {
        Ok(Scratch::Owned(gpu.alloc(bytes)?))
    }

    fn tensor_map(
        &mut self,
        map: &TensorMapArg,
        ptr: sys::CUdeviceptr,
        dtype: DType,
        geometry: &Geometry,
    ) -> Result<sys::CUtensorMap, CudaError> {
        tensor_map::encode(map, ptr, dtype, geometry)
    }

    fn pitch_copy(&mut self, gpu: &Gpu) -> Result<Arc<PitchCopy>, CudaError> {
        if let Some(copy) = &self.pitch_copy {
            return Ok(copy.clone());
        }
        let copy = Arc::new(PitchCopy::load(gpu)?);
        self.pitch_copy = Some(copy.clone());
        Ok(copy)
    }
}

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_SMEM_LIMIT: u32 = 48 * 1024;
/// Repacked operands get a pitch that is a multiple of this many bytes (the widest copy).
const REPACK_PITCH_ALIGN: u64 = 16;

/// A kernel's module loaded on a device.
pub struct LoadedKernel {
    module: sys::CUmodule,
    function: sys::CUfunction,
    kernel: GeneratedKernel,
    ctx: Arc<cudarc::driver::CudaContext>,
    resources: Resources,
    /// Clusters (blocks, for a kernel without clusters) the GPU runs at once: a persistent
    /// kernel's grid.
    resident_clusters: u32,
}

impl Gpu {
    /// Loads a compiled kernel. Refuses a cubin built for an architecture this GPU cannot run,
    /// and opts the function in to more than 48 KiB of dynamic shared memory when it needs it.
    pub fn load(
        &self,
        kernel: &GeneratedKernel,
        compiled: &Compiled,
    ) -> Result<LoadedKernel, CudaError> {
        let info = self.info();
        if !arch_runs_on(&compiled.arch, info.compute_capability) {
            return Err(CudaError::ArchMismatch {
                entry: kernel.entry.clone(),
                kernel_arch: compiled.arch.clone(),
                gpu: info.name.clone(),
                gpu_arch: info.arch.clone(),
            });
        }
        let entry = CString::new(kernel.entry.clone()).map_err(|_| CudaError::InvalidOperand {
            operand: kernel.entry.clone(),
            problem: "the entry name contains a NUL byte".into(),
        })?;
        self.bind()?;
        // SAFETY: the cubin is a complete image NVRTC produced; it outlives the call.
        let module = unsafe { result::module::load_data(compiled.cubin.as_ptr() as *const c_void) }
            .map_err(driver("cuModuleLoadData"))?;
        let loaded = |function| LoadedKernel {
            module,
            function,
            kernel: kernel.clone(),
            ctx: self.context().clone(),
            resources: compiled.resources,
            resident_clusters: 0,
        };
        // SAFETY: the module is live; on failure it is unloaded by the LoadedKernel's drop.
        let function = match unsafe { result::module::get_function(module, entry) } {
            Ok(function) => function,
            Err(e) => {
                drop(loaded(std::ptr::null_mut()));
                return Err(driver("cuModuleGetFunction")(e));
            }
        };
        let mut loaded = loaded(function);
        if !loaded.resources.reported {
            loaded.resources = driver_resources(function)?;
        }
        // Dynamic shared memory plus the kernel's static arrays, against what a block may opt in
        // to (never less than the 48 KiB every block gets).
        let needed = kernel.smem_bytes + loaded.resources.static_smem_bytes;
        let available = info.max_smem_per_block_bytes.max(DEFAULT_SMEM_LIMIT);
        if needed > available {
            return Err(CudaError::SharedMemory {
                entry: kernel.entry.clone(),
                needed,
                available,
            });
        }
        if kernel.smem_bytes > DEFAULT_SMEM_LIMIT {
            // SAFETY: the function is live; the value was checked against the device limit.
            unsafe {
                result::function::set_function_attribute(
                    function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    kernel.smem_bytes as i32,
                )
            }
            .map_err(driver("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))?;
        }
        loaded.resident_clusters = resident_clusters(self, function, kernel)?;
        if loaded.resident_clusters == 0 {
            return Err(CudaError::InvalidShape {
                shape: Shape::new(0, 0, 0),
                problem: format!(
                    "kernel `{}` cannot be resident on {}: {} threads, {} bytes of shared memory, \
                     clusters of {}",
                    kernel.entry, info.name, kernel.threads, kernel.smem_bytes, kernel.grid.cluster
                ),
            });
        }
        Ok(loaded)
    }
}

/// How many clusters of the kernel's cluster size (blocks, when it has none) fit on the GPU at
/// once, from the driver's occupancy calculator.
fn resident_clusters(
    gpu: &Gpu,
    function: sys::CUfunction,
    kernel: &GeneratedKernel,
) -> Result<u32, CudaError> {
    let cluster = kernel.grid.cluster.max(1);
    if cluster == 1 {
        let mut blocks = 0;
        // SAFETY: the function is live; the pointer is valid for writes.
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                function,
                kernel.threads as i32,
                kernel.smem_bytes as usize,
            )
        }
        .result()
        .map_err(driver("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        return Ok(blocks.max(0) as u32 * gpu.info().sms);
    }
    let mut attribute = cluster_attribute(cluster);
    let config = launch_config(
        (cluster * gpu.info().sms, 1, 1),
        kernel,
        gpu.stream(),
        std::slice::from_mut(&mut attribute),
    );
    let mut clusters = 0;
    // SAFETY: the function is live; the config and its one attribute outlive the call.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, function, &config) }
        .result()
        .map_err(driver("cuOccupancyMaxActiveClusters"))?;
    Ok(clusters.max(0) as u32)
}

fn cluster_attribute(cluster: u32) -> sys::CUlaunchAttribute {
    // SAFETY: an all-zero attribute is a valid value of this plain C struct.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = cluster;
    attribute.value.clusterDim.y = 1;
    attribute.value.clusterDim.z = 1;
    attribute
}

/// A `cuLaunchKernelEx` configuration with `attributes` (they must outlive it).
fn launch_config(
    grid: (u32, u32, u32),
    kernel: &GeneratedKernel,
    stream: sys::CUstream,
    attributes: &mut [sys::CUlaunchAttribute],
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: kernel.threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: kernel.smem_bytes,
        hStream: stream,
        attrs: if attributes.is_empty() {
            std::ptr::null_mut()
        } else {
            attributes.as_mut_ptr()
        },
        numAttrs: attributes.len() as u32,
    }
}

/// Programmatic dependent launch: the kernel may start before the kernel ahead of it on the
/// stream has finished; its `dg_wait_for_prior_grids` holds every thread until that grid is done
/// and its writes are visible.
fn early_start_attribute() -> sys::CUlaunchAttribute {
    // SAFETY: a plain C struct/union, for which all-zero is a valid value.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    attribute
}

/// A loaded function's registers, local memory and static shared memory, from the driver: what
/// ptxas reported, for a cubin whose compile log did not say. Local memory is counted as spills
/// (the driver does not tell stack frames and spills apart).
fn driver_resources(function: sys::CUfunction) -> Result<Resources, CudaError> {
    use sys::CUfunction_attribute as Attr;
    let get = |attribute, name: &'static str| {
        // SAFETY: the function is live.
        unsafe { result::function::get_function_attribute(function, attribute) }
            .map(|v| v.max(0) as u32)
            .map_err(driver(name))
    };
    let local = get(
        Attr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        "cuFuncGetAttribute(LOCAL_SIZE)",
    )?;
    Ok(Resources {
        registers: get(
            Attr::CU_FUNC_ATTRIBUTE_NUM_REGS,
            "cuFuncGetAttribute(NUM_REGS)",
        )?,
        spill_store_bytes: local,
        spill_load_bytes: local,
        static_smem_bytes: get(
            Attr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            "cuFuncGetAttribute(SHARED_SIZE)",
        )?,
        stack_frame_bytes: local,
        reported: false,
    })
}

impl LoadedKernel {
    /// Registers, spills and static shared memory: ptxas's report, or the driver's figures.
    pub fn resources(&self) -> Resources {
        self.resources
    }
}

impl Drop for LoadedKernel {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded in this context and unloaded only here.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// One operand on the device, as the caller owns it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceOperand {
    /// The spec's operand name.
    pub name: String,
    /// Address of element (0, 0).
    pub ptr: sys::CUdeviceptr,
    pub dtype: DType,
    pub geometry: Geometry,
}

/// Everything a launch needs besides the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchArgs {
    pub shape: Shape,
    pub operands: Vec<DeviceOperand>,
    /// The spec's params by name (missing ones take the spec's default).
    pub params: Vec<(String, f64)>,
}

/// One value of the parameter buffer.
#[derive(Debug, Clone, Copy)]
enum ArgValue {
    Pointer(sys::CUdeviceptr),
    LeadingDim(i64),
    Extent(i32),
    Param(f32),
    TensorMap(sys::CUtensorMap),
}

/// An operand copied to an aligned workspace around the launch.
struct Repack {
    name: String,
    /// The caller's operand and its pitch in bytes.
    user: sys::CUdeviceptr,
    user_pitch: usize,
    buffer: Scratch,
    pitch: usize,
    width: usize,
    height: usize,
    /// Outputs are copied in (so the poison and any unwritten values travel) and back out.
    copy_out: bool,
    /// Transposed instead of copied (`GeneratedKernel::transposed`): the caller's `height`
    /// lines of `width` bytes become `width` lines of `height` bytes, `pitch` apart.
    transpose: bool,
}

impl Repack {
    fn transposition(&self) -> Transpose {
        Transpose {
            src: self.user,
            src_pitch: self.user_pitch,
            dst: self.buffer.ptr(),
            dst_pitch: self.pitch,
            rows: self.height,
            cols: self.width,
        }
    }

    fn copy_in(&self) -> Copy2d {
        Copy2d {
            src: self.user,
            src_pitch: self.user_pitch,
            dst: self.buffer.ptr(),
            dst_pitch: self.pitch,
            width: self.width,
            height: self.height,
        }
    }

    fn copy_back(&self) -> Copy2d {
        Copy2d {
            src: self.buffer.ptr(),
            src_pitch: self.pitch,
            dst: self.user,
            dst_pitch: self.user_pitch,
            width: self.width,
            height: self.height,
        }
    }
}

/// A checked launch, ready to enqueue any number of times.
pub struct Prepared<'k> {
    kernel: &'k LoadedKernel,
    grid: (u32, u32, u32),
    values: Vec<ArgValue>,
    repacks: Vec<Repack>,
    /// The copy kernel of input repacks (cuMemcpy2D copies outputs back: their destination is
    /// the caller's misaligned buffer).
    pitch_copy: Option<Arc<PitchCopy>>,
    /// Held as long as the launch can be enqueued (an owned buffer is freed with it); the kernel
    /// finds its address among `values`.
    workspace: Option<Scratch>,
    /// Memory zeroed before each launch (address, bytes): amax outputs, into which the kernel
    /// adds its maxima, and the workspace regions that ask for it.
    zeroed: Vec<(sys::CUdeviceptr, usize)>,
}

fn invalid(operand: &str, problem: String) -> CudaError {
    CudaError::InvalidOperand {
        operand: operand.into(),
        problem,
    }
}

impl LoadedKernel {
    pub fn kernel(&self) -> &GeneratedKernel {
        &self.kernel
    }

    /// Validates `args` against `spec` and plans the launch, with fresh scratch memory and
    /// tensor maps.
    pub fn prepare(
        &self,
        gpu: &Gpu,
        spec: &KernelSpec,
        args: &LaunchArgs,
    ) -> Result<Prepared<'_>, CudaError> {
        self.prepare_with(gpu, spec, args, &mut FreshResources::default())
    }

    /// Validates `args` against `spec` and plans the launch, taking scratch memory, tensor maps
    /// and the copy kernel from `resources`. Every check runs before anything is enqueued: an
    /// error leaves the operands untouched.
    pub fn prepare_with(
        &self,
        gpu: &Gpu,
        spec: &KernelSpec,
        args: &LaunchArgs,
        resources: &mut dyn LaunchResources,
    ) -> Result<Prepared<'_>, CudaError> {
        let kernel = &self.kernel;
        let shape = args.shape;
        let bad_shape = |problem: String| CudaError::InvalidShape { shape, problem };
        if shape.m == 0 || shape.n == 0 || shape.k == 0 {
            return Err(bad_shape("every extent must be at least 1".into()));
        }
        let extent = |sym: ShapeSym| -> Result<i32, CudaError> {
            let value = match sym {
                ShapeSym::M => shape.m,
                ShapeSym::N => shape.n,
                ShapeSym::K => shape.k,
            };
            if value > deepgemm::codegen::MAX_EXTENT {
                return Err(bad_shape(format!(
                    "{sym:?} = {value} exceeds the kernels' limit of {} (2^31 - 2^16)",
                    deepgemm::codegen::MAX_EXTENT
                )));
            }
            Ok(value as i32)
        };
        // The kernels index in 32-bit extents: refuse before anything is sized from the shape.
        for sym in [ShapeSym::M, ShapeSym::N, ShapeSym::K] {
            extent(sym)?;
        }
        let (blocks, grid_y, grid_z) = kernel.grid.grid(shape, self.resident_clusters);
        let tiles = kernel.grid.tiles(shape);
        if tiles > i32::MAX as u64 || blocks > i32::MAX as u64 || grid_y > 65535 {
            return Err(bad_shape(format!(
                "needs {tiles} output tiles and a grid of {blocks} x {grid_y} blocks, beyond the \
                 kernel's 32-bit tile index and the launch limits"
            )));
        }
        let grid = (blocks as u32, grid_y, grid_z);

        // Check every operand the kernel takes, and decide which ones to repack.
        // Each operand as the kernel sees it (after any repack): name, address, dtype, geometry.
        let mut bound_operands: Vec<(&str, sys::CUdeviceptr, DType, Geometry)> =
            Vec::with_capacity(kernel.args.len());
        let mut repacks = Vec::new();
        let mut zeroed = Vec::new();
        for arg in &kernel.args {
            let KernelArg::Pointer(name) = arg else {
                continue;
            };
            let spec_operand = spec
                .operand(name)
                .ok_or_else(|| CudaError::MissingArgument {
                    entry: kernel.entry.clone(),
                    what: format!("operand `{name}`, which the spec does not declare"),
                })?;
            let bound = args
                .operands
                .iter()
                .find(|o| &o.name == name)
                .ok_or_else(|| CudaError::MissingArgument {
                    entry: kernel.entry.clone(),
                    what: format!("operand `{name}`"),
                })?;
            let expected = operand_geometry(spec_operand, shape, 0)?;
            check_operand(bound, spec_operand.dtype, &expected)?;
            let required = kernel
                .alignment
                .iter()
                .find(|(n, _)| n == name)
                .map_or(1, |(_, bytes)| *bytes)
                .max(bound.dtype.size_bytes()) as u64;
            let size = bound.dtype.size_bytes() as u64;
            let pitch = bound.geometry.ld * size;
            if kernel.transposed.contains(name) {
                // The kernel reads it in the other layout: transposed into a workspace whose
                // lines (the caller's columns) are aligned for the kernel's copies.
                if size != 1 {
                    return Err(invalid(
                        name,
                        format!(
                            "the transpose kernel moves 1-byte elements, not {}",
                            bound.dtype
                        ),
                    ));
                }
                let g = bound.geometry;
                let staged_pitch = g.outer().next_multiple_of(REPACK_PITCH_ALIGN.max(required));
                let buffer =
                    resources.scratch(gpu, repacks.len(), (staged_pitch * g.inner()) as usize)?;
                bound_operands.push((
                    name,
                    buffer.ptr(),
                    bound.dtype,
                    Geometry {
                        layout: g.layout.transposed(),
                        ld: staged_pitch,
                        ..g
                    },
                ));
                repacks.push(Repack {
                    name: name.clone(),
                    user: bound.ptr,
                    user_pitch: pitch as usize,
                    buffer,
                    pitch: staged_pitch as usize,
                    width: g.inner() as usize,
                    height: g.outer() as usize,
                    copy_out: false,
                    transpose: true,
                });
                continue;
            }
            let is_matrix = matches!(spec_operand.role, Role::A | Role::B | Role::C | Role::D);
            let aligned = bound.ptr.is_multiple_of(required)
                && (!is_matrix || pitch.is_multiple_of(required));
            // An amax output is zeroed where the kernel writes it: the repacked copy if any (its
            // copy-in comes first; the copy-back returns the maxima).
            let amax_bytes = matches!(spec_operand.role, Role::Amax { .. })
                .then(|| (bound.geometry.inner() * bound.geometry.outer() * size) as usize);
            if aligned {
                bound_operands.push((name, bound.ptr, bound.dtype, bound.geometry));
                if let Some(bytes) = amax_bytes {
                    zeroed.push((bound.ptr, bytes));
                }
                continue;
            }
            // A matrix keeps its rows (the kernel takes its leading dimension); a vector or a
            // scale tensor is indexed densely, so it moves as one row of all its bytes.
            let (width, height) = if is_matrix {
                (
                    (bound.geometry.inner() * size) as usize,
                    bound.geometry.outer() as usize,
                )
            } else {
                (
                    (bound.geometry.inner() * bound.geometry.outer() * size) as usize,
                    1,
                )
            };
            let staged_pitch = (width as u64).next_multiple_of(REPACK_PITCH_ALIGN.max(required));
            let buffer = resources.scratch(gpu, repacks.len(), staged_pitch as usize * height)?;
            let buffer_ptr = buffer.ptr();
            bound_operands.push((
                name,
                buffer.ptr(),
                bound.dtype,
                Geometry {
                    ld: if is_matrix {
                        staged_pitch / size
                    } else {
                        bound.geometry.ld
                    },
                    ..bound.geometry
                },
            ));
            repacks.push(Repack {
                name: name.clone(),
                user: bound.ptr,
                user_pitch: pitch as usize,
                buffer,
                pitch: staged_pitch as usize,
                width,
                height,
                copy_out: spec_operand.direction == Direction::Output,
                transpose: false,
            });
            if let Some(bytes) = amax_bytes {
                zeroed.push((buffer_ptr, bytes));
            }
        }

        let workspace_bytes = kernel.workspace.bytes(shape, &kernel.grid);
        let workspace = if workspace_bytes > 0 {
            Some(resources.scratch(
                gpu,
                repacks.len(),
                usize::try_from(workspace_bytes).map_err(|_| {
                    bad_shape(format!("needs {workspace_bytes} bytes of workspace"))
                })?,
            )?)
        } else {
            None
        };
        if let Some(workspace) = &workspace {
            for region in kernel.workspace.layout(shape, &kernel.grid) {
                if region.zeroed {
                    // Fits: the whole buffer's size passed `usize::try_from` above.
                    zeroed.push((workspace.ptr() + region.offset, region.bytes as usize));
                }
            }
        }

        let mut values = Vec::with_capacity(kernel.args.len());
        for arg in &kernel.args {
            let missing = |what: String| CudaError::MissingArgument {
                entry: kernel.entry.clone(),
                what,
            };
            let find = |name: &str| bound_operands.iter().find(|(n, _, _, _)| *n == name);
            values.push(match arg {
                KernelArg::Pointer(name) => {
                    let (_, ptr, _, _) = find(name).ok_or_else(|| missing(format!("`{name}`")))?;
                    ArgValue::Pointer(*ptr)
                }
                KernelArg::LeadingDim(name) => {
                    let (_, _, _, geometry) = find(name).ok_or_else(|| {
                        missing(format!(
                            "the leading dimension of `{name}`, which has no pointer"
                        ))
                    })?;
                    ArgValue::LeadingDim(geometry.ld as i64)
                }
                KernelArg::Extent(sym) => ArgValue::Extent(extent(*sym)?),
                KernelArg::Param(name) => {
                    let given = args.params.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
                    let default = spec.params.iter().find(|p| &p.name == name);
                    let value = given.or(default.and_then(|p| p.default));
                    ArgValue::Param(value.ok_or_else(|| missing(format!("param `{name}`")))? as f32)
                }
                KernelArg::Workspace => {
                    ArgValue::Pointer(workspace.as_ref().map_or(0, Scratch::ptr))
                }
                KernelArg::TensorMap(map) => {
                    let (_, ptr, dtype, geometry) = find(&map.operand)
                        .ok_or_else(|| missing(format!("the operand of `{}`", map.param)))?;
                    let pitch = geometry.ld * dtype.size_bytes() as u64;
                    if map.only_when_aligned && !tensor_map::readable(*ptr, pitch) {
                        // The kernel tests the same and never reads it.
                        // SAFETY: CUtensorMap is plain data (an opaque array of integers).
                        ArgValue::TensorMap(unsafe { std::mem::zeroed() })
                    } else {
                        ArgValue::TensorMap(resources.tensor_map(map, *ptr, *dtype, geometry)?)
                    }
                }
            });
        }
        Ok(Prepared {
            kernel: self,
            grid,
            values,
            pitch_copy: if repacks.is_empty() {
                None
            } else {
                Some(resources.pitch_copy(gpu)?)
            },
            repacks,
            workspace,
            zeroed,
        })
    }
}

/// Null pointers, a dtype other than the spec's, extents other than the shape's, a leading
/// dimension shorter than a row (or column, for `col`). `prepare` runs it on every operand; the
/// runtime runs it first, so that its callers get the same message before any GPU work.
pub fn check_operand(
    bound: &DeviceOperand,
    dtype: DType,
    expected: &Geometry,
) -> Result<(), CudaError> {
    let name = &bound.name;
    if bound.ptr == 0 {
        return Err(invalid(name, "null pointer".into()));
    }
    if bound.dtype != dtype {
        return Err(invalid(
            name,
            format!("is {}, the spec declares {dtype}", bound.dtype),
        ));
    }
    let g = &bound.geometry;
    if (g.rows, g.cols, g.layout) != (expected.rows, expected.cols, expected.layout) {
        return Err(invalid(
            name,
            format!(
                "is {}x{} {:?}; the shape needs {}x{} {:?}",
                g.rows, g.cols, g.layout, expected.rows, expected.cols, expected.layout
            ),
        ));
    }
    if g.ld < g.inner() {
        let line = match g.layout {
            deepgemm::spec::Layout::Row => "row",
            deepgemm::spec::Layout::Col => "column",
        };
        return Err(invalid(
            name,
            format!(
                "leading dimension {} is smaller than a {line} ({} elements)",
                g.ld,
                g.inner()
            ),
        ));
    }
    Ok(())
}

/// A launch that is the kernel alone (no repack, no zeroing, no workspace): its grid and
/// argument values are all it needs, so the runtime keeps it and enqueues it again when the
/// next launch's arguments are the same.
#[derive(Debug, Clone)]
pub struct KernelOnly {
    grid: (u32, u32, u32),
    values: Vec<ArgValue>,
}

impl KernelOnly {
    /// Enqueues the kernel of `kernel`, which must be the one it was prepared for.
    pub fn enqueue(&self, gpu: &Gpu, kernel: &LoadedKernel) -> Result<(), CudaError> {
        launch_kernel(gpu, kernel, self.grid, &self.values, false)
    }
}

/// `cuLaunchKernelEx` of `loaded` (with its cluster shape) on the GPU's stream; with
/// `early_start`, as a programmatic dependent launch of the kernel enqueued just before it.
fn launch_kernel(
    gpu: &Gpu,
    loaded: &LoadedKernel,
    grid: (u32, u32, u32),
    values: &[ArgValue],
    early_start: bool,
) -> Result<(), CudaError> {
    // The driver only reads through these pointers (it copies the values at launch), so they
    // may point into `values` without a copy.
    let mut params: Vec<*mut c_void> = values
        .iter()
        .map(|value| match value {
            ArgValue::Pointer(p) => p as *const u64 as *mut c_void,
            ArgValue::LeadingDim(v) => v as *const i64 as *mut c_void,
            ArgValue::Extent(v) => v as *const i32 as *mut c_void,
            ArgValue::Param(v) => v as *const f32 as *mut c_void,
            ArgValue::TensorMap(map) => map as *const sys::CUtensorMap as *mut c_void,
        })
        .collect();
    let kernel = &loaded.kernel;
    gpu.bind()?;
    let mut attributes = [
        cluster_attribute(kernel.grid.cluster),
        early_start_attribute(),
    ];
    let used = match (kernel.grid.cluster > 1, early_start) {
        (true, true) => &mut attributes[..],
        (true, false) => &mut attributes[..1],
        (false, true) => &mut attributes[1..],
        (false, false) => &mut attributes[..0],
    };
    let config = launch_config(grid, kernel, gpu.stream(), used);
    // SAFETY: the function is live while `loaded` is; `params` points at values of the exact C
    // types of the kernel's parameters (CUdeviceptr, long long, int, float, the 128-byte
    // CUtensorMap), in its argument order, and outlives the call (the driver copies them at
    // launch); the config's attributes outlive it too.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            loaded.function,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(driver("cuLaunchKernelEx"))
}

impl Prepared<'_> {
    /// Keeps the launch in `kept` as a [`KernelOnly`] when nothing runs around the kernel
    /// (reusing `kept`'s allocation), else leaves `None` there.
    pub fn keep_kernel_only(&self, kept: &mut Option<KernelOnly>) {
        if !(self.repacks.is_empty() && self.zeroed.is_empty() && self.workspace.is_none()) {
            *kept = None;
            return;
        }
        match kept {
            Some(launch) => {
                launch.grid = self.grid;
                launch.values.clone_from(&self.values);
            }
            None => {
                *kept = Some(KernelOnly {
                    grid: self.grid,
                    values: self.values.clone(),
                })
            }
        }
    }

    /// The launch grid, in blocks.
    pub fn grid(&self) -> (u32, u32, u32) {
        self.grid
    }

    /// Names of the operands that are repacked around each launch.
    pub fn repacked(&self) -> Vec<&str> {
        self.repacks.iter().map(|r| r.name.as_str()).collect()
    }

    /// Enqueues repacks, workspace zeroing, the kernel and copy-backs on the GPU's stream.
    pub fn enqueue(&self, gpu: &Gpu) -> Result<(), CudaError> {
        // The copy kernel moves every copy-in it can in one launch (a small repack is
        // launch-bound); cuMemcpy2D takes the rest.
        let mut batched = Vec::with_capacity(self.repacks.len());
        for copy in self
            .repacks
            .iter()
            .filter(|r| !r.transpose)
            .map(Repack::copy_in)
        {
            match &self.pitch_copy {
                Some(_) if PitchCopy::fits(&copy) => batched.push(copy),
                _ => gpu.copy_2d(copy)?,
            }
        }
        let mut transposed = false;
        if let Some(pitch_copy) = &self.pitch_copy {
            for repack in self.repacks.iter().filter(|r| r.transpose) {
                pitch_copy.enqueue_transpose(gpu, &repack.transposition())?;
                transposed = true;
            }
            pitch_copy.enqueue(gpu, &batched)?;
        }
        for &(ptr, len) in &self.zeroed {
            gpu.memset(ptr, 0, len)?;
        }
        // Right behind the copy kernel, the GEMM's launch overlaps the copy (a small repack is
        // launch-bound): its threads wait for the copy's writes before they read anything.
        // (griddepcontrol exists from sm_90: the kernels compiled for older GPUs have no wait.)
        let after_copy = (transposed || !batched.is_empty())
            && self.zeroed.is_empty()
            && gpu.info().compute_capability.0 >= 9;
        launch_kernel(gpu, self.kernel, self.grid, &self.values, after_copy)?;
        for repack in self.repacks.iter().filter(|r| r.copy_out) {
            gpu.copy_2d(repack.copy_back())?;
        }
        Ok(())
    }
}

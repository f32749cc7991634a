//! Loading a bundle on a GPU and launching its kernels on the caller's memory and stream.

use crate::bundle::{BundleFile, BundleHeader, BundleVariant};
use crate::dispatch::Dispatch;
use crate::error::RuntimeError;
use crate::pool::{LaunchKey, Pooled, RepeatableLaunch, VariantState};
use deepgemm::dtype::DType;
use deepgemm::plan::Shape;
use deepgemm::reference::operand_geometry;
use deepgemm::spec::{shape_text, KernelSpec, Role, ShapeFallback, ShapeSpec};
use deepgemm_cuda::device::{arch_runs_on, Gpu, GpuInfo, RawStream};
use deepgemm_cuda::launch::{check_operand, DeviceOperand, LaunchArgs, LoadedKernel, Prepared};
use deepgemm_cuda::nvrtc::Compiled;
use deepgemm_cuda::pitch_copy::PitchCopy;
use deepgemm_cuda::CudaError;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A GPU to load bundles on (device `ordinal`'s primary context: the one PyTorch and the CUDA
/// runtime use, so their pointers and streams are valid here).
pub struct Runtime {
    gpu: Gpu,
}

impl Runtime {
    /// Opens device `ordinal`. No driver or no GPU is an error that says so.
    pub fn new(ordinal: usize) -> Result<Runtime, RuntimeError> {
        Ok(Runtime {
            gpu: Gpu::open(ordinal)?,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Loads the bundle at `path`.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Bundle, RuntimeError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| RuntimeError::Io {
            path: shown.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        let file = BundleFile::from_bytes(&bytes).map_err(|problem| RuntimeError::Format {
            path: shown.clone(),
            problem,
        })?;
        self.load_file(file, &shown)
    }

    /// Compiles the kernels of a `.dgml` file in-process (NVRTC, through the on-disk cubin
    /// cache) and loads the result.
    #[cfg(feature = "compile")]
    pub fn compile(&self, spec: impl AsRef<Path>) -> Result<Bundle, RuntimeError> {
        let path = spec.as_ref();
        let file = crate::compile::build_from_file(path, None)?;
        self.load_file(file, &path.display().to_string())
    }

    /// Loads a parsed bundle; `name` names it in messages.
    pub fn load_file(&self, file: BundleFile, name: &str) -> Result<Bundle, RuntimeError> {
        check_arch(&file.header, self.gpu.info(), name)?;
        let format = |problem: String| RuntimeError::Format {
            path: name.to_string(),
            problem,
        };
        let pitch_copy = Arc::new(PitchCopy::from_cubin(
            &self.gpu,
            file.blob(&file.header.pitch_copy).map_err(format)?,
        )?);
        let mut kernels = Vec::with_capacity(file.header.kernels.len());
        for kernel in &file.header.kernels {
            let mut variants = Vec::with_capacity(kernel.variants.len());
            for variant in &kernel.variants {
                let compiled = Compiled {
                    entry: variant.kernel.entry.clone(),
                    arch: variant.kernel.arch.clone(),
                    ptx: String::new(),
                    cubin: file.blob(&variant.cubin).map_err(format)?.to_vec(),
                    resources: variant.resources,
                    log: String::new(),
                };
                let loaded = self.gpu.load(&variant.kernel, &compiled)?;
                variants.push(LoadedVariant {
                    meta: variant.clone(),
                    loaded: Handle(loaded),
                    state: Mutex::new(VariantState::default()),
                });
            }
            kernels.push(Arc::new(Kernel {
                name: kernel.name.clone(),
                spec: kernel.spec.clone(),
                dispatch: Dispatch::new(&kernel.dispatch)
                    .map_err(|e| format(format!("kernel `{}`: {e}", kernel.name)))?,
                variants,
                gpu: self.gpu.clone(),
                pitch_copy: Handle(pitch_copy.clone()),
            }));
        }
        Ok(Bundle {
            header: file.header,
            kernels,
        })
    }
}

/// Refuses a bundle whose cubins this GPU cannot run, naming both architectures.
pub fn check_arch(header: &BundleHeader, gpu: &GpuInfo, name: &str) -> Result<(), RuntimeError> {
    if arch_runs_on(&header.arch, gpu.compute_capability) {
        return Ok(());
    }
    Err(RuntimeError::ArchMismatch {
        path: name.to_string(),
        bundle_arch: header.arch.clone(),
        target: header.target.clone(),
        gpu: gpu.name.clone(),
        gpu_arch: gpu.arch.clone(),
    })
}

/// A driver object (module, function) used from any thread: the driver's handles are
/// thread-safe, the raw pointers only lack the marker traits.
struct Handle<T>(T);
// SAFETY: see above; every use goes through the driver, which synchronizes internally.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; the wrapped values are only read after loading.
unsafe impl<T> Sync for Handle<T> {}

/// A loaded bundle: its kernels, ready to launch.
pub struct Bundle {
    header: BundleHeader,
    kernels: Vec<Arc<Kernel>>,
}

impl Bundle {
    pub fn header(&self) -> &BundleHeader {
        &self.header
    }

    pub fn kernels(&self) -> &[Arc<Kernel>] {
        &self.kernels
    }

    /// The kernel called `name`; `None` takes the only one (an error when there are several).
    pub fn kernel(&self, name: Option<&str>) -> Result<Arc<Kernel>, RuntimeError> {
        let available = || {
            let names: Vec<&str> = self.kernels.iter().map(|k| k.name.as_str()).collect();
            names.join(", ")
        };
        match name {
            Some(name) => self.kernels.iter().find(|k| k.name == name),
            None if self.kernels.len() == 1 => self.kernels.first(),
            None => {
                return Err(RuntimeError::NoKernel {
                    name: "(unnamed: the bundle holds several, name one)".into(),
                    available: available(),
                })
            }
        }
        .cloned()
        .ok_or_else(|| RuntimeError::NoKernel {
            name: name.unwrap_or_default().to_string(),
            available: available(),
        })
    }
}

struct LoadedVariant {
    meta: BundleVariant,
    loaded: Handle<LoadedKernel>,
    /// Tensor maps and scratch; held for the whole launch, so that two threads launching the
    /// same variant on one stream cannot interleave their repack copies.
    state: Mutex<VariantState>,
}

impl LoadedVariant {
    fn lock(&self) -> std::sync::MutexGuard<'_, VariantState> {
        // A panic in another launch leaves only caches behind the lock: still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A launch checked and planned by [`Kernel::prepare`], ready to enqueue any number of times.
pub struct PreparedLaunch<'k> {
    kernel: &'k Kernel,
    variant: &'k LoadedVariant,
    prepared: Prepared<'k>,
    stream: RawStream,
}

impl PreparedLaunch<'_> {
    /// Enqueues the launch (its repack copies, zeroing, kernel and copy-backs) on its stream.
    pub fn enqueue(&self) -> Result<(), RuntimeError> {
        // As in `Kernel::launch`: no other launch of the variant interleaves its copies.
        let _state = self.variant.lock();
        self.prepared
            .enqueue(&self.kernel.gpu.on_stream(self.stream))
            .map_err(|e| self.kernel.launch_error(e))
    }
}

/// One operand of a launch, by the spec's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand<'a> {
    pub name: &'a str,
    /// Device address of element (0, 0).
    pub ptr: u64,
    /// Leading dimension in elements (the row stride of a `row` matrix, the column stride of a
    /// `col` one); 0 means packed. Ignored for vectors and scalars.
    pub ld: u64,
    /// When given, checked against the spec's dtype.
    pub dtype: Option<DType>,
}

/// One kernel of a bundle: its variants and the table that picks one.
pub struct Kernel {
    name: String,
    spec: KernelSpec,
    dispatch: Dispatch,
    variants: Vec<LoadedVariant>,
    gpu: Gpu,
    pitch_copy: Handle<Arc<PitchCopy>>,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The checked spec: operands (names, dtypes, layouts), params and their defaults.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// The device the kernel is loaded on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The variant that serves `shape`. Outside the declared shapes: the nearest bucket's variant
    /// when the spec declares `fallback nearest;`, else an error that says the range.
    pub fn variant_for(&self, shape: Shape) -> Result<&BundleVariant, RuntimeError> {
        self.select(shape).map(|v| &v.meta)
    }

    fn select(&self, shape: Shape) -> Result<&LoadedVariant, RuntimeError> {
        let index = route(&self.dispatch, &self.name, &self.spec.shape, shape)?;
        self.variants
            .get(index)
            .ok_or_else(|| RuntimeError::Launch {
                kernel: self.name.clone(),
                problem: format!("the dispatch table names variant {index}, which is missing"),
            })
    }

    /// Bytes of workspace the kernel itself needs at `shape` (the runtime provides it from its
    /// pool; repack buffers for misaligned operands come on top).
    pub fn workspace_bytes(&self, shape: Shape) -> Result<u64, RuntimeError> {
        let kernel = &self.select(shape)?.meta.kernel;
        Ok(kernel.workspace.bytes(shape, &kernel.grid))
    }

    /// Checks the operands and params of a launch without touching the GPU.
    pub fn bind(
        &self,
        shape: Shape,
        operands: &[Operand],
        params: &[(&str, f64)],
    ) -> Result<LaunchArgs, RuntimeError> {
        bind(&self.spec, shape, operands, params)
    }

    /// Launches the variant for `shape` on `stream` (null: the legacy default stream) and
    /// returns once it is enqueued. Every check runs first: on an error nothing is enqueued and
    /// no operand is written.
    pub fn launch(
        &self,
        shape: Shape,
        operands: &[Operand],
        params: &[(&str, f64)],
        stream: RawStream,
    ) -> Result<(), RuntimeError> {
        let variant = self.select(shape)?;
        // The variant's lock is held from planning to enqueue, so that two threads launching it
        // on one stream cannot interleave their repack copies into the same scratch.
        let mut state = variant.lock();
        let gpu = self.gpu.on_stream(stream);
        // The checks and the plan depend only on these arguments: the same ones as last time
        // passed them and planned this launch (a decode loop over fixed buffers repeats them).
        if let Some(RepeatableLaunch {
            key,
            launch: Some(launch),
        }) = &state.last
        {
            if key.is(shape, stream, operands, params) {
                return launch
                    .enqueue(&gpu, &variant.loaded.0)
                    .map_err(|e| self.launch_error(e));
            }
        }
        let args = self.bind(shape, operands, params)?;
        let prepared = self.prepare_locked(variant, &mut state, &args, stream)?;
        prepared.enqueue(&gpu).map_err(|e| self.launch_error(e))?;
        let last = match &mut state.last {
            Some(last) => {
                last.key.set(shape, stream, operands, params);
                last
            }
            None => state.last.insert(RepeatableLaunch {
                key: LaunchKey::new(shape, stream, operands, params),
                launch: None,
            }),
        };
        prepared.keep_kernel_only(&mut last.launch);
        Ok(())
    }

    /// Checks and plans a launch once, for a caller that launches the same shape on the same
    /// operands and stream many times (a decode loop over fixed buffers, a benchmark):
    /// [`PreparedLaunch::enqueue`] then skips the dispatch, the checks and the argument
    /// building. Scratch memory stays reserved for it as for any launch on `stream`.
    pub fn prepare(
        &self,
        shape: Shape,
        operands: &[Operand],
        params: &[(&str, f64)],
        stream: RawStream,
    ) -> Result<PreparedLaunch<'_>, RuntimeError> {
        let variant = self.select(shape)?;
        let args = self.bind(shape, operands, params)?;
        let mut state = variant.lock();
        let prepared = self.prepare_locked(variant, &mut state, &args, stream)?;
        Ok(PreparedLaunch {
            kernel: self,
            variant,
            prepared,
            stream,
        })
    }

    fn prepare_locked<'k>(
        &'k self,
        variant: &'k LoadedVariant,
        state: &mut VariantState,
        args: &LaunchArgs,
        stream: RawStream,
    ) -> Result<Prepared<'k>, RuntimeError> {
        let mut resources = Pooled {
            state,
            stream,
            pitch_copy: &self.pitch_copy.0,
        };
        variant
            .loaded
            .0
            .prepare_with(
                &self.gpu.on_stream(stream),
                &self.spec,
                args,
                &mut resources,
            )
            .map_err(|e| self.launch_error(e))
    }

    /// Tensor maps encoded and scratch buffers allocated so far by the variant for `shape`.
    pub fn pool_counters(&self, shape: Shape) -> Result<(u64, u64), RuntimeError> {
        let state = self.select(shape)?.lock();
        Ok((state.encodes, state.allocations))
    }

    fn launch_error(&self, e: CudaError) -> RuntimeError {
        match e {
            CudaError::InvalidOperand { operand, problem } => RuntimeError::Operand {
                kernel: self.name.clone(),
                operand,
                problem,
            },
            CudaError::InvalidShape { shape, problem } => RuntimeError::Launch {
                kernel: self.name.clone(),
                problem: format!("shape {shape}: {problem}"),
            },
            other => RuntimeError::Cuda(other),
        }
    }
}

/// The variant index for `shape`: the bucket that holds it; outside every bucket, the nearest
/// bucket's when the spec declares `fallback nearest;`, else the error that names the declared
/// range.
pub fn route(
    dispatch: &Dispatch,
    kernel: &str,
    declared: &ShapeSpec,
    shape: Shape,
) -> Result<usize, RuntimeError> {
    let fallback = || match declared.fallback {
        ShapeFallback::Nearest => dispatch.lookup(declared.nearest_declared(shape)),
        ShapeFallback::None => None,
    };
    dispatch
        .lookup(shape)
        .or_else(fallback)
        .ok_or_else(|| RuntimeError::ShapeOutOfRange {
            kernel: kernel.to_string(),
            shape,
            range: shape_text(declared),
        })
}

/// The launch arguments of `operands` for `spec` at `shape`: every operand the spec declares,
/// none it does not, non-null, aligned to its element, with the spec's dtype and a leading
/// dimension no smaller than a row (column). Params must be the spec's.
pub fn bind(
    spec: &KernelSpec,
    shape: Shape,
    operands: &[Operand],
    params: &[(&str, f64)],
) -> Result<LaunchArgs, RuntimeError> {
    let bad = |operand: &str, problem: String| RuntimeError::Operand {
        kernel: spec.name.clone(),
        operand: operand.to_string(),
        problem,
    };
    if shape.m == 0 || shape.n == 0 || shape.k == 0 {
        return Err(RuntimeError::Launch {
            kernel: spec.name.clone(),
            problem: format!("shape {shape}: every extent must be at least 1"),
        });
    }
    let declared = || {
        let names: Vec<&str> = spec.operands.iter().map(|o| o.name.as_str()).collect();
        names.join(", ")
    };
    for given in operands {
        if spec.operand(given.name).is_none() {
            return Err(bad(
                given.name,
                format!("the kernel has no such operand; it takes {}", declared()),
            ));
        }
        if operands.iter().filter(|o| o.name == given.name).count() > 1 {
            return Err(bad(given.name, "given twice".into()));
        }
    }
    let mut bound = Vec::with_capacity(spec.operands.len());
    for operand in &spec.operands {
        let given = operands
            .iter()
            .find(|o| o.name == operand.name)
            .ok_or_else(|| {
                bad(
                    &operand.name,
                    format!("missing; the kernel takes {}", declared()),
                )
            })?;
        if let Some(dtype) = given.dtype {
            if dtype != operand.dtype {
                return Err(bad(
                    &operand.name,
                    format!("is {dtype}, the kernel takes {}", operand.dtype),
                ));
            }
        }
        if given.ptr == 0 {
            return Err(bad(&operand.name, "null pointer".into()));
        }
        let size = operand.dtype.size_bytes() as u64;
        if !given.ptr.is_multiple_of(size) {
            return Err(bad(
                &operand.name,
                format!(
                    "address {:#x} is not aligned to its element ({size} bytes of {})",
                    given.ptr, operand.dtype
                ),
            ));
        }
        let mut geometry =
            operand_geometry(operand, shape, 0).map_err(|e| RuntimeError::Launch {
                kernel: spec.name.clone(),
                problem: e.to_string(),
            })?;
        let is_matrix = matches!(operand.role, Role::A | Role::B | Role::C | Role::D);
        if is_matrix && given.ld != 0 {
            geometry.ld = given.ld;
        }
        let device = DeviceOperand {
            name: operand.name.clone(),
            ptr: given.ptr,
            dtype: operand.dtype,
            geometry,
        };
        check_operand(&device, operand.dtype, &geometry).map_err(|e| match e {
            CudaError::InvalidOperand { operand, problem } => bad(&operand, problem),
            other => RuntimeError::Cuda(other),
        })?;
        bound.push(device);
    }
    for (name, _) in params {
        if !spec.params.iter().any(|p| p.name == *name) {
            let names: Vec<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
            return Err(RuntimeError::Launch {
                kernel: spec.name.clone(),
                problem: format!(
                    "no param `{name}`; the kernel's params: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            });
        }
    }
    Ok(LaunchArgs {
        shape,
        operands: bound,
        params: params.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
    })
}

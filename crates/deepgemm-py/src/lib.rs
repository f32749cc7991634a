//! `deepgemm._native`: the Python face of DeepGEMM's runtime (docs/runtime.md, "Python").
//!
//! Tensors are read through DLPack (`__dlpack__`), so any CUDA array library works and torch is
//! not a build dependency. A torch tensor is read through its attributes instead (`data_ptr()`,
//! `shape`, `stride()`, `dtype`, `get_device()`): the same facts at a fifth of the cost, since
//! torch's `__dlpack__` builds a capsule per call (10.6 us for four tensors on the H200's host,
//! bench/RESULTS.md). torch is also used at run time to allocate `out` when it is omitted and to
//! find the current stream. Every check raises a Python exception before the launch:
//! `TypeError` for a wrong dtype or object, `ValueError` for shape, stride, device, alignment or
//! a shape outside the bundle, `deepgemm.DeepGemmError` for driver and loading failures.

use deepgemm_runtime::{DType, Operand, RawStream, Runtime, RuntimeError, Shape};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict, PyTuple};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

pyo3::create_exception!(
    deepgemm,
    DeepGemmError,
    PyRuntimeError,
    "A DeepGEMM runtime failure."
);

fn err(e: RuntimeError) -> PyErr {
    match e {
        RuntimeError::ShapeOutOfRange { .. }
        | RuntimeError::Operand { .. }
        | RuntimeError::Launch { .. } => PyValueError::new_err(e.to_string()),
        RuntimeError::NoKernel { .. } => pyo3::exceptions::PyKeyError::new_err(e.to_string()),
        _ => DeepGemmError::new_err(e.to_string()),
    }
}

/// One runtime per device, shared by every bundle loaded on it.
fn runtime(device: usize) -> PyResult<Arc<Runtime>> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<Runtime>>>> = OnceLock::new();
    let mut map = RUNTIMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = map.get(&device) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(Runtime::new(device).map_err(err)?);
    map.insert(device, rt.clone());
    Ok(rt)
}

// --- DLPack (dlpack.h, v0.8 ABI of the unversioned `dltensor` capsule) ----------------------

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DL_CUDA_MANAGED: i32 = 13;

/// What a launch needs of one tensor.
struct TensorView {
    ptr: u64,
    device: i32,
    /// The dtype, or how the tensor describes one DeepGEMM does not know (for the message).
    dtype: Result<DType, String>,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

// --- torch, when it is loaded: tensor attributes, dtypes, streams, allocation ---------------

/// What the fast path needs of the torch module, looked up once.
struct Torch {
    tensor: Py<pyo3::types::PyType>,
    /// torch's dtype objects (singletons) and the DeepGEMM dtype of each.
    dtypes: Vec<(Py<PyAny>, DType)>,
    /// `torch._C._cuda_getCurrentRawStream`, or `None` on a torch without it.
    raw_stream: Option<Py<PyAny>>,
    empty: Py<PyAny>,
    /// `torch.strided`, the layout of a dense tensor.
    strided: Py<PyAny>,
}

static TORCH: pyo3::sync::PyOnceLock<Torch> = pyo3::sync::PyOnceLock::new();

/// torch's handles once torch has been imported (by anyone); `None` while it is not, so that a
/// later import is still found.
fn torch(py: Python<'_>) -> PyResult<Option<&Torch>> {
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    let modules = py.import("sys")?.getattr("modules")?;
    let Some(module) = modules.get_item("torch").ok().filter(|t| !t.is_none()) else {
        return Ok(None);
    };
    let mut dtypes = Vec::new();
    for d in DType::ALL {
        // tf32 has no torch dtype; an older torch may lack the fp8 dtypes: those tensors cannot
        // exist there either.
        if let Some(object) = torch_dtype(d).and_then(|name| module.getattr(name).ok()) {
            dtypes.push((object.unbind(), d));
        }
    }
    let raw_stream = module
        .getattr("_C")
        .and_then(|c| c.getattr("_cuda_getCurrentRawStream"))
        .ok()
        .map(Bound::unbind);
    let handles = Torch {
        tensor: module
            .getattr("Tensor")?
            .cast_into::<pyo3::types::PyType>()?
            .unbind(),
        dtypes,
        raw_stream,
        empty: module.getattr("empty")?.unbind(),
        strided: module.getattr("strided")?.unbind(),
    };
    Ok(Some(TORCH.get_or_init(py, || handles)))
}

/// Reads a torch tensor through its attributes; `None` for anything else (read by DLPack).
fn torch_view(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Option<TensorView>> {
    let py = obj.py();
    let Some(torch) = torch(py)? else {
        return Ok(None);
    };
    if !obj.is_instance(torch.tensor.bind(py))? {
        return Ok(None);
    }
    if !obj
        .getattr(pyo3::intern!(py, "is_cuda"))?
        .extract::<bool>()?
    {
        let device = obj.getattr(pyo3::intern!(py, "device"))?.str()?;
        let place = if device == "cpu" {
            "the CPU".to_string()
        } else {
            format!("device {device}")
        };
        return Err(PyValueError::new_err(format!(
            "{name} is on {place}; DeepGEMM kernels take CUDA tensors (use .cuda())"
        )));
    }
    // What torch's DLPack export refuses, refused here too: a lazily negated view (its memory
    // holds the values before negation) and anything but a dense, strided tensor.
    if obj
        .call_method0(pyo3::intern!(py, "is_neg"))?
        .extract::<bool>()?
    {
        return Err(PyValueError::new_err(format!(
            "{name} is a view with its negative bit set (its memory holds the un-negated values); \
             call .resolve_neg() first"
        )));
    }
    let layout = obj.getattr(pyo3::intern!(py, "layout"))?;
    if !layout.is(torch.strided.bind(py)) {
        return Err(PyTypeError::new_err(format!(
            "{name} has layout {}; DeepGEMM kernels take dense (strided) tensors",
            layout.str()?
        )));
    }
    let dtype = obj.getattr(pyo3::intern!(py, "dtype"))?;
    let known = match torch
        .dtypes
        .iter()
        .find(|(object, _)| object.bind(py).is(&dtype))
    {
        Some((_, d)) => Ok(*d),
        None => Err(format!("dtype {}", dtype.str()?)),
    };
    Ok(Some(TensorView {
        ptr: obj.call_method0(pyo3::intern!(py, "data_ptr"))?.extract()?,
        device: obj
            .call_method0(pyo3::intern!(py, "get_device"))?
            .extract()?,
        dtype: known,
        shape: obj.getattr(pyo3::intern!(py, "shape"))?.extract()?,
        strides: obj.call_method0(pyo3::intern!(py, "stride"))?.extract()?,
    }))
}

fn dtype_of(code: u8, bits: u8, lanes: u16) -> Option<DType> {
    if lanes != 1 {
        return None;
    }
    Some(match (code, bits) {
        (2, 32) => DType::F32,
        (2, 16) => DType::F16,
        (4, 16) => DType::Bf16,
        (0, 8) => DType::I8,
        (0, 32) => DType::I32,
        // kDLFloat8_e4m3fn, kDLFloat8_e5m2 (DLPack 1.1)
        (10, 8) => DType::E4m3,
        (12, 8) => DType::E5m2,
        _ => return None,
    })
}

/// Reads `obj`: a torch tensor through its attributes, anything else through its `__dlpack__`
/// capsule (the capsule is released when this returns; the caller keeps `obj` alive across the
/// launch).
fn view(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<TensorView> {
    if let Some(view) = torch_view(name, obj)? {
        return Ok(view);
    }
    let capsule = obj.call_method0("__dlpack__").map_err(|e| {
        PyTypeError::new_err(format!(
            "{name}: expected a CUDA tensor (an object with __dlpack__, e.g. a torch.Tensor): {e}"
        ))
    })?;
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err(format!("{name}: __dlpack__ returned no capsule")))?;
    let ptr = capsule
        .pointer_checked(Some(c"dltensor"))
        .map_err(|_| PyTypeError::new_err(format!("{name}: __dlpack__ returned a used capsule")))?;
    // SAFETY: a live `dltensor` capsule points at a DLManagedTensor, whose first member is the
    // DLTensor; it stays valid while the capsule lives (to the end of this function).
    let t = unsafe { &*(ptr.as_ptr() as *const DlTensor) };
    let ndim = t.ndim.max(0) as usize;
    // SAFETY: shape has ndim entries; strides too, or is NULL for a compact row-major tensor.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec();
    let strides = if t.strides.is_null() {
        let mut s = vec![1i64; ndim];
        for i in (0..ndim.saturating_sub(1)).rev() {
            s[i] = s[i + 1] * shape[i + 1];
        }
        s
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec()
    };
    match t.device.device_type {
        DL_CUDA => {}
        DL_CPU => {
            return Err(PyValueError::new_err(format!(
                "{name} is on the CPU; DeepGEMM kernels take CUDA tensors (use .cuda())"
            )))
        }
        DL_CUDA_HOST | DL_CUDA_MANAGED => {
            return Err(PyValueError::new_err(format!(
                "{name} is in pinned host or managed memory; DeepGEMM kernels take device memory"
            )))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "{name} is on a device of DLPack type {other}, not a CUDA GPU"
            )))
        }
    }
    Ok(TensorView {
        ptr: (t.data as u64).wrapping_add(t.byte_offset),
        device: t.device.device_id,
        dtype: dtype_of(t.dtype.code, t.dtype.bits, t.dtype.lanes).ok_or_else(|| {
            format!(
                "DLPack dtype code {} with {} bits",
                t.dtype.code, t.dtype.bits
            )
        }),
        shape,
        strides,
    })
}

// --- Bundles and kernels --------------------------------------------------------------------

/// A loaded bundle: `bundle.kernels` names its kernels, `bundle["name"]` (or `bundle.kernel()`)
/// gives one, and calling the bundle calls its only kernel.
#[pyclass(module = "deepgemm._native", frozen)]
struct Bundle {
    kernels: Vec<Py<Kernel>>,
    names: Vec<String>,
    arch: String,
    target: String,
}

#[pymethods]
impl Bundle {
    #[getter]
    fn kernels(&self) -> Vec<String> {
        self.names.clone()
    }

    #[getter]
    fn arch(&self) -> String {
        self.arch.clone()
    }

    #[getter]
    fn target(&self) -> String {
        self.target.clone()
    }

    /// The kernel called `name` (None: the only one).
    #[pyo3(signature = (name=None))]
    fn kernel(&self, py: Python<'_>, name: Option<&str>) -> PyResult<Py<Kernel>> {
        let index = match name {
            Some(n) => self.names.iter().position(|k| k == n),
            None if self.kernels.len() == 1 => Some(0),
            None => None,
        };
        index.map(|i| self.kernels[i].clone_ref(py)).ok_or_else(|| {
            pyo3::exceptions::PyKeyError::new_err(format!(
                "{}; the bundle holds: {}",
                name.map_or("name a kernel".to_string(), |n| format!("no kernel `{n}`")),
                self.names.join(", ")
            ))
        })
    }

    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Py<Kernel>> {
        self.kernel(py, Some(name))
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let kernel = self.kernel(py, None)?;
        Ok(kernel.bind(py).call(args, kwargs)?.unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "<deepgemm.Bundle {} for {} ({})>",
            self.names.join(", "),
            self.arch,
            self.target
        )
    }
}

/// One kernel: `kernel(A, B, out=None, *, stream=None, **operands_and_params)`.
#[pyclass(module = "deepgemm._native", frozen)]
struct Kernel {
    kernel: Arc<deepgemm_runtime::Kernel>,
    device: i32,
}

fn wrap(bundle: deepgemm_runtime::Bundle, device: usize, py: Python<'_>) -> PyResult<Bundle> {
    let mut kernels = Vec::new();
    let mut names = Vec::new();
    for k in bundle.kernels() {
        names.push(k.name().to_string());
        kernels.push(Py::new(
            py,
            Kernel {
                kernel: k.clone(),
                device: device as i32,
            },
        )?);
    }
    Ok(Bundle {
        kernels,
        names,
        arch: bundle.header().arch.clone(),
        target: bundle.header().target.clone(),
    })
}

/// Loads the bundle at `path` on CUDA device `device`.
#[pyfunction]
#[pyo3(signature = (path, device=0))]
fn load(py: Python<'_>, path: &str, device: usize) -> PyResult<Bundle> {
    let rt = runtime(device)?;
    let bundle = py.detach(|| rt.load(path).map_err(err))?;
    wrap(bundle, device, py)
}

/// Compiles the kernels of the `.dgml` file at `path` in-process (NVRTC, through the on-disk
/// cubin cache) and loads them on device `device`.
#[pyfunction]
#[pyo3(signature = (path, device=0))]
fn compile(py: Python<'_>, path: &str, device: usize) -> PyResult<Bundle> {
    let rt = runtime(device)?;
    let bundle = py.detach(|| rt.compile(path).map_err(err))?;
    wrap(bundle, device, py)
}

fn torch_dtype(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::Bf16 => "bfloat16",
        DType::E4m3 => "float8_e4m3fn",
        DType::E5m2 => "float8_e5m2",
        DType::I8 => "int8",
        DType::I32 => "int32",
        DType::Tf32 => return None,
    })
}

/// The (ld, rows, cols) of a 2-D view laid out as `col_major` says, or why it is not.
fn matrix_ld(name: &str, v: &TensorView, col_major: bool) -> PyResult<u64> {
    let (rows, cols, s0, s1) = (v.shape[0], v.shape[1], v.strides[0], v.strides[1]);
    if s0 < 0 || s1 < 0 {
        return Err(PyValueError::new_err(format!(
            "{name} has a negative stride {:?}",
            v.strides
        )));
    }
    let ld = if col_major {
        if s0 != 1 && rows > 1 {
            return Err(PyValueError::new_err(format!(
                "{name} must be column-major (strides (1, ld)) as the spec declares `col`; it has \
                 strides {:?} (for a row-major [N, K] weight W pass W.t(), or compile the spec \
                 with `row`)",
                v.strides
            )));
        }
        if cols > 1 {
            s1
        } else {
            rows
        }
    } else {
        if s1 != 1 && cols > 1 {
            return Err(PyValueError::new_err(format!(
                "{name} must be row-major (strides (ld, 1)) as the spec declares `row`; it has \
                 strides {:?} (call .contiguous(), or compile the spec with `col`)",
                v.strides
            )));
        }
        if rows > 1 {
            s0
        } else {
            cols
        }
    };
    Ok(ld.max(0) as u64)
}

#[pymethods]
impl Kernel {
    #[getter]
    fn name(&self) -> &str {
        self.kernel.name()
    }

    /// The operands: (name, role, dtype, layout) in declaration order.
    #[getter]
    fn operands(&self) -> Vec<(String, String, String, String)> {
        self.kernel
            .spec()
            .operands
            .iter()
            .map(|o| {
                (
                    o.name.clone(),
                    format!("{:?}", o.role),
                    o.dtype.to_string(),
                    format!("{:?}", o.layout).to_lowercase(),
                )
            })
            .collect()
    }

    /// The variant that serves (m, n, k): its name and plan.
    fn variant(&self, m: u64, n: u64, k: u64) -> PyResult<(String, String)> {
        let v = self.kernel.variant_for(Shape::new(m, n, k)).map_err(err)?;
        Ok((v.name.clone(), v.kernel.plan.label()))
    }

    #[pyo3(signature = (a, b, out=None, *, stream=None, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        stream: Option<u64>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let spec = self.kernel.spec();
        let (sa, sb, sd) = (spec.a(), spec.b(), spec.d());
        let check = |name: &str, v: &TensorView, want: DType, ndim: usize| -> PyResult<()> {
            match &v.dtype {
                Ok(d) if *d == want => {}
                Ok(d) => {
                    return Err(PyTypeError::new_err(format!(
                        "{name} is {d}; the kernel takes {want}"
                    )))
                }
                Err(described) => {
                    return Err(PyTypeError::new_err(format!(
                        "{name} has {described}; the kernel takes {want}"
                    )))
                }
            }
            if v.device != self.device {
                return Err(PyValueError::new_err(format!(
                    "{name} is on cuda:{}; the bundle is loaded on cuda:{}",
                    v.device, self.device
                )));
            }
            if v.shape.len() != ndim {
                return Err(PyValueError::new_err(format!(
                    "{name} has {} dimensions {:?}; the kernel takes {ndim}",
                    v.shape.len(),
                    v.shape
                )));
            }
            Ok(())
        };
        let va = view(&sa.name, a)?;
        check(&sa.name, &va, sa.dtype, 2)?;
        let vb = view(&sb.name, b)?;
        check(&sb.name, &vb, sb.dtype, 2)?;
        let (m, k) = (va.shape[0], va.shape[1]);
        let (kb, n) = (vb.shape[0], vb.shape[1]);
        if k != kb {
            return Err(PyValueError::new_err(format!(
                "{} is {m}x{k} and {} is {kb}x{n}: their K differ",
                sa.name, sb.name
            )));
        }
        if m <= 0 || n <= 0 || k <= 0 {
            return Err(PyValueError::new_err(format!(
                "empty problem {m}x{n}x{k}: every extent must be at least 1"
            )));
        }
        let shape = Shape::new(m as u64, n as u64, k as u64);
        // Refuse a shape outside the bundle before allocating anything.
        self.kernel.variant_for(shape).map_err(err)?;
        let col = |o: &deepgemm_runtime::bundle_spec::Operand| {
            o.layout == deepgemm_runtime::bundle_spec::Layout::Col
        };
        let out = match out {
            Some(o) => o.clone(),
            None => {
                let torch = match torch(py)? {
                    Some(handles) => handles,
                    None => {
                        py.import("torch").map_err(|_| {
                            PyTypeError::new_err("out= is required when torch is not installed")
                        })?;
                        torch(py)?.ok_or_else(|| {
                            PyTypeError::new_err("torch imported but is not in sys.modules")
                        })?
                    }
                };
                let dtype = torch
                    .dtypes
                    .iter()
                    .find(|(_, d)| *d == sd.dtype)
                    .map(|(object, _)| object.bind(py))
                    .ok_or_else(|| {
                        PyTypeError::new_err(format!("no torch dtype for {}", sd.dtype))
                    })?;
                let kw = PyDict::new(py);
                kw.set_item(pyo3::intern!(py, "dtype"), dtype)?;
                // An integer device is a CUDA ordinal to torch's factories.
                kw.set_item(pyo3::intern!(py, "device"), self.device)?;
                let empty = torch.empty.bind(py);
                if col(sd) {
                    empty.call(((n, m),), Some(&kw))?.call_method0("t")?
                } else {
                    empty.call(((m, n),), Some(&kw))?
                }
            }
        };
        let vd = view(&sd.name, &out)?;
        check(&sd.name, &vd, sd.dtype, 2)?;
        if vd.shape != [m, n] {
            return Err(PyValueError::new_err(format!(
                "{} is {:?}; the product is {m}x{n}",
                sd.name, vd.shape
            )));
        }
        // Operands beyond A, B and D, and params, come by their spec names.
        let mut extra_views: Vec<(String, TensorView)> = Vec::new();
        let mut params: Vec<(String, f64)> = Vec::new();
        let mut stream = stream;
        if let Some(kwargs) = kwargs {
            for (key, value) in kwargs.iter() {
                let key: String = key.extract()?;
                if let Some(o) = spec.operand(&key) {
                    if [&sa.name, &sb.name, &sd.name].contains(&&o.name) {
                        return Err(PyTypeError::new_err(format!(
                            "{key} is passed positionally (A, B, out)"
                        )));
                    }
                    let v = view(&key, &value)?;
                    check(&key, &v, o.dtype, o.dims.len())?;
                    extra_views.push((key, v));
                } else if spec.params.iter().any(|p| p.name == key) {
                    params.push((key, value.extract::<f64>()?));
                } else {
                    let operands: Vec<&str> =
                        spec.operands.iter().map(|o| o.name.as_str()).collect();
                    let names: Vec<&str> = spec.params.iter().map(|p| p.name.as_str()).collect();
                    return Err(PyTypeError::new_err(format!(
                        "unexpected keyword `{key}`: the kernel's operands are {} and its params {}",
                        operands.join(", "),
                        if names.is_empty() { "none".into() } else { names.join(", ") }
                    )));
                }
            }
        }
        let mut operands: Vec<Operand> = Vec::with_capacity(3 + extra_views.len());
        operands.push(Operand {
            name: &sa.name,
            ptr: va.ptr,
            ld: matrix_ld(&sa.name, &va, col(sa))?,
            dtype: Some(sa.dtype),
        });
        operands.push(Operand {
            name: &sb.name,
            ptr: vb.ptr,
            ld: matrix_ld(&sb.name, &vb, col(sb))?,
            dtype: Some(sb.dtype),
        });
        operands.push(Operand {
            name: &sd.name,
            ptr: vd.ptr,
            ld: matrix_ld(&sd.name, &vd, col(sd))?,
            dtype: Some(sd.dtype),
        });
        for (key, v) in &extra_views {
            let o = spec.operand(key).expect("checked above");
            let ld = match v.shape.len() {
                2 => {
                    if v.shape != [m, n] && matches!(o.role, deepgemm_runtime::bundle_spec::Role::C)
                    {
                        return Err(PyValueError::new_err(format!(
                            "{key} is {:?}; the product is {m}x{n}",
                            v.shape
                        )));
                    }
                    matrix_ld(key, v, col(o))?
                }
                _ => {
                    if v.strides
                        .iter()
                        .zip(&v.shape)
                        .any(|(s, d)| *s != 1 && *d > 1)
                    {
                        return Err(PyValueError::new_err(format!(
                            "{key} must be contiguous; it has strides {:?}",
                            v.strides
                        )));
                    }
                    0
                }
            };
            operands.push(Operand {
                name: key,
                ptr: v.ptr,
                ld,
                dtype: Some(o.dtype),
            });
        }
        if stream.is_none() {
            stream = Some(current_stream(py, self.device)?);
        }
        let params: Vec<(&str, f64)> = params.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        self.kernel
            .launch(
                shape,
                &operands,
                &params,
                RawStream(stream.unwrap_or(0) as _),
            )
            .map_err(err)?;
        Ok(out.unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "<deepgemm.Kernel {} ({})>",
            self.kernel.name(),
            deepgemm_runtime::bundle_spec::shape_text(&self.kernel.spec().shape)
        )
    }
}

/// torch's current stream on `device` when torch is loaded (the stream a torch op would use),
/// else the legacy default stream.
fn current_stream(py: Python<'_>, device: i32) -> PyResult<u64> {
    let Some(torch) = torch(py)? else {
        return Ok(0);
    };
    // torch._C._cuda_getCurrentRawStream is what torch's own extensions use: one call, no
    // Stream object.
    if let Some(raw) = &torch.raw_stream {
        return raw.bind(py).call1((device,))?.extract();
    }
    py.import("torch")?
        .getattr("cuda")?
        .call_method1("current_stream", (device,))?
        .getattr("cuda_stream")?
        .extract()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Bundle>()?;
    m.add_class::<Kernel>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add("DeepGemmError", m.py().get_type::<DeepGemmError>())?;
    Ok(())
}

//! libdeepgemm: the C ABI of DeepGEMM's runtime (docs/runtime.md, "C").
//!
//! Every function returns a [`DgmmStatus`] (or a value that cannot fail) and never unwinds into
//! C: a panic is caught and reported as `DGMM_STATUS_INTERNAL`. The message of the last failure
//! on the calling thread is [`dgmm_last_error`]'s. Handles are opaque; a kernel handle stays
//! valid after its bundle is freed (it holds what it needs).

#![allow(clippy::missing_safety_doc)] // the safety contract of each function is its doc comment

use deepgemm_runtime::{Bundle, Kernel, Operand, RawStream, Runtime, RuntimeError, Shape};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What a call returned.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DgmmStatus {
    Ok = 0,
    /// A null or otherwise unusable argument (a null handle, a name that is not UTF-8).
    InvalidArgument = 1,
    /// The bundle file cannot be read.
    Io = 2,
    /// The file is not a valid bundle (or of another format version).
    Format = 3,
    /// The bundle was built for another GPU architecture.
    Arch = 4,
    /// The shape is outside the bundle's declared range (or not launchable).
    Shape = 5,
    /// An operand or param is wrong: missing, null, misaligned, a short leading dimension.
    Operand = 6,
    /// No kernel of that name.
    NotFound = 7,
    /// The driver failed, or there is no driver or GPU.
    Cuda = 8,
    /// A bug in DeepGEMM (a caught panic).
    Internal = 9,
}

/// A loaded bundle (opaque).
pub struct DgmmBundle {
    bundle: Bundle,
    /// NUL-terminated kernel names, for `dgmm_bundle_kernel_name`.
    names: Vec<CString>,
}

/// One kernel of a bundle (opaque).
pub struct DgmmKernel {
    kernel: Arc<Kernel>,
}

/// One operand of a launch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DgmmOperand {
    /// The spec's name of the operand (`A`, `B`, `D`, `bias`, ...), NUL-terminated.
    pub name: *const c_char,
    /// Device address of element (0, 0) (a `CUdeviceptr`).
    pub ptr: u64,
    /// Leading dimension in elements (row stride of a `row` matrix, column stride of a `col`
    /// one); 0 means packed. Ignored for vectors.
    pub ld: u64,
}

/// A value for one of the spec's `param`s (the others keep their defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DgmmParam {
    pub name: *const c_char,
    pub value: f64,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(message: &str) {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

fn status_of(e: &RuntimeError) -> DgmmStatus {
    match e {
        RuntimeError::Io { .. } => DgmmStatus::Io,
        RuntimeError::Format { .. } => DgmmStatus::Format,
        RuntimeError::ArchMismatch { .. } => DgmmStatus::Arch,
        RuntimeError::NoKernel { .. } => DgmmStatus::NotFound,
        RuntimeError::ShapeOutOfRange { .. } | RuntimeError::Launch { .. } => DgmmStatus::Shape,
        RuntimeError::Operand { .. } => DgmmStatus::Operand,
        RuntimeError::Build(_) => DgmmStatus::InvalidArgument,
        RuntimeError::Cuda(_) => DgmmStatus::Cuda,
    }
}

/// Runs `body`, turning its error (or a panic) into a status and the thread's last error.
fn guard(body: impl FnOnce() -> Result<(), (DgmmStatus, String)>) -> DgmmStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => DgmmStatus::Ok,
        Ok(Err((status, message))) => {
            set_error(&message);
            status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            set_error(&format!(
                "internal error in libdeepgemm (please report): {what}"
            ));
            DgmmStatus::Internal
        }
    }
}

fn runtime_error(e: RuntimeError) -> (DgmmStatus, String) {
    (status_of(&e), e.to_string())
}

fn invalid(message: impl Into<String>) -> (DgmmStatus, String) {
    (DgmmStatus::InvalidArgument, message.into())
}

/// A NUL-terminated UTF-8 string argument.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, (DgmmStatus, String)> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (the function's contract).
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| invalid(format!("{what} is not UTF-8")))
}

/// The message of the last failed call on this thread ("" if none), valid until the next
/// failing call on this thread.
#[no_mangle]
pub extern "C" fn dgmm_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Loads the bundle at `path` (NUL-terminated) on GPU `device`; on success `*out` is a handle to
/// free with `dgmm_bundle_free`. The file is checked (format, digests, architecture) before any
/// GPU work.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` points to writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn dgmm_bundle_load(
    path: *const c_char,
    device: u32,
    out: *mut *mut DgmmBundle,
) -> DgmmStatus {
    guard(|| {
        if out.is_null() {
            return Err(invalid("dgmm_bundle_load: `out` is NULL"));
        }
        // SAFETY: as the contract says.
        let path = unsafe { text(path, "dgmm_bundle_load: `path`") }?;
        let bytes = std::fs::read(path).map_err(|e| {
            runtime_error(RuntimeError::Io {
                path: path.to_string(),
                message: format!("cannot read it: {e}"),
            })
        })?;
        let file = deepgemm_runtime::BundleFile::from_bytes(&bytes).map_err(|problem| {
            runtime_error(RuntimeError::Format {
                path: path.to_string(),
                problem,
            })
        })?;
        let runtime = Runtime::new(device as usize).map_err(runtime_error)?;
        let bundle = runtime.load_file(file, path).map_err(runtime_error)?;
        let names = bundle
            .kernels()
            .iter()
            .map(|k| CString::new(k.name()).unwrap_or_default())
            .collect();
        let handle = Box::new(DgmmBundle { bundle, names });
        // SAFETY: checked non-null above.
        unsafe { *out = Box::into_raw(handle) };
        Ok(())
    })
}

/// Frees a bundle (NULL is ignored). Kernel handles taken from it stay valid.
///
/// # Safety
/// `bundle` came from `dgmm_bundle_load` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dgmm_bundle_free(bundle: *mut DgmmBundle) {
    if !bundle.is_null() {
        // SAFETY: the pointer came from Box::into_raw in dgmm_bundle_load.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(bundle) })));
    }
}

/// How many kernels the bundle holds (0 for NULL).
///
/// # Safety
/// `bundle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn dgmm_bundle_kernel_count(bundle: *const DgmmBundle) -> usize {
    // SAFETY: as the contract says.
    unsafe { bundle.as_ref() }.map_or(0, |b| b.names.len())
}

/// The name of kernel `index` (NULL when out of range), valid while the bundle lives.
///
/// # Safety
/// `bundle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn dgmm_bundle_kernel_name(
    bundle: *const DgmmBundle,
    index: usize,
) -> *const c_char {
    // SAFETY: as the contract says.
    unsafe { bundle.as_ref() }
        .and_then(|b| b.names.get(index))
        .map_or(std::ptr::null(), |n| n.as_ptr())
}

/// The kernel called `name` (NULL: the bundle's only kernel); free it with `dgmm_kernel_free`.
///
/// # Safety
/// `bundle` is a live handle; `name` is NULL or NUL-terminated; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn dgmm_kernel_get(
    bundle: *const DgmmBundle,
    name: *const c_char,
    out: *mut *mut DgmmKernel,
) -> DgmmStatus {
    guard(|| {
        // SAFETY: as the contract says.
        let bundle = unsafe { bundle.as_ref() }
            .ok_or_else(|| invalid("dgmm_kernel_get: `bundle` is NULL"))?;
        if out.is_null() {
            return Err(invalid("dgmm_kernel_get: `out` is NULL"));
        }
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: as the contract says.
            Some(unsafe { text(name, "dgmm_kernel_get: `name`") }?)
        };
        let kernel = bundle.bundle.kernel(name).map_err(runtime_error)?;
        // SAFETY: checked non-null above.
        unsafe { *out = Box::into_raw(Box::new(DgmmKernel { kernel })) };
        Ok(())
    })
}

/// Frees a kernel handle (NULL is ignored).
///
/// # Safety
/// `kernel` came from `dgmm_kernel_get` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dgmm_kernel_free(kernel: *mut DgmmKernel) {
    if !kernel.is_null() {
        // SAFETY: the pointer came from Box::into_raw in dgmm_kernel_get.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(kernel) })));
    }
}

/// Bytes of workspace the kernel needs at (m, n, k), in `*bytes`. The runtime allocates and
/// pools it itself; the figure is for memory planning. A shape outside the bundle is an error.
///
/// # Safety
/// `kernel` is a live handle; `bytes` is writable.
#[no_mangle]
pub unsafe extern "C" fn dgmm_workspace_size(
    kernel: *const DgmmKernel,
    m: u64,
    n: u64,
    k: u64,
    bytes: *mut u64,
) -> DgmmStatus {
    guard(|| {
        // SAFETY: as the contract says.
        let kernel = unsafe { kernel.as_ref() }
            .ok_or_else(|| invalid("dgmm_workspace_size: `kernel` is NULL"))?;
        if bytes.is_null() {
            return Err(invalid("dgmm_workspace_size: `bytes` is NULL"));
        }
        let size = kernel
            .kernel
            .workspace_bytes(Shape::new(m, n, k))
            .map_err(runtime_error)?;
        // SAFETY: checked non-null above.
        unsafe { *bytes = size };
        Ok(())
    })
}

/// Launches the kernel's variant for (m, n, k) on `stream` (a `CUstream` of the device's
/// primary context, NULL for the legacy default stream) and returns once it is enqueued. Every
/// operand the spec declares must be given, by name. Every check runs before anything is
/// enqueued: on an error nothing is written.
///
/// # Safety
/// `kernel` is a live handle; `operands` points to `n_operands` operands (NULL when 0) and
/// `params` to `n_params` params (NULL when 0; at most 16 of each), each with a NUL-terminated
/// name; the pointers are device memory of the sizes the shape implies, valid until the launch
/// completes.
#[no_mangle]
pub unsafe extern "C" fn dgmm_launch(
    kernel: *const DgmmKernel,
    m: u64,
    n: u64,
    k: u64,
    operands: *const DgmmOperand,
    n_operands: usize,
    params: *const DgmmParam,
    n_params: usize,
    stream: *mut c_void,
) -> DgmmStatus {
    guard(|| {
        // SAFETY: as the contract says.
        let kernel =
            unsafe { kernel.as_ref() }.ok_or_else(|| invalid("dgmm_launch: `kernel` is NULL"))?;
        let operands = if n_operands == 0 {
            &[][..]
        } else if operands.is_null() {
            return Err(invalid("dgmm_launch: `operands` is NULL"));
        } else {
            // SAFETY: as the contract says.
            unsafe { std::slice::from_raw_parts(operands, n_operands) }
        };
        let params = if n_params == 0 {
            &[][..]
        } else if params.is_null() {
            return Err(invalid("dgmm_launch: `params` is NULL"));
        } else {
            // SAFETY: as the contract says.
            unsafe { std::slice::from_raw_parts(params, n_params) }
        };
        // A few operands: on the stack, no allocation.
        let mut bound = [Operand {
            name: "",
            ptr: 0,
            ld: 0,
            dtype: None,
        }; 16];
        if operands.len() > bound.len() {
            return Err(invalid(format!(
                "dgmm_launch: {} operands (at most 16)",
                operands.len()
            )));
        }
        for (slot, o) in bound.iter_mut().zip(operands) {
            // SAFETY: as the contract says.
            let name = unsafe { text(o.name, "dgmm_launch: an operand's `name`") }?;
            *slot = Operand {
                name,
                ptr: o.ptr,
                ld: o.ld,
                dtype: None,
            };
        }
        // The params too.
        let mut values = [("", 0.0f64); 16];
        if params.len() > values.len() {
            return Err(invalid(format!(
                "dgmm_launch: {} params (at most 16)",
                params.len()
            )));
        }
        for (slot, p) in values.iter_mut().zip(params) {
            // SAFETY: as the contract says.
            *slot = (
                unsafe { text(p.name, "dgmm_launch: a param's `name`") }?,
                p.value,
            );
        }
        kernel
            .kernel
            .launch(
                Shape::new(m, n, k),
                &bound[..operands.len()],
                &values[..params.len()],
                RawStream(stream as _),
            )
            .map_err(runtime_error)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    fn last_error() -> String {
        // SAFETY: dgmm_last_error returns a live NUL-terminated string.
        unsafe { CStr::from_ptr(dgmm_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn null_arguments_are_errors_with_messages() {
        let mut bundle = null_mut();
        // SAFETY: every pointer is null or valid.
        unsafe {
            assert_eq!(
                dgmm_bundle_load(null(), 0, &mut bundle),
                DgmmStatus::InvalidArgument
            );
            assert_eq!(last_error(), "dgmm_bundle_load: `path` is NULL");
            assert_eq!(
                dgmm_bundle_load(c"x.dgb".as_ptr(), 0, null_mut()),
                DgmmStatus::InvalidArgument
            );
            let mut kernel = null_mut();
            assert_eq!(
                dgmm_kernel_get(null(), null(), &mut kernel),
                DgmmStatus::InvalidArgument
            );
            assert!(last_error().contains("`bundle` is NULL"));
            assert_eq!(
                dgmm_launch(null(), 1, 1, 1, null(), 0, null(), 0, null_mut()),
                DgmmStatus::InvalidArgument
            );
            assert_eq!(last_error(), "dgmm_launch: `kernel` is NULL");
            let mut bytes = 0;
            assert_eq!(
                dgmm_workspace_size(null(), 1, 1, 1, &mut bytes),
                DgmmStatus::InvalidArgument
            );
            assert_eq!(dgmm_bundle_kernel_count(null()), 0);
            assert!(dgmm_bundle_kernel_name(null(), 0).is_null());
            dgmm_bundle_free(null_mut());
            dgmm_kernel_free(null_mut());
        }
    }

    #[test]
    fn unreadable_and_invalid_files_are_errors() {
        let mut bundle = null_mut();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                dgmm_bundle_load(c"/nonexistent/x.dgb".as_ptr(), 0, &mut bundle),
                DgmmStatus::Io
            );
            assert!(
                last_error().starts_with("bundle /nonexistent/x.dgb: cannot read it"),
                "{}",
                last_error()
            );
        }
        let dir = std::env::temp_dir().join(format!("dgmm-capi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("junk.dgb");
        std::fs::write(&path, b"this is not a bundle").unwrap();
        let c_path = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                dgmm_bundle_load(c_path.as_ptr(), 0, &mut bundle),
                DgmmStatus::Format
            );
        }
        assert!(
            last_error().contains("is not a valid DeepGEMM bundle"),
            "{}",
            last_error()
        );
        assert!(bundle.is_null());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn panics_do_not_cross_the_abi() {
        let status = guard(|| panic!("boom"));
        assert_eq!(status, DgmmStatus::Internal);
        assert_eq!(
            last_error(),
            "internal error in libdeepgemm (please report): boom"
        );
    }

    /// include/deepgemm.h is what cbindgen makes of this file; `DEEPGEMM_BLESS=1` rewrites it.
    #[test]
    fn header_is_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
        let mut generated = Vec::new();
        cbindgen::Builder::new()
            .with_config(config)
            .with_src(dir.join("src/lib.rs"))
            .generate()
            .expect("cbindgen parses the ABI")
            .write(&mut generated);
        let path = dir.join("include/deepgemm.h");
        if std::env::var_os("DEEPGEMM_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let current = std::fs::read(&path).unwrap_or_default();
        assert!(
            current == generated,
            "include/deepgemm.h is out of date: run `DEEPGEMM_BLESS=1 cargo test -p deepgemm-capi header`"
        );
    }
}

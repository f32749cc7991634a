//! NVRTC: generated CUDA C++ → PTX and cubin, with ptxas's resource report (registers, spills,
//! static shared memory). NVRTC runs without a GPU, so CI compiles every generated kernel.
//!
//! The library is loaded at run time (cudarc's dynamic loading). When `libnvrtc.so.13` is not on
//! the loader path, [`ensure_loaded`] looks in the usual places (`$DEEPGEMM_NVRTC_DIR`, the CUDA
//! toolkit, a `.cuda-tools/` pip install in the current folder or one above it) and preloads it by
//! full path; the dynamic loader then resolves cudarc's `dlopen("libnvrtc.so.13")` to that copy,
//! because a loaded library answers to its soname.

use crate::error::{nvrtc as nvrtc_err, CudaError, NVRTC_INSTALL_HINT};
use cudarc::nvrtc::{result, sys};
use serde::{Deserialize, Serialize};
use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The file name NVRTC 13 ships as.
pub const NVRTC_LIBRARY: &str = "libnvrtc.so.13";
/// Where `pip install --target .cuda-tools nvidia-cuda-nvrtc==13.0.*` puts the library.
const PIP_LIBRARY_DIR: &str = ".cuda-tools/nvidia/cu13/lib";

/// What ptxas reported for the kernel's entry function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resources {
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// `__shared__` arrays declared in the source (dynamic shared memory comes on top).
    pub static_smem_bytes: u32,
    pub stack_frame_bytes: u32,
    /// Whether these figures came from ptxas's report (false: unknown until the driver loads the
    /// cubin; see `LoadedKernel::resources`).
    #[serde(default)]
    pub reported: bool,
}

impl Resources {
    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

/// The result of compiling one kernel for one architecture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiled {
    pub entry: String,
    pub arch: String,
    pub ptx: String,
    #[serde(skip)]
    pub cubin: Vec<u8>,
    pub resources: Resources,
    /// The whole compiler log (warnings and ptxas's report).
    pub log: String,
}

/// NVRTC's version, e.g. (13, 0).
pub fn version() -> Result<(i32, i32), CudaError> {
    ensure_loaded()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both pointers are valid for writes; the library is loaded.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(nvrtc_err("nvrtcVersion"))?;
    Ok((major, minor))
}

/// Makes sure NVRTC can be loaded, preloading it from a known folder if the loader path lacks it.
pub fn ensure_loaded() -> Result<(), CudaError> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            // SAFETY: loading NVRTC runs no initialisation code with preconditions.
            if unsafe { sys::is_culib_present() } {
                return Ok(());
            }
            let candidates = candidate_dirs();
            for dir in &candidates {
                let path = dir.join(NVRTC_LIBRARY);
                if path.is_file() && preload(&path) {
                    return Ok(());
                }
            }
            let mut searched: Vec<String> = vec!["the loader path (LD_LIBRARY_PATH)".into()];
            searched.extend(candidates.iter().map(|d| d.display().to_string()));
            Err(searched.join(", "))
        })
        .clone()
        .map_err(|searched| CudaError::NoNvrtc {
            searched,
            hint: NVRTC_INSTALL_HINT,
        })
}

/// Loads the library by full path and keeps it loaded for the life of the process. NVRTC opens
/// its builtins library (`libnvrtc-builtins.so.13.0`) by name on first use, so the builtins
/// next to it are preloaded first for the same reason.
fn preload(path: &Path) -> bool {
    let builtins = path
        .parent()
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n.starts_with("libnvrtc-builtins.so."))
        });
    for library in builtins.chain([path.to_path_buf()]) {
        // SAFETY: NVRTC's initialisers have no preconditions; the handle is leaked on purpose so
        // the library stays mapped for whoever opens it again by soname.
        match unsafe { libloading::Library::new(&library) } {
            Ok(handle) => std::mem::forget(handle),
            Err(_) => return false,
        }
    }
    // SAFETY: as above.
    unsafe { sys::is_culib_present() }
}

fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("DEEPGEMM_NVRTC_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            dirs.push(PathBuf::from(root).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    // Where `deepgemm setup` installs it.
    if let Some(dir) = setup_dir() {
        dirs.push(dir.join("nvidia/cu13/lib"));
    }
    let starts = [
        std::env::current_dir().ok(),
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf)),
    ];
    for start in starts.into_iter().flatten() {
        for ancestor in start.ancestors() {
            let dir = ancestor.join(PIP_LIBRARY_DIR);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The folder `deepgemm setup` installs NVRTC into: `~/.cache/deepgemm/cuda-tools`.
pub fn setup_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(Path::new(&home).join(".cache/deepgemm/cuda-tools"))
}

/// Whether NVRTC can be found (on the loader path or in a known folder), without loading it for
/// good: `deepgemm compile` asks before deciding to install it.
pub fn findable() -> bool {
    // SAFETY: only tries to open the library.
    if unsafe { sys::is_culib_present() } {
        return true;
    }
    candidate_dirs()
        .iter()
        .any(|d| d.join(NVRTC_LIBRARY).is_file())
}

/// The options every kernel is compiled with, besides the architecture. Part of the cache key.
pub fn base_options() -> Vec<String> {
    vec![
        "--std=c++17".into(),
        // ptxas's register / spill / smem report goes into the program log.
        "--ptxas-options=-v".into(),
        // Source lines in the cubin, for profilers and sanitizers; no effect on the code.
        "--generate-line-info".into(),
    ]
}

/// Compiles `source` (whose kernel is `entry`) to PTX and a cubin for `arch` (`sm_80`, `sm_90a`...).
pub fn compile(source: &str, entry: &str, arch: &str) -> Result<Compiled, CudaError> {
    ensure_loaded()?;
    let program_name = format!("{entry}.cu");
    let source_c = CString::new(source).map_err(|_| CudaError::Compile {
        entry: entry.into(),
        arch: arch.into(),
        report: "the generated source contains a NUL byte".into(),
    })?;
    let name_c = CString::new(program_name.clone()).map_err(|_| CudaError::Compile {
        entry: entry.into(),
        arch: arch.into(),
        report: "the entry name contains a NUL byte".into(),
    })?;
    let program = Program(
        result::create_program(&source_c, Some(&name_c))
            .map_err(nvrtc_err("nvrtcCreateProgram"))?,
    );
    let mut options = base_options();
    options.push(format!("--gpu-architecture={arch}"));
    // SAFETY: the program is live until `program` drops; the options are valid C strings.
    let compiled = unsafe { result::compile_program(program.0, &options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(program.0) }
        .map(|chars| c_chars_to_string(&chars))
        .map_err(nvrtc_err("nvrtcGetProgramLog"))?;
    if compiled.is_err() {
        return Err(CudaError::Compile {
            entry: entry.into(),
            arch: arch.into(),
            report: annotate_log(&log, &program_name, source),
        });
    }
    // SAFETY: the program compiled successfully and is live.
    let ptx = unsafe { result::get_ptx(program.0) }
        .map(|chars| c_chars_to_string(&chars))
        .map_err(nvrtc_err("nvrtcGetPTX"))?;
    let cubin = program.cubin()?;
    // NVRTC 13.0 on the H200 machine sometimes leaves ptxas's report out of the log of a program
    // that compiles: an empty log (1 of ~150 programs in the GPU matrix, reproducibly), or only
    // the front end's warnings (4 of the 6 odd-suite GEMMs in one run, 2026-12-01; never on the
    // CPU machines, where CI checks every report). The resources are then read from the driver
    // when the kernel is loaded (`reported` stays false), which counts any local memory as
    // spills.
    // A report that is there but does not parse is an error (a log format this parser does not
    // know must not pass for "no spills").
    let resources = match parse_resources(&log, entry) {
        Some(resources) => resources,
        None if !log.contains(&format!("Compiling entry function '{entry}'")) => {
            Resources::default()
        }
        None => {
            return Err(CudaError::ResourceReport {
                entry: entry.into(),
                log: log.clone(),
            })
        }
    };
    Ok(Compiled {
        entry: entry.into(),
        arch: arch.into(),
        ptx,
        cubin,
        resources,
        log,
    })
}

/// Owns an `nvrtcProgram` and destroys it on every path.
struct Program(sys::nvrtcProgram);

impl Program {
    fn cubin(&self) -> Result<Vec<u8>, CudaError> {
        let mut size = 0usize;
        // SAFETY: the program is live and compiled; `size` is valid for writes.
        unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .map_err(nvrtc_err("nvrtcGetCUBINSize"))?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` holds exactly the size NVRTC reported.
        unsafe { sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr() as *mut c_char) }
            .result()
            .map_err(nvrtc_err("nvrtcGetCUBIN"))?;
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here. A failure to free
        // leaks the program, which is all that can be done in a destructor.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// The compiler log followed by every line it reports an error on, quoted from the generated
/// source with a line of context either side, so the failure can be read without the file.
pub fn annotate_log(log: &str, program_name: &str, source: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut report = log.trim_end().to_string();
    let prefix = format!("{program_name}(");
    let mut quoted = Vec::new();
    for entry in log.lines() {
        let Some(rest) = entry.strip_prefix(&prefix) else {
            continue;
        };
        let Some((number, message)) = rest.split_once("): ") else {
            continue;
        };
        let (Ok(line), true) = (number.parse::<usize>(), message.contains("error")) else {
            continue;
        };
        if line == 0 || line > lines.len() || quoted.contains(&line) {
            continue;
        }
        quoted.push(line);
        report += &format!("\n\n{program_name}:{line}: {message}\n");
        for at in line.saturating_sub(1).max(1)..=(line + 1).min(lines.len()) {
            let marker = if at == line { ">" } else { " " };
            report += &format!("{marker}{at:>5} | {}\n", lines[at - 1]);
        }
    }
    report
}

/// Reads ptxas's verbose report for `entry`:
///
/// ```text
/// ptxas info    : Compiling entry function 'k' for 'sm_90a'
/// ptxas info    : Function properties for k
///     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
/// ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]
/// ```
pub fn parse_resources(log: &str, entry: &str) -> Option<Resources> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.iter().position(|l| {
        l.contains("Compiling entry function") && l.contains(&format!("'{entry}'"))
    })?;
    let section = lines[start + 1..]
        .iter()
        .take_while(|l| !l.contains("Compiling entry function"));
    let mut resources = Resources::default();
    let mut saw_registers = false;
    for line in section {
        if line.contains("stack frame") {
            resources.stack_frame_bytes = number_before(line, "bytes stack frame")?;
            resources.spill_store_bytes = number_before(line, "bytes spill stores")?;
            resources.spill_load_bytes = number_before(line, "bytes spill loads")?;
        }
        if line.contains("Used") && line.contains("registers") {
            resources.registers = number_before(line, "registers")?;
            resources.static_smem_bytes = number_before(line, "bytes smem").unwrap_or(0);
            saw_registers = true;
        }
    }
    resources.reported = saw_registers;
    saw_registers.then_some(resources)
}

/// The integer written just before `unit` in `line` ("… 40 registers" → 40).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let before = &line[..line.find(unit)?];
    before.split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ptxas_report_of_the_entry() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Used 99 registers, used 0 barriers, 352 bytes cmem[0]
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : Function properties for gemm
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
";
        let r = parse_resources(log, "gemm").unwrap();
        assert_eq!(
            r,
            Resources {
                registers: 168,
                spill_store_bytes: 8,
                spill_load_bytes: 12,
                static_smem_bytes: 4096,
                stack_frame_bytes: 16,
                reported: true,
            }
        );
        assert!(r.spills());
        assert_eq!(parse_resources(log, "other").unwrap().registers, 99);
        assert_eq!(parse_resources(log, "missing"), None);
    }

    #[test]
    fn compile_errors_quote_the_generated_line() {
        let source = "line one\nint x = y;\nline three\nline four";
        let log = "k.cu(2): error: identifier \"y\" is undefined\n\n1 error detected";
        let report = annotate_log(log, "k.cu", source);
        assert!(report.starts_with(log), "{report}");
        assert!(report.contains(">    2 | int x = y;"), "{report}");
        assert!(report.contains("     1 | line one"), "{report}");
        assert!(report.contains("     3 | line three"), "{report}");
        assert!(!report.contains("line four"), "{report}");
    }
}

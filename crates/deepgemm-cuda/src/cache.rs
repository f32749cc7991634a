//! The on-disk cubin cache: one file per compiled kernel, named by the SHA-256 of everything that
//! decides the binary (source, architecture, compiler options, NVRTC version, driver version when
//! known). Files are written to a temporary name and renamed into place, so concurrent processes
//! never see a partial entry; any entry that does not read back cleanly is treated as a miss.

use crate::error::CudaError;
use crate::nvrtc::{self, Compiled};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Overrides the cache folder.
pub const CACHE_DIR_VAR: &str = "DEEPGEMM_CACHE_DIR";

/// Bumped when the entry format changes, so old entries become misses.
const FORMAT: &str = "deepgemm-cubin-1";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCache {
    dir: PathBuf,
}

/// What decides a compiled binary; its hash names the cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheKey<'a> {
    pub source: &'a str,
    pub arch: &'a str,
    pub options: &'a [String],
    pub nvrtc_version: (i32, i32),
    /// `cuDriverGetVersion`, when a driver is installed (CI compiles without one).
    pub driver_version: Option<i32>,
}

impl CacheKey<'_> {
    /// Hex SHA-256 over length-prefixed fields (so no two keys can run together).
    pub fn digest(&self) -> String {
        let nvrtc = format!("nvrtc {}.{}", self.nvrtc_version.0, self.nvrtc_version.1);
        let driver = format!("driver {:?}", self.driver_version);
        let mut fields = vec![
            FORMAT.as_bytes(),
            self.source.as_bytes(),
            self.arch.as_bytes(),
        ];
        fields.extend(self.options.iter().map(|o| o.as_bytes()));
        fields.extend([nvrtc.as_bytes(), driver.as_bytes()]);
        hex_digest(&fields)
    }
}

/// Hex SHA-256 of `fields`, each prefixed by its length: the name of a cache entry.
pub(crate) fn hex_digest(fields: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl KernelCache {
    pub fn at(dir: impl Into<PathBuf>) -> KernelCache {
        KernelCache { dir: dir.into() }
    }

    /// `$DEEPGEMM_CACHE_DIR`, else `~/.cache/deepgemm`; `None` when neither can be named.
    pub fn from_env() -> Option<KernelCache> {
        if let Some(dir) = std::env::var_os(CACHE_DIR_VAR).filter(|d| !d.is_empty()) {
            return Some(KernelCache::at(dir));
        }
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
        Some(KernelCache::at(
            Path::new(&home).join(".cache").join("deepgemm"),
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.cubin"))
    }

    /// The cached kernel, if a complete entry exists.
    pub fn load(&self, key: &CacheKey) -> Option<Compiled> {
        let bytes = std::fs::read(self.path(&key.digest())).ok()?;
        let split = bytes.iter().position(|&b| b == b'\n')?;
        let mut compiled: Compiled = serde_json::from_slice(&bytes[..split]).ok()?;
        compiled.cubin = bytes[split + 1..].to_vec();
        (!compiled.cubin.is_empty()).then_some(compiled)
    }

    /// Writes an entry: a JSON line (everything but the cubin), then the cubin's bytes.
    pub fn store(&self, key: &CacheKey, compiled: &Compiled) -> Result<PathBuf, CudaError> {
        let fail = |path: &Path, e: std::io::Error| CudaError::Cache {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| fail(&self.dir, e))?;
        let digest = key.digest();
        let path = self.path(&digest);
        let header = serde_json::to_vec(compiled).map_err(|e| CudaError::Cache {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let mut bytes = header;
        bytes.push(b'\n');
        bytes.extend_from_slice(&compiled.cubin);
        write_atomic(&path, &bytes).map_err(|e| fail(&path, e))?;
        Ok(path)
    }
}

/// Writes `bytes` to a temporary file next to `path` and renames it into place, so readers in
/// other processes see the old entry or the new one, never part of one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Unique per process and call, in the same folder so the rename is atomic.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.{}.{write}.tmp", std::process::id()));
    let written = std::fs::File::create(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temp, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    renamed
}

/// Compiles `source` for `arch`, reusing the cache entry when there is one. A cache that cannot
/// be written is not an error (the kernel is compiled either way); the flag says whether the
/// result came from the cache.
pub fn compile_cached(
    source: &str,
    entry: &str,
    arch: &str,
    cache: Option<&KernelCache>,
) -> Result<(Compiled, bool), CudaError> {
    let options = nvrtc::base_options();
    let key = CacheKey {
        source,
        arch,
        options: &options,
        nvrtc_version: nvrtc::version()?,
        driver_version: crate::device::driver_version(),
    };
    if let Some(compiled) = cache.and_then(|c| c.load(&key)) {
        if compiled.entry == entry {
            return Ok((compiled, true));
        }
    }
    let compiled = nvrtc::compile(source, entry, arch)?;
    if let Some(cache) = cache {
        let _ = cache.store(&key, &compiled);
    }
    Ok((compiled, false))
}

/// Compiles a generated kernel through the cache named by the environment.
pub fn compile_kernel(
    kernel: &deepgemm::codegen::GeneratedKernel,
) -> Result<(Compiled, bool), CudaError> {
    let cache = KernelCache::from_env();
    compile_cached(&kernel.source, &kernel.entry, &kernel.arch, cache.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvrtc::Resources;

    fn key<'a>(source: &'a str, options: &'a [String], driver: Option<i32>) -> CacheKey<'a> {
        CacheKey {
            source,
            arch: "sm_90a",
            options,
            nvrtc_version: (13, 0),
            driver_version: driver,
        }
    }

    fn compiled() -> Compiled {
        Compiled {
            entry: "k".into(),
            arch: "sm_90a".into(),
            ptx: "// ptx\n.version 9.0\n".into(),
            cubin: vec![0x7f, b'E', b'L', b'F', b'\n', 0, 1, 2],
            resources: Resources {
                registers: 40,
                ..Resources::default()
            },
            log: "ptxas info\n".into(),
        }
    }

    #[test]
    fn keys_change_with_every_field() {
        let options = vec!["-a".to_string()];
        let base = key("src", &options, Some(13000)).digest();
        assert_eq!(base.len(), 64);
        assert_eq!(base, key("src", &options, Some(13000)).digest());
        assert_ne!(base, key("src2", &options, Some(13000)).digest());
        assert_ne!(base, key("src", &[], Some(13000)).digest());
        assert_ne!(base, key("src", &options, None).digest());
        let mut other_arch = key("src", &options, Some(13000));
        other_arch.arch = "sm_80";
        assert_ne!(base, other_arch.digest());
    }

    #[test]
    fn entries_round_trip_and_partial_files_are_misses() {
        let dir = std::env::temp_dir().join(format!("deepgemm-cache-test-{}", std::process::id()));
        let cache = KernelCache::at(&dir);
        let options = vec![];
        let k = key("source", &options, None);
        assert_eq!(cache.load(&k), None);
        let path = cache.store(&k, &compiled()).unwrap();
        assert_eq!(cache.load(&k), Some(compiled()));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        // A truncated entry (no cubin) is a miss, not an error.
        let bytes = std::fs::read(&path).unwrap();
        let header_end = bytes.iter().position(|&b| b == b'\n').unwrap();
        std::fs::write(&path, &bytes[..header_end + 1]).unwrap();
        assert_eq!(cache.load(&k), None);
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(cache.load(&k), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_writers_leave_one_complete_entry() {
        let dir = std::env::temp_dir().join(format!("deepgemm-cache-race-{}", std::process::id()));
        let cache = KernelCache::at(&dir);
        let options = vec![];
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    cache
                        .store(&key("race", &options, None), &compiled())
                        .unwrap()
                });
            }
        });
        assert_eq!(cache.load(&key("race", &options, None)), Some(compiled()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

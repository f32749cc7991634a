//! The bundle file (`NAME.dgb`): one versioned file holding every kernel of a spec file, the
//! metadata of each variant, their cubins, the repack-copy kernel and a dispatch table per kernel.
//!
//! Layout (docs/runtime.md, "Bundle format"), all integers little-endian:
//!
//! ```text
//! 0   8 bytes  magic "DGMMBNDL"
//! 8   u32      format version (FORMAT_VERSION)
//! 12  u64      header length H
//! 20  H bytes  header: UTF-8 JSON, a BundleHeader
//! 20+H         blobs: the cubins, each at the offset its Blob names (from the blobs' start),
//!              with its SHA-256
//! ```
//!
//! The JSON header keeps the format readable and lets fields be added; the version is bumped
//! when a reader of the old version would misread a new file.

use crate::dispatch::DispatchTable;
use deepgemm::codegen::GeneratedKernel;
use deepgemm::plan::ShapeBucket;
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::nvrtc::{Compiled, Resources};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MAGIC: &[u8; 8] = b"DGMMBNDL";
/// 2: per-backend calibration in the specs' hardware, workspaces as regions. 3: kernels name
/// the operands the launcher transposes (fp8 read K-major); a version 2 runtime would pass them
/// untransposed. Other versions are refused with the message to rebuild.
pub const FORMAT_VERSION: u32 = 3;
const PREFIX_BYTES: usize = 20;

/// Where a binary lies in the blob section, and its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blob {
    pub offset: u64,
    pub len: u64,
    /// Hex SHA-256 of the bytes, checked on load.
    pub sha256: String,
}

/// Everything in a bundle but the binaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleHeader {
    pub format_version: u32,
    /// The DeepGEMM that wrote it.
    pub deepgemm_version: String,
    /// The architecture every cubin is built for (`sm_90a`).
    pub arch: String,
    /// The hardware model the kernels were planned for (`h200`).
    pub target: String,
    /// NVRTC's version that compiled the cubins.
    pub nvrtc_version: (i32, i32),
    /// The repack copy kernel (`deepgemm-cuda/kernels/pitch_copy.cu`) for `arch`.
    pub pitch_copy: Blob,
    pub kernels: Vec<BundleKernel>,
}

/// One kernel of the spec file with all its variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleKernel {
    pub name: String,
    /// Hex SHA-256 of the spec's JSON: which spec the kernels implement.
    pub spec_hash: String,
    /// The checked spec: operands, params and their defaults, the declared shape range.
    pub spec: KernelSpec,
    pub variants: Vec<BundleVariant>,
    /// Shape bucket -> index into `variants`.
    pub dispatch: DispatchTable,
}

/// One compiled variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleVariant {
    pub name: String,
    pub bucket: ShapeBucket,
    /// The generated kernel: entry point, argument order, threads, shared memory, grid and
    /// workspace rules, operand alignment, the plan and the CUDA source.
    pub kernel: GeneratedKernel,
    /// ptxas's report (`reported` false: read from the driver at load).
    pub resources: Resources,
    pub cubin: Blob,
}

/// A bundle in memory: its header and the blob section.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleFile {
    pub header: BundleHeader,
    pub blobs: Vec<u8>,
}

/// One compiled variant, as the compiler hands it to [`BundleBuilder::add_kernel`].
pub struct CompiledVariant {
    pub name: String,
    pub bucket: ShapeBucket,
    pub kernel: GeneratedKernel,
    pub compiled: Compiled,
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Assembles a bundle from compiled kernels.
pub struct BundleBuilder {
    arch: String,
    target: String,
    nvrtc_version: (i32, i32),
    kernels: Vec<BundleKernel>,
    blobs: Vec<u8>,
}

impl BundleBuilder {
    pub fn new(arch: &str, target: &str, nvrtc_version: (i32, i32)) -> BundleBuilder {
        BundleBuilder {
            arch: arch.to_string(),
            target: target.to_string(),
            nvrtc_version,
            kernels: Vec::new(),
            blobs: Vec::new(),
        }
    }

    fn blob(&mut self, bytes: &[u8]) -> Blob {
        // 256-byte aligned offsets: loaders may map the section and hand a cubin straight to
        // the driver.
        self.blobs.resize(self.blobs.len().next_multiple_of(256), 0);
        let blob = Blob {
            offset: self.blobs.len() as u64,
            len: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        };
        self.blobs.extend_from_slice(bytes);
        blob
    }

    /// Adds `spec`'s variants (in bucket order). Refuses a kernel for another architecture
    /// than the bundle's: a bundle loads on one GPU architecture or not at all.
    pub fn add_kernel(
        &mut self,
        spec: &KernelSpec,
        variants: Vec<CompiledVariant>,
    ) -> Result<(), String> {
        if variants.is_empty() {
            return Err(format!("kernel `{}` has no variants", spec.name));
        }
        let mut out = Vec::with_capacity(variants.len());
        for v in variants {
            if v.kernel.arch != self.arch || v.compiled.arch != self.arch {
                return Err(format!(
                    "kernel `{}` variant {} is built for {}, the bundle for {}: one bundle holds \
                     one architecture (split the spec file by target)",
                    spec.name, v.name, v.kernel.arch, self.arch
                ));
            }
            if v.compiled.cubin.is_empty() {
                return Err(format!(
                    "kernel `{}` variant {} has no cubin",
                    spec.name, v.name
                ));
            }
            let cubin = self.blob(&v.compiled.cubin);
            out.push(BundleVariant {
                name: v.name,
                bucket: v.bucket,
                kernel: v.kernel,
                resources: v.compiled.resources,
                cubin,
            });
        }
        let buckets: Vec<ShapeBucket> = out.iter().map(|v| v.bucket).collect();
        let dispatch =
            DispatchTable::build(&buckets).map_err(|e| format!("kernel `{}`: {e}", spec.name))?;
        let spec_json = serde_json::to_vec(spec).map_err(|e| e.to_string())?;
        self.kernels.push(BundleKernel {
            name: spec.name.clone(),
            spec_hash: sha256_hex(&spec_json),
            spec: spec.clone(),
            variants: out,
            dispatch,
        });
        Ok(())
    }

    /// The finished bundle; `pitch_copy` is the repack kernel compiled for the bundle's arch.
    pub fn finish(mut self, pitch_copy: &Compiled) -> Result<BundleFile, String> {
        if pitch_copy.arch != self.arch {
            return Err(format!(
                "the copy kernel is built for {}, the bundle for {}",
                pitch_copy.arch, self.arch
            ));
        }
        let pitch_copy = self.blob(&pitch_copy.cubin);
        Ok(BundleFile {
            header: BundleHeader {
                format_version: FORMAT_VERSION,
                deepgemm_version: env!("CARGO_PKG_VERSION").to_string(),
                arch: self.arch,
                target: self.target,
                nvrtc_version: self.nvrtc_version,
                pitch_copy,
                kernels: self.kernels,
            },
            blobs: self.blobs,
        })
    }
}

impl BundleFile {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = serde_json::to_vec(&self.header).expect("bundle headers serialize");
        let mut out = Vec::with_capacity(PREFIX_BYTES + header.len() + self.blobs.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.blobs);
        out
    }

    /// Parses and checks a bundle: magic, version, header, every blob's bounds and digest, and
    /// every dispatch table's cells. The error says what is wrong, for the caller to prefix with
    /// the file's name.
    pub fn from_bytes(bytes: &[u8]) -> Result<BundleFile, String> {
        if bytes.len() < PREFIX_BYTES || &bytes[..8] != MAGIC {
            return Err("it does not start with the bundle magic \"DGMMBNDL\"".into());
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}; this runtime reads version {FORMAT_VERSION} \
                 (rebuild the bundle with this DeepGEMM's `deepgemm compile`)"
            ));
        }
        let header_len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        let header_end = usize::try_from(header_len)
            .ok()
            .and_then(|len| PREFIX_BYTES.checked_add(len))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| format!("the header length {header_len} runs past the file's end"))?;
        let header: BundleHeader = serde_json::from_slice(&bytes[PREFIX_BYTES..header_end])
            .map_err(|e| format!("the header does not parse: {e}"))?;
        let file = BundleFile {
            header,
            blobs: bytes[header_end..].to_vec(),
        };
        file.blob(&file.header.pitch_copy)
            .map_err(|e| format!("the copy kernel: {e}"))?;
        for kernel in &file.header.kernels {
            for variant in &kernel.variants {
                file.blob(&variant.cubin)
                    .map_err(|e| format!("kernel `{}` {}: {e}", kernel.name, variant.name))?;
            }
            let table = &kernel.dispatch;
            if table.cells.len() != table.m.len() * table.n.len() * table.k.len()
                || table
                    .cells
                    .iter()
                    .flatten()
                    .any(|&v| v as usize >= kernel.variants.len())
            {
                return Err(format!(
                    "kernel `{}`: the dispatch table is inconsistent",
                    kernel.name
                ));
            }
        }
        Ok(file)
    }

    /// The bytes of `blob`, checked against its digest.
    pub fn blob(&self, blob: &Blob) -> Result<&[u8], String> {
        let range = usize::try_from(blob.offset)
            .ok()
            .zip(usize::try_from(blob.len).ok())
            .and_then(|(start, len)| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= self.blobs.len())
            .ok_or_else(|| {
                format!(
                    "a binary at {}+{} lies outside the file's {} bytes of binaries (truncated?)",
                    blob.offset,
                    blob.len,
                    self.blobs.len()
                )
            })?;
        let bytes = &self.blobs[range];
        if sha256_hex(bytes) != blob.sha256 {
            return Err("a binary does not match its SHA-256 (the file is corrupt)".into());
        }
        Ok(bytes)
    }
}

//! The hardware model: one GPU described as data (`hardware "x.yaml"`, docs/language.md §3).
//! Built-in presets live as YAML files next to this module, so the preset, the printed form and a
//! user's file share one schema.

mod presets;
mod validate;

pub use presets::{preset, preset_names, PresetName, PRESETS};
pub use validate::HwError;

use crate::dtype::DType;
use crate::plan::Backend;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU, as the model sees it. Every constant the model uses is a field here (or in
/// `calibration`), so calibrating the model changes this file, never the code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    pub name: String,
    /// Architecture for code generation, e.g. `sm_90a`, `sm_80`.
    pub arch: String,
    pub sms: u32,
    /// Sustained clock under tensor-core load.
    pub clock_mhz: u32,
    pub warp_size: u32,
    pub regs_per_sm: u32,
    pub max_regs_per_thread: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    pub smem_per_sm_bytes: u32,
    /// The most dynamic shared memory one block may opt in to.
    pub smem_per_block_bytes: u32,
    pub smem_banks: u32,
    pub l2_bytes: u64,
    /// Sustained DRAM bandwidth (read + write), GB/s.
    pub dram_bw_gbps: f64,
    pub l2_bw_gbps: f64,
    pub smem_bw_bytes_per_clk_per_sm: f64,
    /// Math throughput per input dtype and instruction family.
    pub mma: Vec<MmaRate>,
    pub latencies: Latencies,
    pub features: Features,
    /// Efficiency constants fitted from measurements (`deepgemm tune` / bench).
    #[serde(default)]
    pub calibration: Calibration,
    /// Where the figures come from, which says how far to trust the predictions. A fact of each
    /// file, so it lives in the YAML beside the figures rather than in code.
    #[serde(default)]
    pub provenance: Provenance,
}

/// How a hardware description was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Datasheet figures with the calibration fitted to timings on this GPU.
    Measured,
    /// Vendor datasheet figures; the calibration is the untuned defaults.
    Datasheet,
    /// A hardware file that does not say.
    #[default]
    Unstated,
}

impl Provenance {
    /// The YAML spelling.
    pub fn name(self) -> &'static str {
        match self {
            Provenance::Measured => "measured",
            Provenance::Datasheet => "datasheet",
            Provenance::Unstated => "unstated",
        }
    }

    /// In words, for reports: what a prediction on this hardware rests on.
    pub fn describe(self) -> &'static str {
        match self {
            Provenance::Measured => "calibrated from measurements on this GPU",
            Provenance::Datasheet => {
                "datasheet figures, not calibrated by measurement: predictions are less certain"
            }
            Provenance::Unstated => "the hardware file does not say whether it is calibrated",
        }
    }
}

/// Dense math rate of one instruction family for one input dtype.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmaRate {
    pub dtype: DType,
    pub backend: Backend,
    /// The instruction and its shape, e.g. `wgmma.m64nNk16`, `mma.sync.m16n8k16`, `ffma`.
    pub instruction: String,
    pub dense_flops_per_clk_per_sm: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latencies {
    /// Load latencies, cycles: on a calibrated preset (h200) the loaded figures a full grid's
    /// cp.async waits for; elsewhere idle pointer-chase figures until someone measures them.
    pub dram_cycles: u32,
    pub l2_cycles: u32,
    pub smem_cycles: u32,
    pub mma_cycles: u32,
    /// The same loads with the memory system idle: a grid that keeps few SMs busy waits about
    /// this long. Absent: the loaded figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_idle_cycles: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_idle_cycles: Option<u32>,
    /// What a TMA-fed ring (sm90) adds to each stage's round trip on top of the load: the
    /// consumers' release (an mbarrier arrive in every cluster block), the producer's wait and
    /// the bulk copy's issue. Absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tma_round_trip_cycles: Option<u32>,
}

impl Latencies {
    /// DRAM and L2 load latencies, cycles, when `load` (0 = idle, 1 = every SM streaming) of the
    /// GPU is busy: linear between the idle and the loaded figures.
    pub fn at_load(&self, load: f64) -> (f64, f64) {
        let load = load.clamp(0.0, 1.0);
        let between = |idle: Option<u32>, loaded: u32| {
            let idle = idle.unwrap_or(loaded) as f64;
            idle + (loaded as f64 - idle) * load
        };
        (
            between(self.dram_idle_cycles, self.dram_cycles),
            between(self.l2_idle_cycles, self.l2_cycles),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Features {
    pub tma: bool,
    pub wgmma: bool,
    pub cp_async: bool,
    pub clusters: bool,
    pub setmaxnreg: bool,
}

/// Fitted efficiencies; the defaults are first guesses to be replaced by measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Calibration {
    /// Fraction of `dram_bw_gbps` a streaming kernel reaches.
    pub dram_efficiency: f64,
    /// Fixed cost of one launch (driver + ramp), microseconds.
    pub launch_overhead_us: f64,
    /// Cost of a kernel queued right behind another in the same stream (each operand's repack
    /// copy ahead of the GEMM): only the gap between the two, microseconds.
    pub queued_launch_us: f64,
    /// Fraction of `l2_bytes` that keeps operand panels resident from one wave to the next.
    pub l2_resident_fraction: f64,
    /// Resident warps per SM needed to keep its math pipes busy (one per scheduler partition).
    pub warps_for_peak_math: f64,
    /// Cost of one block-wide `__syncthreads` in the main loop, cycles.
    pub syncthreads_cycles: f64,
    /// Cost of one mbarrier wait (arrive + try_wait round) in the main loop, cycles.
    pub mbarrier_wait_cycles: f64,
    /// Registers per thread for addresses, loop counters and predicates. 40 matches ptxas
    /// (CUDA 13.0) on the sm80 kernels: a 128x32 warp tile (128 accumulators) uses 255 and
    /// spills, a 64x64 one uses 240-254.
    pub address_regs_per_thread: u32,
    /// Registers per cp.async copy a thread issues per stage (sm80: the copies are unrolled, each
    /// with an address and a predicate). 0.75 makes a one-warp 64x64x64 bf16 tile (32 copies next
    /// to 128 accumulators) spill, as ptxas does on sm_80-sm_89, and keeps 128x128x64 on four
    /// warps (16 copies; ptxas: 228-232 registers) in.
    pub regs_per_copy: f64,
    /// Registers per thread for epilogue temporaries.
    pub epilogue_regs_per_thread: u32,
    /// The figures of each backend, keyed by its name (`sm90`, `sm80`, `simt`); a backend the
    /// file leaves out, or a figure it leaves out, takes the backend's defaults.
    pub backends: BackendCalibrations,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            dram_efficiency: 0.90,
            launch_overhead_us: 3.0,
            queued_launch_us: 1.0,
            l2_resident_fraction: 0.50,
            warps_for_peak_math: 4.0,
            syncthreads_cycles: 40.0,
            mbarrier_wait_cycles: 20.0,
            address_regs_per_thread: 40,
            regs_per_copy: 0.75,
            epilogue_regs_per_thread: 8,
            backends: BackendCalibrations::default(),
        }
    }
}

/// One backend's fitted figures (`calibration.backends.NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BackendCalibration {
    /// Fraction of the dense peak of the backend's math instruction that a well-fed main loop
    /// sustains.
    pub mma_efficiency: f64,
    /// Fraction of `l2_bw_gbps` that the backend's L2 -> shared-memory copies sustain: cp.async
    /// (sm80, simt), TMA bulk copies that move whole boxes per request (sm90).
    pub l2_efficiency: f64,
    /// Fraction of `smem_bw_bytes_per_clk_per_sm` that its tile copies and fragment loads
    /// sustain: ldmatrix / scalar loads (sm80, simt), wgmma's descriptor reads with TMA writes
    /// (sm90).
    pub smem_efficiency: f64,
    /// Cycles per k-tile that K-block scales add to the main loop's critical path (sm90 fp8:
    /// their copies, the shared-memory reads and the multiplies before the promotion can
    /// finish). Only a backend whose defaults have it reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kblock_scale_cycles: Option<f64>,
    /// Cycles per k-tile that the two-level accumulation of fp8 adds to the main loop's critical
    /// path, with or without K-block scales (sm90: each consumer waits for its k-tile's wgmmas
    /// and adds their partial sums into its f32 sums before the next k-tile's wgmmas). Only a
    /// backend whose defaults have it reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_cycles: Option<f64>,
    /// Registers a producer warpgroup keeps after `setmaxnreg.dec` (sm90: the generated kernel's
    /// figure too). Only a backend whose defaults have it reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub producer_regs: Option<u32>,
    /// Registers per thread for addresses, loop counters and predicates in this backend's
    /// kernels, in place of `address_regs_per_thread` (sm90: its consumers keep the wgmma
    /// descriptors and barrier addresses in uniform registers). Only a backend whose defaults
    /// have it reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_regs: Option<u32>,
    /// Fraction of the DRAM rate (`dram_efficiency` of `dram_bw_gbps`) that the backend's
    /// operand stream sustains where it holds its loads in registers rather than copying
    /// asynchronously (gemv). Only a backend whose defaults have it reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_efficiency: Option<f64>,
    /// Microseconds of `launch_overhead_us` the backend's kernels do not pay: what a short
    /// kernel saves against the long ones the overhead was fitted to (its code fetched cold after
    /// the L2 flush, no ring to set up before the first load). Only a backend whose defaults have
    /// it reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_saving_us: Option<f64>,
}
/// A `calibration.backends` entry as written: every figure optional.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendCalibrationEntry {
    mma_efficiency: Option<f64>,
    l2_efficiency: Option<f64>,
    smem_efficiency: Option<f64>,
    kblock_scale_cycles: Option<f64>,
    promotion_cycles: Option<f64>,
    producer_regs: Option<u32>,
    address_regs: Option<u32>,
    stream_efficiency: Option<f64>,
    launch_saving_us: Option<f64>,
}

impl BackendCalibrationEntry {
    /// The entry over `backend`'s defaults. An optional figure the defaults lack is one the
    /// backend does not read: setting it is an error, not a silent no-op.
    fn over_defaults(self, backend: Backend) -> Result<BackendCalibration, String> {
        let defaults = crate::backend::of(backend).default_calibration();
        let unread = |name: &str, set: bool, read: bool| {
            if set && !read {
                Err(format!(
                    "calibration.backends.{backend}.{name}: the {backend} backend does not read it"
                ))
            } else {
                Ok(())
            }
        };
        unread(
            "kblock_scale_cycles",
            self.kblock_scale_cycles.is_some(),
            defaults.kblock_scale_cycles.is_some(),
        )?;
        unread(
            "promotion_cycles",
            self.promotion_cycles.is_some(),
            defaults.promotion_cycles.is_some(),
        )?;
        unread(
            "producer_regs",
            self.producer_regs.is_some(),
            defaults.producer_regs.is_some(),
        )?;
        unread(
            "address_regs",
            self.address_regs.is_some(),
            defaults.address_regs.is_some(),
        )?;
        unread(
            "stream_efficiency",
            self.stream_efficiency.is_some(),
            defaults.stream_efficiency.is_some(),
        )?;
        unread(
            "launch_saving_us",
            self.launch_saving_us.is_some(),
            defaults.launch_saving_us.is_some(),
        )?;
        Ok(BackendCalibration {
            mma_efficiency: self.mma_efficiency.unwrap_or(defaults.mma_efficiency),
            l2_efficiency: self.l2_efficiency.unwrap_or(defaults.l2_efficiency),
            smem_efficiency: self.smem_efficiency.unwrap_or(defaults.smem_efficiency),
            kblock_scale_cycles: self.kblock_scale_cycles.or(defaults.kblock_scale_cycles),
            promotion_cycles: self.promotion_cycles.or(defaults.promotion_cycles),
            producer_regs: self.producer_regs.or(defaults.producer_regs),
            address_regs: self.address_regs.or(defaults.address_regs),
            stream_efficiency: self.stream_efficiency.or(defaults.stream_efficiency),
            launch_saving_us: self.launch_saving_us.or(defaults.launch_saving_us),
        })
    }
}

/// Every backend's [`BackendCalibration`]: what the file gives over the backend's defaults, so a
/// new backend adds an entry (and its defaults), not fields.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendCalibrations(BTreeMap<Backend, BackendCalibration>);

impl BackendCalibrations {
    /// The figures of `backend`.
    pub fn get(&self, backend: Backend) -> BackendCalibration {
        self.0
            .get(&backend)
            .copied()
            .unwrap_or_else(|| crate::backend::of(backend).default_calibration())
    }

    /// The figures of `backend`, to change them.
    pub fn get_mut(&mut self, backend: Backend) -> &mut BackendCalibration {
        self.0
            .entry(backend)
            .or_insert_with(|| crate::backend::of(backend).default_calibration())
    }

    /// Each backend and its figures, in [`Backend::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Backend, BackendCalibration)> + '_ {
        Backend::ALL.into_iter().map(|b| (b, self.get(b)))
    }
}

impl Default for BackendCalibrations {
    fn default() -> Self {
        BackendCalibrations(
            Backend::ALL
                .into_iter()
                .map(|b| (b, crate::backend::of(b).default_calibration()))
                .collect(),
        )
    }
}

/// Every backend, written out in full: the printed form of a hardware file says every figure.
impl Serialize for BackendCalibrations {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// An unknown backend name is an error naming the known ones (serde's message for `Backend`).
impl<'de> Deserialize<'de> for BackendCalibrations {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let written = BTreeMap::<Backend, BackendCalibrationEntry>::deserialize(deserializer)?;
        Backend::ALL
            .into_iter()
            .map(|b| {
                let entry = written.get(&b).copied().unwrap_or_default();
                entry.over_defaults(b).map(|c| (b, c))
            })
            .collect::<Result<_, _>>()
            .map(BackendCalibrations)
            .map_err(serde::de::Error::custom)
    }
}

impl Hardware {
    /// Compute capability as a number, e.g. 90 for `sm_90a`, 89 for `sm_89`.
    pub fn compute_capability(&self) -> u32 {
        self.arch
            .trim_start_matches("sm_")
            .trim_end_matches('a')
            .parse()
            .unwrap_or(0)
    }

    /// The math rate for a dtype on a backend, if the hardware has one.
    pub fn mma_rate(&self, dtype: DType, backend: Backend) -> Option<&MmaRate> {
        self.mma
            .iter()
            .find(|r| r.dtype == dtype && r.backend == backend)
    }

    /// Whether any tensor-core path handles this input dtype.
    pub fn supports_dtype(&self, dtype: DType) -> bool {
        self.mma.iter().any(|r| r.dtype == dtype)
    }

    /// Parse and validate a hardware YAML document.
    pub fn from_yaml(text: &str) -> Result<Hardware, HwError> {
        Hardware::parse(text, None)
    }

    /// [`Hardware::from_yaml`], a syntax error placed as `file:line:column` when the document is
    /// a file. The message is one line: the parser's own snippet names no file (`<input>`) and
    /// repeats the message, and the spec's diagnostic already shows where the file is named.
    fn parse(text: &str, file: Option<&str>) -> Result<Hardware, HwError> {
        let hw: Hardware = serde_saphyr::from_str(text).map_err(|e| {
            let plain = e.without_snippet().to_string();
            let Some(at) = e.location() else {
                return HwError::Parse(plain);
            };
            // The position is given once, in front, so the parser's own is cut off.
            let (line, column) = (at.line(), at.column());
            let message = plain
                .strip_suffix(&format!(" at line {line}, column {column}"))
                .unwrap_or(&plain);
            HwError::Parse(match file {
                Some(file) => format!("{file}:{line}:{column}: {message}"),
                None => format!("line {line} column {column}: {message}"),
            })
        })?;
        hw.validate()?;
        Ok(hw)
    }

    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("a Hardware always serializes")
    }

    /// Load a hardware file from disk.
    pub fn load(path: &std::path::Path) -> Result<Hardware, HwError> {
        let text = std::fs::read_to_string(path).map_err(|e| HwError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Hardware::parse(&text, Some(&path.display().to_string()))
    }
}

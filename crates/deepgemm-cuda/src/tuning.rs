//! The tuning cache: the fastest plan `deepgemm tune` timed for one (GPU, driver, spec, shape),
//! one JSON file per key under `<cache dir>/tuning/`, written atomically like the cubin cache.

use crate::cache::{hex_digest, write_atomic, KernelCache};
use crate::device::GpuInfo;
use deepgemm::plan::{Plan, Shape};
use deepgemm::spec::KernelSpec;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Bumped when the entry format changes, so old entries become misses.
const FORMAT: &str = "deepgemm-tuning-4";

/// A tuned plan and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedPlan {
    pub gpu: String,
    pub driver_version: i32,
    pub kernel: String,
    pub shape: Shape,
    pub plan: Plan,
    pub label: String,
    pub time_us: f64,
    /// The model's first pick and its measured time, for comparison.
    pub model_pick: String,
    pub model_pick_us: f64,
    /// Seconds since the Unix epoch.
    pub tuned_at: u64,
}

#[derive(Debug, Clone)]
pub struct TuningCache {
    dir: PathBuf,
}

impl TuningCache {
    /// `tuning/` inside the cubin cache's folder.
    pub fn from_env() -> Option<TuningCache> {
        KernelCache::from_env().map(|c| TuningCache {
            dir: c.dir().join("tuning"),
        })
    }

    pub fn at(dir: impl Into<PathBuf>) -> TuningCache {
        TuningCache { dir: dir.into() }
    }

    /// The file of one key: hex SHA-256 over the GPU name, driver, the spec (everything but its
    /// declared shape, which a tuned shape does not depend on) and the shape.
    fn path(&self, gpu: &GpuInfo, spec: &KernelSpec, shape: Shape) -> PathBuf {
        let mut unshaped = spec.clone();
        unshaped.shape = deepgemm::spec::ShapeSpec::fixed(Shape::new(0, 0, 0));
        let spec_json = serde_json::to_vec(&unshaped).expect("a spec serializes");
        let shape = shape.to_string();
        let digest = hex_digest(&[
            FORMAT.as_bytes(),
            gpu.name.as_bytes(),
            &gpu.driver_version.to_le_bytes(),
            &spec_json,
            shape.as_bytes(),
        ]);
        self.dir.join(format!("{digest}.json"))
    }

    pub fn load(&self, gpu: &GpuInfo, spec: &KernelSpec, shape: Shape) -> Option<TunedPlan> {
        let bytes = std::fs::read(self.path(gpu, spec, shape)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn store(
        &self,
        gpu: &GpuInfo,
        spec: &KernelSpec,
        tuned: &TunedPlan,
    ) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(gpu, spec, tuned.shape);
        let json = serde_json::to_vec_pretty(tuned).expect("a tuned plan serializes");
        write_atomic(&path, &json)?;
        Ok(path)
    }
}

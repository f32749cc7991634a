//! The legal plan space of each backend: every plan its generator can render (and, for sm90,
//! what the model can predict ahead of a generator). Shared-memory layouts come from
//! [`codegen::space::smem_layout`], so the search, the model and the kernel agree on every byte.

use crate::codegen::space::smem_layout;
use crate::dtype::DType;
use crate::plan::*;
use crate::spec::KernelSpec;

/// Hopper pipelines deeper than this gain nothing the model can see; bounds the sm90 space.
const SM90_MAX_STAGES: u32 = 8;

/// Every legal plan of `backend` for `spec` on `spec.hardware`, in a fixed order. Empty when the
/// backend cannot run the spec's dtypes on this hardware.
pub fn enumerate(spec: &KernelSpec, backend: Backend) -> Vec<Plan> {
    if !backend_runs(spec, backend) {
        return Vec::new();
    }
    match backend {
        Backend::Sm80 => sm80(spec),
        Backend::Simt => simt(spec),
        Backend::Sm90 => sm90(spec),
    }
}

/// Whether the hardware has the backend's instructions for the spec's input dtype.
pub fn backend_runs(spec: &KernelSpec, backend: Backend) -> bool {
    backend_refusal(spec, backend).is_none()
}

/// Whether the target has the instructions `backend` is built on at all (an A100 has no wgmma):
/// reports leave out a backend the target lacks, which is no choice the user has there.
pub fn target_has(hw: &crate::hw::Hardware, backend: Backend) -> bool {
    match backend {
        Backend::Sm90 => hw.features.wgmma && hw.features.tma,
        Backend::Sm80 => hw.compute_capability() >= 80 && hw.features.cp_async,
        Backend::Simt => true,
    }
}

/// Why `backend` has no plan space for the spec on its hardware (`None`: it has one). The
/// reason names what is missing, for the reports that say why a slower backend runs a spec.
pub fn backend_refusal(spec: &KernelSpec, backend: Backend) -> Option<String> {
    let hw = &spec.hardware;
    let (a, b) = (spec.a().dtype, spec.b().dtype);
    let math = crate::model::schedule::math_dtype(a, backend);
    // wgmma multiplies e4m3 by e5m2 (the fp8 gradient GEMMs); other tensor-core products take
    // one input dtype.
    let fp8 = |d: DType| matches!(d, DType::E4m3 | DType::E5m2);
    let mixed_fp8 = backend == Backend::Sm90 && fp8(a) && fp8(b);
    if a != b && backend != Backend::Simt && !mixed_fp8 {
        return Some(format!(
            "A is {a} and B is {b}; tensor-core plans take one input dtype (sm90 also takes \
             e4m3 x e5m2)"
        ));
    }
    match backend {
        // The tensor cores' f32 sums truncate (see `codegen::sm80::check`): f32 inputs are
        // computed on the CUDA cores, `tf32` ones on the tensor cores.
        Backend::Sm80 | Backend::Sm90 if a == DType::F32 => {
            return Some(
                "f32 inputs are computed on CUDA cores (simt) to keep f32 accuracy; declare them \
                 `tf32` for tensor cores at tf32 precision"
                    .to_string(),
            );
        }
        Backend::Sm80 if !matches!(a, DType::F16 | DType::Bf16 | DType::Tf32) => {
            return Some(format!(
                "its mma.sync generator takes f16, bf16 and tf32 inputs, not {a}"
            ));
        }
        Backend::Sm80 if !target_has(hw, backend) => {
            return Some(format!(
                "{} ({}) lacks cp.async and bf16 mma",
                hw.name, hw.arch
            ));
        }
        Backend::Sm90 if !target_has(hw, backend) => {
            return Some(format!("{} ({}) lacks TMA and wgmma", hw.name, hw.arch));
        }
        _ => {}
    }
    if hw.mma_rate(math, backend).is_none() {
        return Some(format!(
            "{} lists no {math} rate for {backend} in its hardware model",
            hw.name
        ));
    }
    None
}

fn base_plan(spec: &KernelSpec, backend: Backend, tile: Tile, warps: WarpLayout) -> Plan {
    // SIMT copies element by element; the tensor-core paths copy 16 bytes at a time.
    let (a_copy_bytes, b_copy_bytes) = match backend {
        Backend::Simt => (spec.a().dtype.size_bytes(), spec.b().dtype.size_bytes()),
        Backend::Sm80 | Backend::Sm90 => (16, 16),
    };
    Plan {
        backend,
        tile,
        warps,
        stages: 1,
        cluster_m: 1,
        cluster_n: 1,
        raster: Raster { group_m: 1 },
        split_k: 1,
        persistent: backend == Backend::Sm90,
        smem: smem_layout(spec, backend, tile, &warps),
        epilogue: if backend == Backend::Sm90 {
            crate::codegen::sm90::epilogue_strategy(spec)
        } else {
            EpilogueStrategy::Direct
        },
        operands: OperandPath {
            a_copy_bytes,
            b_copy_bytes,
            repack_misaligned: backend != Backend::Simt,
        },
    }
}

/// Adds one plan per stage count in `stages` that fits the block's shared memory, and per
/// rasterization group.
fn push_variants(
    out: &mut Vec<Plan>,
    base: Plan,
    stages: impl Iterator<Item = u32>,
    smem_limit: u32,
) {
    for s in stages {
        if base.smem.total_bytes(s) > smem_limit {
            break;
        }
        for group_m in [1, 8] {
            let mut plan = base.clone();
            plan.stages = s;
            plan.raster.group_m = group_m;
            out.push(plan);
        }
    }
}

fn sm80(spec: &KernelSpec) -> Vec<Plan> {
    let hw = &spec.hardware;
    let tile_ks: &[u32] = match spec.a().dtype {
        DType::F16 | DType::Bf16 => &[32, 64],
        _ => &[16, 32],
    };
    const SIZES: [u32; 4] = [32, 64, 128, 256];
    const WARPS: [(u32, u32); 6] = [(1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (4, 2)];
    let mut out = Vec::new();
    for tm in SIZES {
        for tn in SIZES {
            for &tk in tile_ks {
                for (wm, wn) in WARPS {
                    let (warp_m, warp_n) = (tm / wm, tn / wn);
                    let threads = 32 * wm * wn;
                    let legal = warp_m % 16 == 0
                        && warp_n % 16 == 0
                        && warp_m <= 128
                        && warp_n <= 128
                        && tm * tn / threads <= 128;
                    if !legal {
                        continue;
                    }
                    let warps = WarpLayout {
                        warps_m: wm,
                        warps_n: wn,
                        producer_warpgroups: 0,
                        threads,
                    };
                    let base = base_plan(
                        spec,
                        Backend::Sm80,
                        Tile {
                            m: tm,
                            n: tn,
                            k: tk,
                        },
                        warps,
                    );
                    push_variants(&mut out, base, 2..=6, hw.smem_per_block_bytes);
                }
            }
        }
    }
    out
}

fn simt(spec: &KernelSpec) -> Vec<Plan> {
    let hw = &spec.hardware;
    const SIZES: [u32; 4] = [16, 32, 64, 128];
    let warps = WarpLayout {
        warps_m: 2,
        warps_n: 4,
        producer_warpgroups: 0,
        threads: 256,
    };
    let mut out = Vec::new();
    for tm in SIZES {
        for tn in SIZES {
            for tk in [8, 16, 32] {
                let base = base_plan(
                    spec,
                    Backend::Simt,
                    Tile {
                        m: tm,
                        n: tn,
                        k: tk,
                    },
                    warps,
                );
                push_variants(&mut out, base, 1..=2, hw.smem_per_block_bytes);
            }
        }
    }
    out
}

fn sm90(spec: &KernelSpec) -> Vec<Plan> {
    let hw = &spec.hardware;
    // One 128-byte swizzle row of K per stage.
    let tk = 128 / spec.a().dtype.size_bytes();
    let mut out = Vec::new();
    // (consumers, consumers splitting a tile): one, two cooperating, or two in ping-pong.
    const SCHEDULES: [(u32, u32); 3] = [(1, 1), (2, 2), (2, 1)];
    for tm in [64, 128, 256] {
        for tn in (8..=256).step_by(8) {
            for (consumers, splitting) in SCHEDULES {
                let per_consumer = tm / splitting;
                if per_consumer < 64 || per_consumer % 64 != 0 {
                    continue;
                }
                let warps = WarpLayout {
                    warps_m: splitting,
                    warps_n: 1,
                    producer_warpgroups: 1,
                    threads: 128 * (1 + consumers),
                };
                for (cluster_m, cluster_n) in [(1, 1), (2, 1)] {
                    if cluster_m * cluster_n > 1 && !hw.features.clusters {
                        continue;
                    }
                    let mut base = base_plan(
                        spec,
                        Backend::Sm90,
                        Tile {
                            m: tm,
                            n: tn,
                            k: tk,
                        },
                        warps,
                    );
                    base.cluster_m = cluster_m;
                    base.cluster_n = cluster_n;
                    push_variants(&mut out, base, 2..=SM90_MAX_STAGES, hw.smem_per_block_bytes);
                }
            }
        }
    }
    out
}

//! Which path a spec's math takes and why, in words: what `check`, `explain` and `compile` tell
//! the user so that no slow path or precision choice is silent. The facts come from the same
//! rules the search applies ([`backend::refusal`], [`codegen::check_supported`]).

use crate::backend::{self, generated_backends};
use crate::codegen;
use crate::dtype::DType;
use crate::plan::Backend;
use crate::spec::KernelSpec;
use serde::{Deserialize, Serialize};

/// Whether one backend can take a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendStatus {
    pub backend: Backend,
    /// Whether DeepGEMM generates kernels for it (the others are predicted only).
    pub generated: bool,
    /// Why it has no plan for the spec; `None` when it has plans.
    pub refusal: Option<String>,
}

/// Every backend's standing for `spec`, in [`Backend::ALL`] order.
pub fn backend_statuses(spec: &KernelSpec) -> Vec<BackendStatus> {
    let generated_backends = generated_backends();
    Backend::ALL
        .into_iter()
        .map(|backend| {
            let generated = generated_backends.contains(&backend);
            let refusal = backend::refusal(spec, backend).or_else(|| {
                if !generated {
                    return None;
                }
                // The generator's own reason when it renders none of the plan space.
                let mut first = None;
                for plan in backend::proposals(spec, backend) {
                    match codegen::check_supported(spec, &plan) {
                        Ok(()) => return None,
                        Err(e) => {
                            first.get_or_insert_with(|| e.to_string());
                        }
                    }
                }
                first.or_else(|| Some("no plan fits the hardware".to_string()))
            });
            BackendStatus {
                backend,
                generated,
                refusal,
            }
        })
        .collect()
}

/// The notes a user must see before trusting a spec's speed or precision: how f32/tf32 inputs
/// are computed, and that the CUDA-core fallback is the only generated path (with why each
/// faster backend cannot take the spec). Empty when neither applies.
pub fn notes(spec: &KernelSpec) -> Vec<String> {
    let statuses = backend_statuses(spec);
    let mut notes = Vec::new();
    let input = spec.a().dtype;
    if input == DType::F32 {
        notes.push(
            "f32 inputs are computed to f32 accuracy on CUDA cores (simt, FFMA); declare them \
             `tf32` for tensor-core speed at tf32 precision (10 mantissa bits, about 1e-3 \
             relative error)"
                .to_string(),
        );
    } else if input == DType::Tf32 {
        notes.push(
            "tf32 inputs are multiplied at tf32 precision (10 mantissa bits, about 1e-3 relative \
             error), one tensor-core product each, as declared; declare them `f32` for f32 \
             accuracy on CUDA cores (simt, FFMA)"
                .to_string(),
        );
    }
    let generated_takers: Vec<Backend> = statuses
        .iter()
        .filter(|s| s.generated && s.refusal.is_none())
        .map(|s| s.backend)
        .collect();
    let only_cuda_cores = !generated_takers.is_empty()
        && generated_takers.iter().all(|b| !b.uses_tensor_cores(input));
    if only_cuda_cores {
        let why: Vec<String> = statuses
            .iter()
            .filter(|s| {
                s.backend.uses_tensor_cores(input)
                    && backend::of(s.backend).target_has(&spec.hardware)
            })
            .map(|s| match (&s.refusal, s.generated) {
                (Some(reason), _) => format!("{} cannot: {reason}", s.backend),
                (None, false) => format!(
                    "{} would take it (the hardware has its instructions for {input}) but has no \
                     generator yet",
                    s.backend
                ),
                (None, true) => format!("{} has plans", s.backend),
            })
            .collect();
        let mut note = "slow path: every plan runs on the CUDA-core fallback (simt, FFMA), not \
                        on tensor cores"
            .to_string();
        for reason in why {
            note += "; ";
            note += &reason;
        }
        notes.push(note);
    }
    // Hopper's own path refused while an older tensor-core backend runs the spec (tf32 that
    // is not K-major): the user would expect wgmma on this target, so say why not.
    let tensor_core_takers: Vec<&str> = generated_takers
        .iter()
        .filter(|b| b.uses_tensor_cores(input))
        .map(|b| b.name())
        .collect();
    if let Some(sm90) = statuses.iter().find(|s| s.backend == Backend::Sm90) {
        if let (Some(reason), false) = (&sm90.refusal, tensor_core_takers.is_empty()) {
            if backend::of(Backend::Sm90).target_has(&spec.hardware) {
                notes.push(format!(
                    "sm90 (TMA + wgmma) cannot take it: {reason}; {} runs it instead",
                    tensor_core_takers.join(" or ")
                ));
            }
        }
    }
    for status in statuses
        .iter()
        .filter(|s| s.generated && s.refusal.is_none())
    {
        for role in backend::transposed_roles(spec, status.backend) {
            let Some(operand) = spec.by_role(&role) else {
                continue;
            };
            let (major, declared, want) = match role {
                crate::spec::Role::A => ("M", "col", "row"),
                _ => ("N", "row", "col"),
            };
            notes.push(format!(
                "`{}` is {major}-major (`{declared}`): {}'s kernel reads {} K-major only, so the \
                 launcher transposes it into a K-major workspace before each launch (one more \
                 read and write of it; declare it `{want}` to skip that)",
                operand.name, status.backend, operand.dtype
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;
    use std::path::Path;

    fn kernel(input: &str, target: &str) -> KernelSpec {
        let src = format!(
            "kernel k {{ target {target}; input A: {input}[M, K] row; input B: {input}[K, N] col;
               output D: f32[M, N] row; shape {{ M = 256; N = 256; K = 256; }} }}"
        );
        parse(&src)
    }

    fn parse(src: &str) -> KernelSpec {
        spec::parse_str(src, "k.dgml", Path::new("."))
            .unwrap()
            .kernels
            .remove(0)
    }

    #[test]
    fn fp8_names_the_fallback_and_why_each_faster_backend_cannot() {
        // K-major fp8 runs on wgmma: no slow path to report.
        let fast = notes(&kernel("e4m3", "h200"));
        assert!(!fast.iter().any(|n| n.starts_with("slow path")), "{fast:?}");
        // An M-major A (fp8 wgmma reads K-major operands only) is transposed by the launcher:
        // still wgmma, and the note says what it costs.
        let src = "kernel k { target h200; input A: e4m3[M, K] col; input B: e4m3[K, N] row;
               output D: f32[M, N] row; shape { M = 256; N = 256; K = 256; } }";
        let spec = parse(src);
        let notes = notes(&spec);
        assert!(
            !notes.iter().any(|n| n.starts_with("slow path")),
            "{notes:?}"
        );
        for (name, major, want) in [("A", "M", "row"), ("B", "N", "col")] {
            let note = notes
                .iter()
                .find(|n| n.starts_with(&format!("`{name}` is {major}-major")))
                .unwrap_or_else(|| panic!("{notes:?}"));
            assert!(
                note.contains("sm90's kernel reads e4m3 K-major only"),
                "{note}"
            );
            assert!(note.contains(&format!("declare it `{want}`")), "{note}");
        }
        // On Ada (no wgmma) sm90 is no choice at all: the note does not bring it up.
        let ada = super::notes(&kernel("e4m3", "l40s"));
        let slow = ada.iter().find(|n| n.starts_with("slow path")).unwrap();
        assert!(slow.contains("sm80 cannot"), "{slow}");
        assert!(!slow.contains("sm90"), "{slow}");
    }

    #[test]
    fn f32_says_cuda_cores_and_tf32_says_tf32() {
        let f32 = notes(&kernel("f32", "h200"));
        assert!(
            f32[0].contains("computed to f32 accuracy on CUDA cores (simt, FFMA)"),
            "{f32:?}"
        );
        // No tensor-core backend has f32 plans, and the note says why.
        let statuses = backend_statuses(&kernel("f32", "h200"));
        for backend in [Backend::Sm80, Backend::Sm90] {
            let s = statuses.iter().find(|s| s.backend == backend).unwrap();
            let why = s.refusal.as_deref().unwrap_or_default();
            assert!(
                why.contains("f32 inputs are computed on CUDA cores"),
                "{backend}: {why}"
            );
        }
        let slow = f32.iter().find(|n| n.starts_with("slow path")).unwrap();
        assert!(slow.contains("sm80 cannot: f32 inputs"), "{slow}");
        let tf32 = notes(&kernel("tf32", "h200"));
        assert!(tf32[0].contains("tf32 precision"), "{tf32:?}");
        assert!(!tf32.iter().any(|n| n.starts_with("slow path")), "{tf32:?}");
        assert!(notes(&kernel("bf16", "h200")).is_empty());
    }

    #[test]
    fn tf32_runs_on_wgmma_when_k_major_and_says_why_not_otherwise() {
        // A row, B col: sm90 has plans, and nothing is said about it.
        let nt = kernel("tf32", "h200");
        let sm90 = backend_statuses(&nt)
            .into_iter()
            .find(|s| s.backend == Backend::Sm90)
            .unwrap();
        assert_eq!(sm90.refusal, None);
        assert!(!notes(&nt).iter().any(|n| n.contains("sm90")));
        // B row-major: wgmma cannot read it, sm80 runs it, and the note says both.
        let src = "kernel k { target h200; input A: tf32[M, K] row; input B: tf32[K, N] row;
               output D: f32[M, N] row; shape { M = 256; N = 256; K = 256; } }";
        let nn = parse(src);
        let notes = notes(&nn);
        let note = notes
            .iter()
            .find(|n| n.starts_with("sm90 (TMA + wgmma) cannot take it"))
            .unwrap_or_else(|| panic!("{notes:?}"));
        assert!(note.contains("tf32 operands K-major only"), "{note}");
        assert!(note.contains("`B` is not `col`"), "{note}");
        assert!(note.ends_with("sm80 runs it instead"), "{note}");
        // On an A100 there is no wgmma to miss.
        let a100 = src.replace("h200", "a100");
        let a100 = parse(&a100);
        assert!(!super::notes(&a100).iter().any(|n| n.contains("sm90")));
    }
}

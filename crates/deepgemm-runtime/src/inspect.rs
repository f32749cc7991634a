//! `deepgemm inspect FILE.dgb`: what a bundle holds, for a person (text) or a program (JSON).

use crate::bundle::BundleFile;
use deepgemm::spec::{Layout, Role};
use std::fmt::Write;

/// The bundle as text: format, architecture, and per kernel its operands, params, declared
/// range, variants and dispatch axes.
pub fn render(file: &BundleFile, name: &str) -> String {
    let h = &file.header;
    let mut out = String::new();
    let _ = writeln!(out, "{name}: DeepGEMM bundle, format {}", h.format_version);
    let _ = writeln!(
        out,
        "  built by deepgemm {} with NVRTC {}.{} for {} (target {})",
        h.deepgemm_version, h.nvrtc_version.0, h.nvrtc_version.1, h.arch, h.target
    );
    let _ = writeln!(
        out,
        "  {} kernel(s), {} bytes of binaries (repack copy kernel: {} bytes)",
        h.kernels.len(),
        file.blobs.len(),
        h.pitch_copy.len
    );
    for kernel in &h.kernels {
        let spec = &kernel.spec;
        let _ = writeln!(
            out,
            "\nkernel {} (spec sha256 {})",
            kernel.name,
            &kernel.spec_hash[..16]
        );
        for o in &spec.operands {
            // As declared: a layout for matrices, and what a scale or an amax belongs to.
            let layout = match (o.dims.len(), o.layout) {
                (2, Layout::Row) => " row",
                (2, Layout::Col) => " col",
                _ => "",
            };
            let of = match &o.role {
                Role::Scale { of, .. } => format!(" scale_of {of}"),
                Role::Amax { of, .. } => format!(" amax_of {of}"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "  {:<6} {:<7} {}{}{layout}{of}",
                format!("{:?}", o.direction).to_lowercase(),
                o.name,
                o.dtype,
                deepgemm::spec::dims(&o.dims)
            );
        }
        for p in &spec.params {
            let default = p.default.map(|d| format!(" = {d}")).unwrap_or_default();
            let _ = writeln!(out, "  param  {}{default}", p.name);
        }
        let _ = writeln!(out, "  epilogue: {}", spec.epilogue.expr);
        let _ = writeln!(out, "  shapes: {}", deepgemm::spec::shape_text(&spec.shape));
        if spec.shape.fallback == deepgemm::spec::ShapeFallback::Nearest {
            let _ = writeln!(
                out,
                "  other shapes: the nearest bucket's variant (`fallback nearest;`)"
            );
        }
        let _ = writeln!(
            out,
            "  dispatch: {} M x {} N x {} K range(s) -> {} variant(s)",
            kernel.dispatch.m.len(),
            kernel.dispatch.n.len(),
            kernel.dispatch.k.len(),
            kernel.variants.len()
        );
        let _ = writeln!(
            out,
            "  {:<16} {:<34} {:<30} {:>7} {:>9} {:>5} {:>8} {:>8}",
            "variant", "bucket (M, N, K)", "plan", "threads", "smem", "regs", "cluster", "cubin"
        );
        for v in &kernel.variants {
            let b = &v.bucket;
            let range = |r: (u64, u64)| {
                if r.0 == r.1 {
                    r.0.to_string()
                } else {
                    format!("{}..={}", r.0, r.1)
                }
            };
            let regs = if v.resources.reported {
                v.resources.registers.to_string()
            } else {
                "?".into()
            };
            let _ = writeln!(
                out,
                "  {:<16} {:<34} {:<30} {:>7} {:>9} {:>5} {:>8} {:>8}",
                v.name,
                format!("{}, {}, {}", range(b.m), range(b.n), range(b.k)),
                v.kernel.plan.label(),
                v.kernel.threads,
                v.kernel.smem_bytes,
                regs,
                v.kernel.grid.cluster.max(1),
                v.cubin.len
            );
        }
    }
    out
}

/// The header as JSON, without the kernels' CUDA sources (which `deepgemm compile` writes
/// beside the bundle); `--json` prints it.
pub fn json(file: &BundleFile) -> serde_json::Value {
    let mut value = serde_json::to_value(&file.header).expect("bundle headers serialize");
    if let Some(kernels) = value.get_mut("kernels").and_then(|k| k.as_array_mut()) {
        for kernel in kernels {
            if let Some(variants) = kernel.get_mut("variants").and_then(|v| v.as_array_mut()) {
                for variant in variants {
                    if let Some(k) = variant.get_mut("kernel").and_then(|k| k.as_object_mut()) {
                        k.remove("source");
                    }
                }
            }
        }
    }
    value
}

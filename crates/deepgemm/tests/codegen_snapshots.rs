//! Snapshots of what the generator writes into one kernel per backend and schedule: the header
//! comment and the `{{NAME}}` values it fills into the template (tile constants, instruction
//! wrappers, the parameter list, the epilogue and scale code). A change to any of them shows up
//! as a reviewable diff (`cargo insta review`).
//!
//! The templates' fixed text and the prelude are left out of the snapshots: the NVRTC tests
//! (`deepgemm-cuda/tests/codegen_compiles.rs`) compile them, and
//! `the_source_is_the_parts_filled_into_the_template` checks that the parts are all the
//! generator adds to them.

mod codegen_specs;

use codegen_specs::{gemv_plan, simt_plan, sm80_plan, sm90_plan, spec, tiny_plan, SpecShape};
use deepgemm::codegen::{generate, generated_parts, GeneratedParts};
use deepgemm::dtype::DType;
use deepgemm::plan::Plan;
use deepgemm::spec::{KernelSpec, Layout};

/// Builds the spec and plan of one snapshot case.
type CaseBuilder = fn() -> (KernelSpec, Plan);

/// One (spec, plan) per backend and per schedule or staging mode its generator has, by
/// snapshot name.
const CASES: [(&str, CaseBuilder); 13] = [
    // sm80: 16-bit operands in XOR-swizzled shared memory, a fused bias + GELU.
    ("sm80_bf16_bias_gelu", || {
        let spec = spec(&SpecShape {
            bias_gelu: true,
            ..SpecShape::default()
        });
        let plan = sm80_plan(&spec, (128, 256, 32), 3, (2, 4));
        (spec, plan)
    }),
    // sm80 on tf32: the m16n8k8 mma and padded (not swizzled) shared memory.
    ("sm80_tf32_padded_f32_d", || {
        let spec = spec(&SpecShape {
            input: DType::Tf32,
            output: DType::F32,
            ..SpecShape::default()
        });
        let plan = sm80_plan(&spec, (128, 128, 16), 3, (2, 2));
        (spec, plan)
    }),
    // simt: fp8 inputs dequantized by 1x128 / 128x128 block scales, a column-major C.
    ("simt_e4m3_block_scaled", || {
        let spec = spec(&SpecShape {
            input: DType::E4m3,
            block_scales: true,
            c_layout: Some(Layout::Col),
            ..SpecShape::default()
        });
        let plan = simt_plan(&spec, (128, 128, 8), 2);
        (spec, plan)
    }),
    // simt's integer accumulation: i8 inputs summed in i32.
    ("simt_i8_i32_accumulate", || {
        let spec = spec(&SpecShape {
            input: DType::I8,
            accumulate: DType::I32,
            output: DType::F32,
            ..SpecShape::default()
        });
        let plan = simt_plan(&spec, (128, 128, 8), 2);
        (spec, plan)
    }),
    // gemv streaming A (16 rows per block) against 8 columns of B, a fused bias + GELU.
    ("gemv_bf16_a_streamed_bias_gelu", || {
        let spec = spec(&SpecShape {
            bias_gelu: true,
            ..SpecShape::default()
        });
        let plan = gemv_plan(&spec, (16, 8, 512), 6);
        (spec, plan)
    }),
    // gemv streaming B against one row of A (decode), f16 in, f32 D.
    ("gemv_f16_b_streamed_f32_d", || {
        let spec = spec(&SpecShape {
            input: DType::F16,
            output: DType::F32,
            ..SpecShape::default()
        });
        let plan = gemv_plan(&spec, (1, 16, 512), 4);
        (spec, plan)
    }),
    // tiny: 4x4 outputs per warp, four warp-wide steps of K per loop turn, a column-major A and
    // a per-row amax of an fp8 D.
    ("tiny_bf16_col_a_e4m3_d_amax_per_row", || {
        let spec = spec(&SpecShape {
            a_layout: Layout::Col,
            output: DType::E4m3,
            amax_per_row: Some(true),
            ..SpecShape::default()
        });
        let plan = tiny_plan(&spec, (4, 16, 128));
        (spec, plan)
    }),
    // simt storing an fp8 D with the amax of the whole tensor.
    ("simt_bf16_e5m2_d_amax_per_tensor", || {
        let spec = spec(&SpecShape {
            output: DType::E5m2,
            amax_per_row: Some(false),
            ..SpecShape::default()
        });
        let plan = simt_plan(&spec, (64, 64, 16), 2);
        (spec, plan)
    }),
    // sm90 cooperative: two consumers split 128x256 tiles, a 2x1 cluster multicasts B, row-major
    // D goes through the staged epilogue, with a fused bias + GELU.
    ("sm90_bf16_cooperative_cluster_bias_gelu", || {
        let spec = spec(&SpecShape {
            bias_gelu: true,
            ..SpecShape::default()
        });
        let plan = sm90_plan(&spec, (128, 256), 4, 2, false, 2);
        (spec, plan)
    }),
    // sm90 ping-pong on MN-major operands (A column-major, B row-major: the descriptors'
    // transpose) with column-major f32 D stored from the registers.
    ("sm90_f16_pingpong_mn_major_col_d", || {
        let spec = spec(&SpecShape {
            input: DType::F16,
            output: DType::F32,
            a_layout: Layout::Col,
            b_layout: Layout::Row,
            d_layout: Layout::Col,
            ..SpecShape::default()
        });
        let plan = sm90_plan(&spec, (128, 128), 5, 2, true, 1);
        (spec, plan)
    }),
    // sm90 on tf32: m64nNk8 wgmmas from stages the TMA rounds from f32 (TFLOAT32 tensor maps),
    // two cooperating consumers, f32 D through the staged epilogue.
    ("sm90_tf32_cooperative_f32_d", || {
        let spec = spec(&SpecShape {
            input: DType::Tf32,
            output: DType::F32,
            ..SpecShape::default()
        });
        let plan = sm90_plan(&spec, (128, 256), 4, 2, false, 2);
        (spec, plan)
    }),
    // sm90 fp8: e4m3 with DeepSeek's 1x128 / 128x128 block scales, two cooperating consumers
    // promoting each k-tile's wgmma sums into f32 (two-level accumulation), a 2x1 cluster.
    ("sm90_e4m3_block_scaled_cooperative", || {
        let spec = spec(&SpecShape {
            input: DType::E4m3,
            block_scales: true,
            ..SpecShape::default()
        });
        let plan = sm90_plan(&spec, (128, 128), 5, 2, false, 2);
        (spec, plan)
    }),
    // sm90 storing an fp8 D: ping-pong on unscaled e4m3 inputs, the staged epilogue writing
    // e4m3 rows and an amax per row.
    ("sm90_e4m3_pingpong_e4m3_d_amax_per_row", || {
        let spec = spec(&SpecShape {
            input: DType::E4m3,
            output: DType::E4m3,
            amax_per_row: Some(true),
            ..SpecShape::default()
        });
        let plan = sm90_plan(&spec, (64, 128), 8, 2, true, 2);
        (spec, plan)
    }),
];

/// The parts as the snapshot shows them: the template's name, the header, then one
/// `NAME = value` per placeholder in the generator's order; a value of several lines is an
/// indented block below its name (without the blank lines that open or close it: the exact text
/// is checked by `the_source_is_the_parts_filled_into_the_template`).
fn snapshot_text(parts: &GeneratedParts) -> String {
    let mut text = format!("template: {}\n\n{}\n\n", parts.template_name, parts.header);
    for (name, value) in &parts.values {
        let value = value.trim_matches('\n');
        if value.contains('\n') {
            // A blank line on either side of the block, one between two blocks.
            if !text.ends_with("\n\n") {
                text += "\n";
            }
            text += &format!("{name} =\n");
            for line in value.lines() {
                // No indent on blank lines: the snapshot keeps no trailing whitespace.
                if !line.trim().is_empty() {
                    text += "    ";
                    text += line;
                }
                text += "\n";
            }
            text += "\n";
        } else {
            text += &format!("{name} = {value}\n");
        }
    }
    text
}

#[test]
fn generated_parts_per_schedule() {
    for (name, case) in CASES {
        let (spec, plan) = case();
        let parts = generated_parts(&spec, &plan, "v0").expect("a supported plan");
        insta::assert_snapshot!(name, snapshot_text(&parts));
    }
}

/// The kernel's source is the header, the prelude and the template with each placeholder
/// replaced by its value, read here from the files themselves: what the snapshots hold is all
/// the generator adds.
#[test]
fn the_source_is_the_parts_filled_into_the_template() {
    let kernels = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels");
    let read = |file: &str| {
        std::fs::read_to_string(format!("{kernels}/{file}"))
            .unwrap_or_else(|e| panic!("{kernels}/{file}: {e}"))
    };
    let prelude = read("prelude.cuh");
    for (name, case) in CASES {
        let (spec, plan) = case();
        let parts = generated_parts(&spec, &plan, "v0").expect("a supported plan");
        let mut body = read(parts.template_name);
        // Not every template takes every shared value (sm80's has no `{{SCALES}}`).
        for (placeholder, value) in &parts.values {
            body = body.replace(&format!("{{{{{placeholder}}}}}"), value);
        }
        let expected = format!("{}\n{prelude}\n{body}", parts.header);
        let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
        assert!(kernel.source == expected, "{name}: the source differs");
    }
}

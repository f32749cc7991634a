//! Snapshots of one generated kernel per backend: any change to the generated code shows up as a
//! reviewable diff (`cargo insta review`).

mod codegen_specs;

use codegen_specs::{simt_plan, sm80_plan, sm90_plan, spec, SpecShape};
use deepgemm::codegen::generate;
use deepgemm::dtype::DType;
use deepgemm::spec::Layout;

#[test]
fn sm80_bf16_bias_gelu() {
    let spec = spec(&SpecShape {
        bias_gelu: true,
        ..SpecShape::default()
    });
    let plan = sm80_plan(&spec, (128, 256, 32), 3, (2, 4));
    let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
    insta::assert_snapshot!(kernel.source);
}

#[test]
fn simt_e4m3_block_scaled() {
    let spec = spec(&SpecShape {
        input: DType::E4m3,
        block_scales: true,
        c_layout: Some(Layout::Col),
        ..SpecShape::default()
    });
    let plan = simt_plan(&spec, (128, 128, 8), 2);
    let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
    insta::assert_snapshot!(kernel.source);
}

/// The sm90 cooperative kernel: two consumers split 128x256 tiles, a 2x1 cluster multicasts B,
/// row-major D goes through the staged epilogue, with a fused bias + GELU.
#[test]
fn sm90_bf16_cooperative_cluster_bias_gelu() {
    let spec = spec(&SpecShape {
        bias_gelu: true,
        ..SpecShape::default()
    });
    let plan = sm90_plan(&spec, (128, 256), 4, 2, false, 2);
    let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
    insta::assert_snapshot!(kernel.source);
}

/// The sm90 ping-pong kernel on MN-major operands (A column-major, B row-major: the descriptors'
/// transpose) with column-major f32 D stored from the registers.
#[test]
fn sm90_f16_pingpong_mn_major_col_d() {
    let spec = spec(&SpecShape {
        input: DType::F16,
        output: DType::F32,
        a_layout: Layout::Col,
        b_layout: Layout::Row,
        d_layout: Layout::Col,
        ..SpecShape::default()
    });
    let plan = sm90_plan(&spec, (128, 128), 5, 2, true, 1);
    let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
    insta::assert_snapshot!(kernel.source);
}

/// The sm90 fp8 kernel: e4m3 with DeepSeek's 1x128 / 128x128 block scales, two cooperating
/// consumers promoting each k-tile's wgmma sums into f32 (two-level accumulation), a 2x1 cluster.
#[test]
fn sm90_e4m3_block_scaled_cooperative() {
    let spec = spec(&SpecShape {
        input: DType::E4m3,
        block_scales: true,
        ..SpecShape::default()
    });
    let plan = sm90_plan(&spec, (128, 128), 6, 2, false, 2);
    let kernel = generate(&spec, &plan, "v0").expect("a supported plan");
    insta::assert_snapshot!(kernel.source);
}

//! Snapshots of one generated kernel per backend: any change to the generated code shows up as a
//! reviewable diff (`cargo insta review`).

mod codegen_specs;

use codegen_specs::{simt_plan, sm80_plan, spec, SpecShape};
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

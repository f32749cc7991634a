//! DeepGEMM core: everything from a `.dgml` file to CUDA C++ source, in pure Rust.
//!
//! The modules follow the pipeline: `spec` (language → [`spec::KernelSpec`]), `hw` (the hardware
//! model), `plan` (what a kernel is), `model` (plan + hardware → prediction), `search` (spec →
//! ranked plans), `codegen` (plan → CUDA C++), `report` (analysis.md / analysis.json). `backend`
//! holds everything particular to one kernel family (sm90, sm80, simt, gemv, tiny), behind one
//! dispatcher.

pub mod backend;
pub mod codec;
pub mod codegen;
pub mod dtype;
pub mod hw;
pub mod model;
pub mod plan;
pub mod reference;
pub mod report;
pub mod search;
pub mod spec;
pub mod suite;

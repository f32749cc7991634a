//! One module per `deepgemm` subcommand, in pipeline order, and what they share.

pub mod bench;
pub mod check;
pub mod compile;
pub mod explain;
pub mod inspect;
pub mod run;
pub mod setup;
pub mod targets;
pub mod tune;

mod common;
mod measure;

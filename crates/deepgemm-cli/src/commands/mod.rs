//! One module per `deepgemm` subcommand.

pub mod check;
pub mod targets;

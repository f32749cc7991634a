//! The constrained search: spec → legal plans per shape bucket, pruned and ranked.

//! The analytical performance model: (spec, plan, shape) → Prediction. See shared MODEL.md.

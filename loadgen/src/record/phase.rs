//! The phase labels the engine itself gives rows (the `phase` column): `main` for a model
//! without phases of its own, `warmup` for the first stretch a judgement leaves out (the
//! closed and open models' `warmup`; a calibration's warm-up requests carry it too, as a
//! phase of their phased model, judged with the others). Scenarios name their own phases
//! (thread-groups, phased); these are the only ones the engine writes by itself, so every
//! module that writes or reads them uses these constants.

/// The one phase of a model without phases (closed, open after its warm-up, producer-buffer).
pub const MAIN: &str = "main";
/// The warm-up stretch: recorded, and left out of judgements.
pub const WARMUP: &str = "warmup";

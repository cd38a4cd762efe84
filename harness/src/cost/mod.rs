//! `records cost`: a record's training step on a simulated machine. The work each step does is
//! counted from the record's own recipe and the trainer's own step plan (`count`, `attention`);
//! a machine's peaks (`hardware/*.toml`) and the achieved fractions of them (`achieved`, at most
//! six constants fitted on at most six named records) turn it into predicted milliseconds
//! (`predict`), which `validate` holds against every upstream log; `model` is what the other
//! commands load to print a record's predicted step. Every figure it prints is
//! **predicted**: nothing here runs on a GPU.
pub mod achieved;
pub mod attention;
pub mod count;
pub mod hardware;
pub mod model;
pub mod predict;
pub mod record;
pub mod validate;

//! Command-line tools for researchers' inputs: workloads and platforms, and
//! replaying a workload on a real cluster.

pub mod platform;
pub mod platform_gen;
pub mod quantity;
pub mod replay;
pub mod workload;
pub mod workload_check;
pub mod workload_gen;

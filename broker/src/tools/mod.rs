//! Command-line tools for researchers' inputs: workloads and platforms.

pub mod platform;
pub mod workload;

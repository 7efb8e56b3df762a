//! batkube: the broker between Batsim and Kubernetes schedulers.
//!
//! - [`batsim`]: the Batsim side: typed protocol, allocation interval sets,
//!   the ZeroMQ link.
//! - [`standin`]: a built-in Batsim stand-in (platforms, workloads, Batsim's
//!   event model and output files) for machines without Batsim, and a
//!   trivial FCFS decision process.
//! - [`tools`]: `batkube workload …` and `batkube platform …`.

pub mod batsim;
pub mod broker;
pub mod dynamics;
pub mod ending;
pub mod run;
pub mod scenario;
pub mod standin;
pub mod tools;
pub mod translate;

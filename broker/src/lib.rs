//! batkube: the broker between Batsim and Kubernetes schedulers.
//!
//! The Batsim world (protocol, link, platforms, workloads, the stand-in)
//! is the `batsim` crate, re-exported here as [`batsim`]; the Kubernetes
//! world is `fakeapi`, time is `timeshim`. This crate is the bridge where
//! they meet: [`broker`] (the simulation loop), [`run`] (`batkube run` and
//! `serve`), [`ending`], [`scenario`] and [`dynamics`]. The `batkube`
//! command also serves the crates beside it: `batkube report`
//! (`batkube-report`) and `batkube workload|platform|replay`
//! (`batkube-inputs`).

pub use ::batsim;
/// Hosts -> Nodes, jobs -> Pods: a crate of its own (`translate/`), shared
/// with the input tools' `replay`, so that a job is the same pod in a
/// simulation and on a real cluster.
pub use batkube_translate as translate;
pub mod broker;
pub mod dynamics;
pub mod ending;
pub mod run;
pub mod scenario;

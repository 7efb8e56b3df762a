//! batkube-scheduler: a Kubernetes scheduler with the semantics of the
//! upstream kube-scheduler's default profile, for what batch workloads
//! exercise, written to run under the batkube time shim.
//!
//! The core ([`scheduler::Scheduler`]: [`queue`], [`cache`], [`framework`],
//! [`affinity`], [`gang`], [`preemption`]; [`explain`] records why) never talks to an API server and never reads the clock:
//! time is passed in. [`runner`] connects it to an API server with kube-rs:
//! watches, bindings, status patches, events, preemption deletions.
//! [`metrics`] serves Prometheus text.

pub mod affinity;
pub mod cache;
pub mod config;
pub mod events;
pub mod explain;
pub mod framework;
pub mod gang;
pub mod metrics;
pub mod model;
pub mod preemption;
pub mod queue;
pub mod resources;
pub mod runner;
pub mod scheduler;
pub mod watch;

pub use config::SchedulerConfig;
pub use scheduler::{Decision, Scheduler, TieBreak};

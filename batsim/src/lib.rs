//! The Batsim world, knowing nothing of Kubernetes: a small Rust
//! "pybatsim".
//!
//! [Batsim](https://batsim.readthedocs.io) (v4.x) simulates a cluster and
//! its workload on SimGrid and asks a *decision process* what to do: it
//! sends a [`Message`] (a `now` and timestamped events: jobs submitted, jobs
//! completed, calls requested) and waits for exactly one reply (decisions:
//! execute a job on an [`IntervalSet`] of resources, reject or kill it, call
//! me later). This crate has every piece of that world:
//!
//! - [`protocol`]: the typed messages, every event of the v4 protocol, and
//!   builders for replies ([`protocol::build`]);
//! - [`intervals`]: resource allocations (`"0 2-5"`);
//! - [`link`]: the decision process's ZeroMQ REP socket, which real Batsim
//!   connects to (or an in-process pair with the stand-in);
//! - [`platform`] and [`workload`]: SimGrid platforms and Batsim workloads,
//!   read and checked by Batsim's own rules (host order, roles, profiles);
//! - [`standin`]: a Batsim engine that sends what real Batsim 4.2.1 sends,
//!   message for message, and writes its `jobs.csv`/`schedule.csv`;
//! - [`transcript`]: recorded conversations, and their replay against the
//!   stand-in.
//!
//! A decision process is anything that turns a message into a reply. This
//! one runs every job at once on resource 0 (the platform lets jobs share
//! it), against the stand-in:
//!
//! ```
//! use batsim::platform::Platform;
//! use batsim::protocol::build;
//! use batsim::standin::{Options, StandIn};
//! use batsim::workload::Workload;
//! use batsim::{EventData, IntervalSet, Message};
//!
//! let platform = Platform::parse(
//!     r#"<?xml version='1.0'?>
//!     <platform version="4.1"><zone id="z" routing="Full">
//!       <host id="master_host" speed="1Gf"/>
//!       <host id="node0" speed="1Gf" core="4"/>
//!       <link id="l" bandwidth="1GBps" latency="50us"/>
//!       <route src="node0" dst="master_host"><link_ctn id="l"/></route>
//!     </zone></platform>"#,
//!     "inline",
//! )?;
//! let workload = Workload::parse(
//!     r#"{"nb_res": 1, "jobs": [
//!           {"id": "a", "subtime": 0, "res": 1, "profile": "ten"},
//!           {"id": "b", "subtime": 5, "res": 1, "profile": "ten"}],
//!         "profiles": {"ten": {"type": "delay", "delay": 10}}}"#,
//!     "w0",
//!     "inline.json",
//! )?;
//! let opts = Options { compute_sharing: true, ..Options::default() };
//! let sim = StandIn::new(platform, vec![workload], opts)?;
//!
//! let mut completions = Vec::new();
//! let mut decide = |msg: &Message| -> anyhow::Result<Message> {
//!     let mut reply = Message::new(msg.now);
//!     for ev in &msg.events {
//!         match &ev.data {
//!             EventData::JobSubmitted(j) => {
//!                 reply.push(msg.now, build::execute_job(&j.job_id, IntervalSet::single(0)));
//!             }
//!             EventData::JobCompleted(c) => completions.push((c.job_id.clone(), ev.timestamp)),
//!             _ => {}
//!         }
//!     }
//!     Ok(reply)
//! };
//! let summary = sim.run(&mut decide)?;
//! // Each completion reaches the server over the route: 50 us of latency
//! // plus one byte at 1 GB/s.
//! assert_eq!(completions.len(), 2);
//! assert!((completions[0].1 - 10.000051).abs() < 1e-6);
//! assert_eq!(summary.stats.nb_jobs, 2);
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! Over ZeroMQ, [`link::BatsimLink`] is the decision process's side of the
//! socket and [`standin::ZmqDecisionProcess`] the stand-in's.

pub mod compare;
pub mod intervals;
pub mod link;
pub mod platform;
pub mod protocol;
pub mod rng;
pub mod standin;
pub mod transcript;
pub mod workload;

pub use intervals::IntervalSet;
pub use protocol::{Event, EventData, Message};

use std::io;

/// Serializes a message the way real Batsim prints it: floating-point
/// numbers with six decimals (`5.000100`), integers as integers.
pub fn to_batsim_text(msg: &Message) -> String {
    struct SixDecimals;
    impl serde_json::ser::Formatter for SixDecimals {
        fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
            write!(w, "{v:.6}")
        }
        fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
            write!(w, "{v:.6}")
        }
    }
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SixDecimals);
    serde::Serialize::serialize(msg, &mut ser).expect("protocol messages always serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Rounds a time to the microsecond, as Batsim's `%f` printing does.
pub fn round6(t: f64) -> f64 {
    (t * 1e6).round() / 1e6
}

/// An error and its causes, each once: `{:#}` joins every cause of the
/// chain, and an error whose message already includes its source (a
/// library's `"cannot read {path}: {source}"`) would print the cause twice
/// ("No such file or directory (os error 2): No such file or directory
/// (os error 2)"). A cause whose text is already said is left out.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.is_empty() {
            text = c;
        } else if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Read {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_once() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(Read {
            path: "w.json".into(),
            source: io,
        })
        .context("loading the inputs");
        assert_eq!(
            error_text(&e),
            "loading the inputs: cannot read w.json: No such file or directory (os error 2)"
        );
        let plain = anyhow::Error::new(std::io::Error::from_raw_os_error(98)).context("binding");
        assert_eq!(
            error_text(&plain),
            "binding: Address already in use (os error 98)"
        );
    }
}

//! The stand-in is real Batsim: given the recorded replies of the decision
//! process, it sends every message of every shared conversation of real
//! Batsim v4.2.1 (`reference/batsim/`), same `now`, same events in the same
//! order, timestamps to 1e-6.

mod common;

use std::path::Path;

use batsim::platform::Platform;
use batsim::standin::{Options, StandIn};
use batsim::transcript;
use batsim::workload::Workload;
use common::shared;

fn replay(conversation: &Path, platform: &Path, workload: &Path, opts: Options) {
    let lines = transcript::read(conversation).unwrap();
    let platform = Platform::from_file(platform).unwrap();
    let workload = Workload::from_file(workload, "w0").unwrap();
    let sim = StandIn::new(platform, vec![workload], opts).unwrap();
    match transcript::replay(sim, &lines) {
        Ok(n) => assert!(n > 0),
        Err(diff) => panic!("{}: {diff}", conversation.display()),
    }
}

fn under_broker(name: &str, platform: &str, workload: &str) {
    let dir = shared().join("reference/batsim/under-broker");
    // As `batkube run` starts Batsim: --enable-compute-sharing.
    let opts = Options {
        compute_sharing: true,
        ..Options::default()
    };
    replay(
        &dir.join(name),
        &dir.join("inputs").join(platform),
        &dir.join("inputs").join(workload),
        opts,
    );
}

#[test]
fn burst_16_node() {
    under_broker("burst-16-node.jsonl", "16-node.xml", "200_delay170.json");
}

#[test]
fn spaced_16_node() {
    under_broker(
        "spaced-16-node.jsonl",
        "16-node.xml",
        "spaced_200_delay170.json",
    );
}

#[test]
fn kit_1_node_6_cpu() {
    under_broker(
        "kit-1-node-6-cpu.jsonl",
        "1-node-6-cpu.xml",
        "KIT_10h_80.json",
    );
}

#[test]
fn poisson500_heterogeneous() {
    under_broker(
        "poisson500-heterogeneous.jsonl",
        "heterogeneous.xml",
        "poisson_500.json",
    );
}

fn sample(name: &str, opts: Options) {
    let dir = shared().join("reference/batsim");
    replay(
        &dir.join("transcripts").join(name),
        &dir.join("sample/platform.xml"),
        &dir.join("sample/workload_transcript.json"),
        opts,
    );
}

#[test]
fn transcript_default() {
    sample("default.jsonl", Options::default());
}

/// A `parallel_homogeneous` job ends at 13.0, the instant a submission is
/// due: real Batsim handles the submission, the submitter's goodbye and a
/// whole exchange with the decision process at 13.0 before the job's end
/// (a parallel task ends when its work runs out, after the sleeps and
/// messages of its instant: see the stand-in's module doc).
#[test]
fn transcript_sharing_dynamic() {
    sample(
        "sharing-dynamic.jsonl",
        Options {
            compute_sharing: true,
            forward_profiles: true,
            dynamic_jobs: true,
            acknowledge_dynamic_jobs: true,
            sched_config: r#"{"policy":"demo"}"#.into(),
            mmax: 3,
            ..Options::default()
        },
    );
}

//! The shared transcripts of real Batsim v4.2.1 are the ground truth:
//! every message in them parses and re-serializes to an equivalent value,
//! every reply in them can be produced with the typed builders, and the
//! stand-in, given the same inputs and decisions, sends the same messages.

mod common;

use std::path::Path;

use batsim::platform::Platform;
use batsim::protocol::{build, json_equivalent, EventData, Message};
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;
use common::{equivalent_within, shared, transcript};
use serde_json::Value;

const TRANSCRIPTS: [&str; 2] = ["default.jsonl", "sharing-dynamic.jsonl"];

#[test]
fn every_message_parses_and_reserializes_equivalently() {
    for name in TRANSCRIPTS {
        for (i, line) in transcript(name).iter().enumerate() {
            let msg = Message::from_json(&line.raw)
                .unwrap_or_else(|e| panic!("{name} #{i}: {e}\n{}", line.raw));
            let again: Value = serde_json::from_str(&msg.to_json()).unwrap();
            let orig: Value = serde_json::from_str(&line.raw).unwrap();
            assert!(
                json_equivalent(&orig, &again),
                "{name} #{i} changed on the round trip:\n{orig}\n{again}"
            );
            // Batsim's own text form too.
            let six: Value = serde_json::from_str(&batsim::to_batsim_text(&msg)).unwrap();
            assert!(json_equivalent(&orig, &six), "{name} #{i} (six decimals)");
            assert!(!msg
                .events
                .iter()
                .any(|e| matches!(e.data, EventData::Unknown { .. })));
        }
    }
}

/// Rebuilds a reply event with the typed builders only.
fn rebuild(ev: &EventData) -> EventData {
    match ev {
        EventData::ExecuteJob(e) => match &e.mapping {
            None => build::execute_job(&e.job_id, e.alloc.clone()),
            Some(m) => build::execute_job_mapped(&e.job_id, e.alloc.clone(), m.clone()),
        },
        EventData::CallMeLater(c) => build::call_me_later(c.timestamp),
        EventData::KillJob(k) => build::kill_jobs(k.job_ids.iter().cloned()),
        EventData::RejectJob(r) => build::reject_job(&r.job_id),
        EventData::Notify(n) => build::notify(&n.kind),
        EventData::RegisterProfile(p) => {
            build::register_profile(&p.workload_name, &p.profile_name, p.profile.clone())
        }
        EventData::RegisterJob(r) => build::register_job(&r.job_id, r.job.clone()),
        other => panic!("unexpected reply event {}", other.kind()),
    }
}

#[test]
fn every_reply_is_produced_by_the_typed_builders() {
    let mut kinds = std::collections::BTreeSet::new();
    for name in TRANSCRIPTS {
        for (i, line) in transcript(name).iter().enumerate() {
            if line.from_batsim {
                continue;
            }
            let parsed = Message::from_json(&line.raw).unwrap();
            let mut built = Message::new(parsed.now);
            for ev in &parsed.events {
                kinds.insert(ev.data.kind().to_string());
                built.push(ev.timestamp, rebuild(&ev.data));
            }
            let orig: Value = serde_json::from_str(&line.raw).unwrap();
            let ours: Value = serde_json::from_str(&built.to_json()).unwrap();
            assert!(
                json_equivalent(&orig, &ours),
                "{name} #{i}:\n{orig}\n{ours}"
            );
        }
    }
    for k in [
        "EXECUTE_JOB",
        "CALL_ME_LATER",
        "KILL_JOB",
        "REJECT_JOB",
        "NOTIFY",
        "REGISTER_JOB",
        "REGISTER_PROFILE",
    ] {
        assert!(kinds.contains(k), "{k} not exercised");
    }
}

fn replay(name: &str, opts: Options, platform_mmax: u32) {
    let dir = shared().join("reference/batsim/sample");
    let platform = Platform::from_file(&dir.join("platform.xml")).unwrap();
    let workload = Workload::from_file(&dir.join("workload_transcript.json"), "w0").unwrap();
    let lines = transcript(name);
    let mut opts = opts;
    opts.mmax = platform_mmax;
    let out = tempfile::tempdir().unwrap();
    opts.export_prefix = Some(out.path().join("run_"));
    let sim = StandIn::new(platform, vec![workload], opts).unwrap();
    let mut k = 0usize;
    let mut dp = |msg: &Message| -> anyhow::Result<Message> {
        let expected = &lines[k];
        assert!(
            expected.from_batsim,
            "{name}: transcript line {k} is not from Batsim"
        );
        let mut ours: Value = serde_json::from_str(&batsim::to_batsim_text(msg)).unwrap();
        // The transcript names the workload as Batsim was given it.
        if let Some(w) = ours.pointer_mut("/events/0/data/workloads/w0") {
            let p = w.as_str().unwrap().to_string();
            *w = Value::from(Path::new(&p).file_name().unwrap().to_str().unwrap());
        }
        let theirs: Value = serde_json::from_str(&expected.raw).unwrap();
        if let Err(diff) = equivalent_within(&theirs, &ours, 1e-6) {
            panic!(
                "{name}: message #{} differs from real Batsim's: {diff}\nreal: {theirs}\nours: {ours}",
                k + 1
            );
        }
        let reply = Message::from_json(&lines[k + 1].raw).unwrap();
        k += 2;
        Ok(reply)
    };
    let summary = sim.run(&mut dp).unwrap();
    assert_eq!(k, lines.len(), "{name}: the stand-in ended early");
    assert!(out.path().join("run_jobs.csv").is_file());
    assert!(out.path().join("run_schedule.csv").is_file());
    assert!(summary.stats.nb_jobs > 0);
}

#[test]
fn standin_sends_what_real_batsim_sent_default() {
    replay("default.jsonl", Options::default(), 0);
}

#[test]
fn standin_sends_what_real_batsim_sent_sharing_dynamic() {
    let opts = Options {
        compute_sharing: true,
        forward_profiles: true,
        dynamic_jobs: true,
        acknowledge_dynamic_jobs: true,
        sched_config: r#"{"policy":"demo"}"#.into(),
        ..Options::default()
    };
    replay("sharing-dynamic.jsonl", opts, 3);
}

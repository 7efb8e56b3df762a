//! The shared transcripts of real Batsim v4.2.1 are the ground truth:
//! every message in them parses and re-serializes to an equivalent value,
//! every reply in them can be produced with the typed builders, and the
//! stand-in, given the same inputs and decisions, sends the same messages.

mod common;

use batsim::protocol::{build, json_equivalent, EventData, Message};
use common::transcript;
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

// Replaying the conversations against the stand-in: tests/conversations.rs.

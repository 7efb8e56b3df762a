//! Property tests: the parser and the stand-in never panic, whatever they
//! are fed (malformed JSON, truncated messages, huge numbers, hostile
//! decisions), and the stand-in's invariants hold on random workloads.

mod common;

use batsim::platform::Platform;
use batsim::protocol::{build, EventData, Message};
use batsim::standin::fcfs::Fcfs;
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;
use batsim::IntervalSet;
use proptest::prelude::*;
use serde_json::json;

fn transcript_lines() -> Vec<String> {
    let mut v = Vec::new();
    for name in ["default.jsonl", "sharing-dynamic.jsonl"] {
        v.extend(common::transcript(name).into_iter().map(|l| l.raw));
    }
    v
}

fn sample_platform() -> Platform {
    Platform::from_file(&common::shared().join("reference/batsim/sample/platform.xml")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn parser_survives_arbitrary_text(s in ".{0,200}") {
        let _ = Message::from_json(&s);
    }

    #[test]
    fn parser_survives_truncation_and_mutation(
        which in 0usize..66, cut in 0usize..2000, pos in 0usize..2000, byte in any::<u8>()
    ) {
        let lines = transcript_lines();
        let line = &lines[which % lines.len()];
        let bytes = line.as_bytes();
        let truncated = &bytes[..cut.min(bytes.len())];
        let _ = Message::from_json(&String::from_utf8_lossy(truncated));
        let mut mutated = bytes.to_vec();
        let p = pos % mutated.len();
        mutated[p] = byte;
        let _ = Message::from_json(&String::from_utf8_lossy(&mutated));
    }

    #[test]
    fn huge_and_odd_numbers_are_errors_or_values(
        n in prop_oneof![
            Just("1e400".to_string()), Just("-1e400".to_string()), Just("1e308".to_string()),
            Just("18446744073709551616".to_string()), Just("-0".to_string()),
            Just("\"NaN\"".to_string()), Just("\"inf\"".to_string()),
            any::<f64>().prop_map(|x| format!("{x:e}")),
            any::<i64>().prop_map(|x| x.to_string()),
        ]
    ) {
        let text = format!(
            r#"{{"now":{n},"events":[{{"timestamp":{n},"type":"JOB_COMPLETED","data":{{"job_id":"w!1","job_state":"COMPLETED_KILLED","return_code":{n},"alloc":"0"}}}},{{"timestamp":{n},"type":"CALL_ME_LATER","data":{{"timestamp":{n}}}}}]}}"#
        );
        if let Ok(m) = Message::from_json(&text) {
            prop_assert!(m.now.is_finite());
            let _ = m.check_reply_order(0.0);
        }
        let workload = format!(
            r#"{{"jobs":[{{"id":"a","subtime":{n},"walltime":{n},"res":{n},"profile":"p"}}],"profiles":{{"p":{{"type":"delay","delay":{n}}}}}}}"#
        );
        let _ = Workload::parse(&workload, "w0", "prop");
    }

    #[test]
    fn platform_parser_survives_truncation(cut in 0usize..2300) {
        let text = std::fs::read_to_string(
            common::shared().join("reference/batsim/sample/platform.xml")).unwrap();
        let _ = Platform::parse(&text[..cut.min(text.len())], "cut");
    }

    /// Random workloads under FCFS with random decision times: the run ends,
    /// every job is accounted for, no machine ever runs two jobs (the
    /// stand-in refuses that without compute sharing), and a job's wait is
    /// never negative.
    #[test]
    fn random_workloads_complete(
        jobs in proptest::collection::vec((0u32..50, 1u32..4, 1u32..40, proptest::option::of(1u32..40)), 1..40),
        decision_ms in 0u32..20,
    ) {
        let mut profiles = serde_json::Map::new();
        let list: Vec<_> = jobs.iter().enumerate().map(|(i, (sub, res, delay, wall))| {
            profiles.insert(format!("d{delay}"), json!({"type":"delay","delay": delay}));
            let mut j = json!({"id": i.to_string(), "subtime": sub, "res": res, "profile": format!("d{delay}")});
            if let Some(w) = wall { j["walltime"] = json!(w); }
            j
        }).collect();
        let text = json!({"nb_res": 4, "jobs": list, "profiles": profiles}).to_string();
        let w = Workload::parse(&text, "w0", "prop").unwrap();
        let sim = StandIn::new(sample_platform(), vec![w], Options::default()).unwrap();
        let mut fcfs = Fcfs::new(f64::from(decision_ms) / 1000.0);
        let summary = sim.run(&mut fcfs).unwrap();
        prop_assert_eq!(summary.stats.nb_jobs as usize, jobs.len());
        prop_assert!(summary.stats.max_waiting_time >= 0.0);
    }

    /// A hostile decision process (random decisions about random jobs) gets
    /// errors, never a panic.
    #[test]
    fn hostile_decisions_never_panic(
        script in proptest::collection::vec((0u8..8, 0u32..10, 0u32..6, -5i32..50), 1..30)
    ) {
        let dir = common::shared().join("reference/batsim/sample");
        let w = Workload::from_file(&dir.join("workload_transcript.json"), "w0").unwrap();
        let opts = Options { compute_sharing: script.len() % 2 == 0, dynamic_jobs: true, ..Options::default() };
        let sim = StandIn::new(sample_platform(), vec![w], opts).unwrap();
        let ids = ["w0!1", "w0!2", "w0!long", "w0!4", "w0!5", "w0!6", "w0!7", "w0!nope", "dyn!x", "w0!1"];
        let mut step = 0usize;
        let mut dp = |m: &Message| -> anyhow::Result<Message> {
            if step >= script.len() * 3 {
                anyhow::bail!("script exhausted");
            }
            let (kind, a, b, t) = script[step % script.len()];
            step += 1;
            let mut r = Message::new(m.now + f64::from(t.max(0)) / 10.0);
            let id = ids[(a as usize) % ids.len()];
            let ts = m.now + f64::from(t) / 20.0;
            let ev = match kind {
                0 => build::execute_job(id, IntervalSet::range(b.min(5), (b + a % 3).min(7))),
                1 => build::kill_jobs([id]),
                2 => build::reject_job(id),
                3 => build::call_me_later(m.now + f64::from(t)),
                4 => build::register_job(id, json!({"profile": "delay1", "res": b})),
                5 => build::register_profile("dyn", "delay1", json!({"type": "delay", "delay": t})),
                6 => build::notify("registration_finished"),
                _ => EventData::Unknown { kind: "NONSENSE".into(), data: json!({}) },
            };
            r.push(ts.min(r.now), ev);
            Ok(r)
        };
        let _ = sim.run(&mut dp);
    }
}

//! The inputs the project ships are valid: every platform in `platforms/`
//! and every workload in `workloads/` passes the platform and workload
//! checks of `batkube platform validate` / `batkube workload validate` and
//! is accepted by the built-in stand-in; a short stand-in run completes.

use std::path::{Path, PathBuf};

use batkube_inputs::workload_check;
use batsim::platform::Platform;
use batsim::standin::fcfs::Fcfs;
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn every_shipped_platform_is_valid_for_batsim_and_the_standin() {
    let platforms = files("platforms", "xml");
    assert!(platforms.len() >= 5, "{platforms:?}");
    for p in &platforms {
        let (n, master, warnings) = batkube_inputs::platform::validate_file(p, None)
            .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        assert!(n >= 1 && master == "master", "{}", p.display());
        assert!(warnings.is_empty(), "{}: {warnings:?}", p.display());
        let m = Platform::from_file(p).unwrap().machines(None).unwrap();
        for h in &m.compute {
            assert!(
                h.property("cpu").is_some() && h.property("memory").is_some(),
                "{}",
                h.name
            );
        }
    }
}

#[test]
fn every_shipped_workload_is_valid_for_batsim_and_the_standin() {
    let workloads = files("workloads", "json");
    assert!(workloads.len() >= 4, "{workloads:?}");
    for w in &workloads {
        let text = std::fs::read_to_string(w).unwrap();
        let shown = w.display().to_string();
        let findings =
            workload_check::check(&text, &shown).unwrap_or_else(|e| panic!("{shown}: {e:?}"));
        assert!(findings.iter().all(|f| !f.error), "{shown}: {findings:?}");
        let wl = Workload::from_file(w, "w0").unwrap();
        if !shown.ends_with("-parallel.json") {
            assert!(
                wl.jobs.iter().all(|j| j.res == 1),
                "{shown}: every job is one pod"
            );
        }
    }
    let nasa =
        Workload::from_file(&repo().join("workloads/NASA-iPSC-1993-3.1.json"), "w0").unwrap();
    assert_eq!(nasa.jobs.len(), 18239);
}

#[test]
fn the_parallel_nasa_workload_fits_the_128_node_platform() {
    let path = repo().join("workloads/NASA-iPSC-1993-3.1-parallel.json");
    let folded =
        Workload::from_file(&repo().join("workloads/NASA-iPSC-1993-3.1.json"), "w0").unwrap();
    let parallel = Workload::from_file(&path, "w0").unwrap();
    assert_eq!(parallel.jobs.len(), 18239);
    // The same jobs; res is the job's processors (one per iPSC/860 node),
    // which the folded file kept as cpu = procs / 128 x 16.
    for (p, f) in parallel.jobs.iter().zip(&folded.jobs) {
        assert_eq!((&p.id, p.subtime), (&f.id, f.subtime));
        let cpu = batkube_inputs::quantity::cpu_from_value(
            &folded.profile(&f.profile).unwrap().json()["cpu"],
        )
        .unwrap();
        assert_eq!(f64::from(p.res), cpu / 16.0 * 128.0, "job {}", p.id);
        let pod = &parallel.profile(&p.profile).unwrap().json()["cpu"];
        assert_eq!(
            pod,
            &serde_json::json!(16),
            "job {}: a whole node per pod",
            p.id
        );
    }
    assert_eq!(parallel.jobs.iter().map(|j| j.res).max(), Some(128));
    let text = std::fs::read_to_string(&path).unwrap();
    let platform = repo().join("platforms/128-node.xml");
    let machines = Platform::from_file(&platform)
        .unwrap()
        .machines(None)
        .unwrap()
        .compute
        .len();
    assert_eq!(machines, 128);
    let size = workload_check::PlatformSize {
        machines,
        name: "128-node.xml".into(),
    };
    let c = workload_check::check_on(&text, "parallel", Some(&size)).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let half = workload_check::PlatformSize {
        machines: 64,
        name: "64".into(),
    };
    let c = workload_check::check_on(&text, "parallel", Some(&half)).unwrap();
    assert!(!c.warnings.is_empty(), "128-node jobs exceed 64 machines");
}

#[test]
fn burst_on_the_16_node_platform_runs_to_completion_on_the_standin() {
    let dir = tempfile::tempdir().unwrap();
    let platform = Platform::from_file(&repo().join("platforms/16-node.xml")).unwrap();
    let workload = Workload::from_file(&repo().join("workloads/200_delay170.json"), "w0").unwrap();
    let opts = Options {
        export_prefix: Some(dir.path().join("out_")),
        ..Default::default()
    };
    let summary = StandIn::new(platform, vec![workload], opts)
        .unwrap()
        .run(&mut Fcfs::new(0.0))
        .unwrap();
    let s = &summary.stats;
    assert_eq!(s.nb_jobs_success, 200);
    // 13 waves of 170 s on 16 machines; each wave starts when the server
    // has received the previous one's 16 completion reports, one after the
    // other, 0.0002 s each (2 x 1e-4 latency + one byte at 1.25e8 B/s).
    assert!((s.makespan - 2210.038403).abs() < 1e-6, "{}", s.makespan);
    assert!((s.mean_waiting_time() - 979.2).abs() < 0.05);
    let jobs = std::fs::read_to_string(dir.path().join("out_jobs.csv")).unwrap();
    assert_eq!(jobs.lines().count(), 201);
}

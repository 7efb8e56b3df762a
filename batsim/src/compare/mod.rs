//! The differential harness: real Batsim and the stand-in on the same
//! inputs, driven by the same decisions, compared message by message.
//!
//! How: a scripted decision process ([`cases::Scheduler`]: FCFS, or
//! random with a seed) answers real Batsim over ZeroMQ while every message
//! is recorded ([`record_real`]); the recording is then replayed against
//! the stand-in ([`crate::transcript::replay`]), which answers the n-th
//! message with the n-th recorded reply and names the first message that
//! differs. Since the scripted schedulers decide from the messages alone,
//! the replay gives the stand-in the decisions the scheduler would have
//! made, up to the first difference. Recordings are data: they replay
//! without Batsim (see `batsim/tests/differential.rs`).
//!
//! [`cases`] generates inputs from a seed; [`compare_case`] runs one case
//! end to end and leaves its files (inputs, `real.jsonl`, Batsim's logs)
//! in a directory.

pub mod cases;
pub mod random;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::platform::Platform;
use crate::protocol::{EventData, Message};
use crate::standin::{DecisionProcess, Options, StandIn};
use crate::transcript::{self, Difference, Direction, Line, Recorder};
use crate::workload::Workload;

/// Batsim's options a comparison uses (those both engines take).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub compute_sharing: bool,
    /// `-m`
    pub master: Option<String>,
}

impl RunOptions {
    /// The stand-in's options for the same run (no output files).
    pub fn standin(&self) -> Options {
        Options {
            compute_sharing: self.compute_sharing,
            master: self.master.clone(),
            ..Options::default()
        }
    }

    /// Real Batsim's command-line options.
    pub fn batsim_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.compute_sharing {
            v.push("--enable-compute-sharing".into());
        }
        if let Some(m) = &self.master {
            v.push("-m".into());
            v.push(m.clone());
        }
        v
    }
}

/// What real Batsim did under a scripted scheduler.
#[derive(Debug)]
pub struct RealRun {
    /// The conversation, both directions, in order.
    pub lines: Vec<Line>,
    /// Whether it ended with SIMULATION_ENDS answered and exit status 0.
    pub completed: bool,
    /// Its exit status, and the end of its stderr when it failed.
    pub exit: String,
    pub wall_seconds: f64,
}

/// Runs real Batsim (`batsim`: its binary) on `platform` and `workload`
/// with `opts`, answering it with `dp`; the conversation is recorded to
/// `dir/real.jsonl` and Batsim's outputs go under `dir/out_`. Gives up
/// after `timeout`.
pub fn record_real(
    batsim: &Path,
    platform: &Path,
    workload: &Path,
    opts: &RunOptions,
    dp: &mut dyn DecisionProcess,
    dir: &Path,
    timeout: Duration,
) -> anyhow::Result<RealRun> {
    let started = Instant::now();
    let ctx = zmq::Context::new();
    let socket = ctx.socket(zmq::REP)?;
    socket.set_linger(0)?;
    socket.bind("tcp://127.0.0.1:*")?;
    let endpoint = socket
        .get_last_endpoint()?
        .map_err(|_| anyhow::anyhow!("the socket's endpoint is not UTF-8"))?;
    let record_path = dir.join("real.jsonl");
    let mut recorder = Recorder::create(&record_path)?;
    let mut cmd = Command::new(batsim);
    cmd.arg("-p")
        .arg(platform)
        .arg("-w")
        .arg(workload)
        .arg("-e")
        .arg(dir.join("out"))
        .arg("-s")
        .arg(&endpoint)
        .args(opts.batsim_args())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("batsim.log"))?)
        .stderr(std::fs::File::create(dir.join("batsim.err.log"))?);
    let child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", batsim.display()))?;
    let mut child = KillOnDrop(child);
    let mut ended = false;
    let deadline = started + timeout;
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        // Batsim may die at any time: look at it between short polls.
        if socket.poll(zmq::POLLIN, 50)? == 0 {
            continue;
        }
        let bytes = socket.recv_bytes(0)?;
        let raw = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("Batsim sent bytes that are not UTF-8"))?;
        recorder.record(Direction::FromBatsim, &raw)?;
        let msg = Message::from_json(&raw)
            .map_err(|e| anyhow::anyhow!("Batsim sent a message we cannot read ({e}): {raw}"))?;
        if msg
            .events
            .iter()
            .any(|e| matches!(e.data, EventData::SimulationEnds))
        {
            ended = true;
        }
        let reply = crate::to_batsim_text(&dp.exchange(&msg)?);
        recorder.record(Direction::FromScheduler, &reply)?;
        socket.send(reply.as_bytes(), 0)?;
        if ended {
            // Batsim writes its outputs, then exits.
            let status = loop {
                if let Some(s) = child.0.try_wait()? {
                    break Some(s);
                }
                if Instant::now() > deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            break status;
        }
    };
    recorder.flush()?;
    drop(recorder);
    let completed = ended && status.is_some_and(|s| s.success());
    let exit = match status {
        None => format!("still running after {} s: killed", timeout.as_secs()),
        Some(s) if completed => s.to_string(),
        Some(s) => {
            let err = std::fs::read_to_string(dir.join("batsim.err.log")).unwrap_or_default();
            let tail: Vec<&str> = err.lines().rev().take(4).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("{s}: {}", tail.join(" | "))
        }
    };
    Ok(RealRun {
        lines: transcript::read(&record_path)?,
        completed,
        exit,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Replays a recorded conversation against the stand-in on the same
/// inputs: the number of messages that matched, or the first difference.
// The error of `transcript::replay`, passed on as it is.
#[allow(clippy::result_large_err)]
pub fn replay_files(
    platform: &Path,
    workload: &Path,
    opts: &RunOptions,
    lines: &[Line],
) -> Result<usize, Difference> {
    let setup = || -> anyhow::Result<StandIn> {
        let p = Platform::from_file(platform)?;
        let w = Workload::from_file(workload, "w0")?;
        StandIn::new(p, vec![w], opts.standin())
    };
    match setup() {
        Ok(sim) => transcript::replay(sim, lines),
        Err(e) => Err(Difference {
            message: 0,
            seq: None,
            what: format!("the stand-in refused the inputs: {e:#}"),
            recorded: None,
            ours: None,
        }),
    }
}

/// How one comparison ended.
#[derive(Debug)]
pub enum Outcome {
    /// Every message identical.
    Identical { messages: usize },
    /// The first message that differs.
    Differs(Box<Difference>),
    /// Real Batsim did not complete the simulation (the stand-in's replay
    /// of what it did send is in `replay`).
    BatsimFailed {
        exit: String,
        replay: Result<usize, Box<Difference>>,
    },
}

impl Outcome {
    pub fn is_identical(&self) -> bool {
        matches!(self, Outcome::Identical { .. })
    }

    /// One line: `identical (N messages)`, or where it differs.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Identical { messages } => format!("identical ({messages} messages)"),
            Outcome::Differs(d) => format!("DIFFERS: {}", d.to_string().replace('\n', "\n    ")),
            Outcome::BatsimFailed { exit, replay } => format!(
                "BATSIM FAILED ({exit}); stand-in: {}",
                match replay {
                    Ok(n) => format!("{n} messages identical"),
                    Err(d) => d.to_string().replace('\n', "\n    "),
                }
            ),
        }
    }
}

/// The files of one comparison.
#[derive(Debug, Clone)]
pub struct CaseFiles {
    pub dir: PathBuf,
    pub platform: PathBuf,
    pub workload: PathBuf,
}

/// Writes a generated case's inputs (`platform.xml`, `workload.json`,
/// `case.json` with its options) into `dir`.
pub fn write_case(case: &cases::Case, dir: &Path) -> std::io::Result<CaseFiles> {
    std::fs::create_dir_all(dir)?;
    let platform = dir.join("platform.xml");
    let workload = dir.join("workload.json");
    std::fs::write(&platform, &case.platform)?;
    std::fs::write(&workload, &case.workload)?;
    let meta = serde_json::json!({
        "seed": case.seed,
        "topology": case.topology.as_str(),
        "scheduler": case.scheduler.name(),
        "compute_sharing": case.compute_sharing,
        "master": case.master,
        "notes": case.notes,
    });
    std::fs::write(
        dir.join("case.json"),
        serde_json::to_string_pretty(&meta)? + "\n",
    )?;
    Ok(CaseFiles {
        dir: dir.to_path_buf(),
        platform,
        workload,
    })
}

/// Reads `case.json`'s options back (for replays of a case directory).
pub fn read_case_options(dir: &Path) -> anyhow::Result<RunOptions> {
    let path = dir.join("case.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", path.display()))?;
    Ok(RunOptions {
        compute_sharing: v["compute_sharing"].as_bool().unwrap_or(false),
        master: v["master"].as_str().map(str::to_string),
    })
}

/// Runs real Batsim on the inputs under `scheduler`, records the
/// conversation in `files.dir`, and replays it against the stand-in.
pub fn compare_case(
    batsim: &Path,
    files: &CaseFiles,
    opts: &RunOptions,
    scheduler: cases::Scheduler,
    timeout: Duration,
) -> anyhow::Result<(Outcome, RealRun)> {
    let mut dp = scheduler.make();
    let real = record_real(
        batsim,
        &files.platform,
        &files.workload,
        opts,
        dp.as_mut(),
        &files.dir,
        timeout,
    )?;
    let replay = replay_files(&files.platform, &files.workload, opts, &real.lines);
    let outcome = if !real.completed {
        Outcome::BatsimFailed {
            exit: real.exit.clone(),
            replay: replay.map_err(Box::new),
        }
    } else {
        match replay {
            Ok(messages) => Outcome::Identical { messages },
            Err(d) => Outcome::Differs(Box::new(d)),
        }
    };
    Ok((outcome, real))
}

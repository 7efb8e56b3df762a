//! Helpers shared by the integration tests: where cargo put the artifacts,
//! and reading a child's stdout line by line without a reader thread (so a
//! line the child wrote before parking is always seen before we move time).

#![allow(dead_code)]

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};
use timeshim::{Controller, Quiescence, SimTime};

/// Safety net for anything we wait on; never reached when things work.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// target/<profile> of the running test binary.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

pub fn example(name: &str) -> PathBuf {
    let p = profile_dir().join("examples").join(name);
    assert!(
        p.is_file(),
        "{} not built: run `cargo test -p timeshim --release` (which builds the examples)",
        p.display()
    );
    p
}

/// `libtimeshim.so`: cargo writes the fresh one to `deps/` when it builds the
/// library for the tests (it copies it up to `target/<profile>/` only for
/// `cargo build`, so that copy may be stale or absent).
pub fn cdylib() -> PathBuf {
    let p = profile_dir().join("deps").join("libtimeshim.so");
    assert!(p.is_file(), "{} not built", p.display());
    p
}

pub struct Lines {
    out: ChildStdout,
    buf: Vec<u8>,
    pub seen: Vec<String>,
}

impl Lines {
    pub fn new(out: ChildStdout) -> Self {
        // SAFETY: plain fcntl on a descriptor we own.
        unsafe {
            let fd = out.as_raw_fd();
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Lines {
            out,
            buf: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Reads whatever the child wrote so far; returns the next complete line.
    pub fn try_line(&mut self) -> Option<String> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.out.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("reading child stdout: {e}"),
            }
        }
        let nl = self.buf.iter().position(|&b| b == b'\n')?;
        let line: Vec<u8> = self.buf.drain(..=nl).collect();
        let line = String::from_utf8_lossy(&line[..nl]).into_owned();
        self.seen.push(line.clone());
        Some(line)
    }

    /// Waits for the next line without touching the clock.
    pub fn next_line(&mut self) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.try_line() {
                return l;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "no line from the child; saw {:?}",
                self.seen
            );
            let mut pfd = libc::pollfd {
                fd: self.out.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 1000) };
        }
    }
}

/// Moves simulated time to the child's earliest deadline each time it is
/// quiescent, until it prints a line; returns the line and the jumps made.
pub fn drive_to_line(
    clock: &Controller,
    lines: &mut Lines,
    child: &mut Child,
) -> (String, Vec<SimTime>) {
    let mut jumps = Vec::new();
    loop {
        if let Some(l) = lines.try_line() {
            return (l, jumps);
        }
        match clock.wait_quiescent(PATIENCE).expect("probe") {
            Quiescence::Quiescent {
                earliest_deadline, ..
            } => {
                if let Some(l) = lines.try_line() {
                    return (l, jumps);
                }
                let t = earliest_deadline
                    .unwrap_or_else(|| panic!("child idle with no deadline; saw {:?}", lines.seen));
                clock.advance_to(t).expect("forward");
                jumps.push(t);
            }
            Quiescence::Exited => {
                // It may have printed its last words before leaving.
                let _ = child.wait();
                if let Some(l) = lines.try_line() {
                    return (l, jumps);
                }
                panic!("child exited: {:?}; saw {:?}", child.try_wait(), lines.seen)
            }
            Quiescence::TimedOut { last } => {
                panic!("child never went quiescent: {last:?}; saw {:?}", lines.seen)
            }
        }
    }
}

/// `key=value` field of a line.
pub fn field<T: std::str::FromStr>(line: &str, key: &str) -> T {
    let prefix = format!("{key}=");
    let v = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("bad {key} in {line:?}"))
}

/// Per-thread name, state and current syscall of a process, for failure messages.
pub fn dump_threads(pid: u32) -> String {
    let mut out = String::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in dir.flatten() {
            let p = e.path();
            let read = |f: &str| {
                std::fs::read_to_string(p.join(f))
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            };
            let stat = read("stat");
            let state = stat
                .rfind(')')
                .map(|i| stat[i + 1..].trim().chars().next().unwrap_or('?'))
                .unwrap_or('?');
            out.push_str(&format!(
                "\n  {} {} {} wchan={} syscall={}",
                e.file_name().to_string_lossy(),
                read("comm"),
                state,
                read("wchan"),
                read("syscall")
            ));
        }
    }
    out
}

/// Builds a Go program of `timeshim/tests/go` (static, `CGO_ENABLED=0`)
/// into the target directory with the machine's Go toolchain. Go is a
/// requirement of the test suite: without it this fails, never skips.
pub fn go_build(package: &str) -> PathBuf {
    go_build_as(package, package, &[])
}

/// [`go_build`] stripped of its symbol table and debug information
/// (`-ldflags=-s -w`, as the schedulers are built), into `<package>-stripped`.
#[allow(dead_code)]
pub fn go_build_stripped(package: &str) -> PathBuf {
    go_build_as(package, &format!("{package}-stripped"), &["-ldflags=-s -w"])
}

/// [`go_build_stripped`] with another Go release (`GOTOOLCHAIN`, fetched
/// from the module proxy into the module cache), into
/// `<package>-<toolchain>`.
#[allow(dead_code)]
pub fn go_build_with_toolchain(package: &str, toolchain: &str) -> PathBuf {
    go_build_env(
        package,
        &format!("{package}-{toolchain}"),
        &["-ldflags=-s -w"],
        &[("GOTOOLCHAIN", toolchain)],
    )
}

fn go_build_as(package: &str, name: &str, flags: &[&str]) -> PathBuf {
    go_build_env(package, name, flags, &[])
}

fn go_build_env(package: &str, name: &str, flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let out = profile_dir().join("go").join(name);
    let mut cmd = std::process::Command::new("go");
    cmd.current_dir(&src)
        .args(["build", "-trimpath"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(format!("./{package}"))
        .env("CGO_ENABLED", "0")
        .envs(env.iter().copied());
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOCACHE").is_none() {
        cmd.env("GOCACHE", profile_dir().join("go-cache"));
    }
    let o = cmd.output().unwrap_or_else(|e| {
        panic!("the tests need Go (go build of {package}): {e}; install it (Go 1.19+ on PATH)")
    });
    assert!(
        o.status.success(),
        "go build {package} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Compiles a C program of `timeshim/tests/c` as a static binary.
pub fn cc_static(source: &str) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(source);
    let dir = profile_dir().join("c");
    std::fs::create_dir_all(&dir).expect("target/<profile>/c");
    let out = dir.join(source.trim_end_matches(".c"));
    let o = std::process::Command::new("cc")
        .args(["-static", "-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("the tests need a C compiler (cc): {e}"));
    assert!(
        o.status.success(),
        "cc -static {source} failed (static glibc is in libc6-dev):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

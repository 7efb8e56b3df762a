//! The scheduling state of every thread of a process, looked at cheaply.
//!
//! Quiescence is decided by looking at every thread's state in
//! `/proc/<pid>/task/<tid>/stat`, twice per window. Opening each file each
//! time (a path walk, an open and a close per thread) cost more than the
//! reads: the directory and the files stay open here, and are read again
//! from offset 0 (procfs regenerates them on every read at offset 0).
//! Threads that appear are opened, threads that vanish are dropped.
//!
//! Listing the directory (`getdents`, which makes a dentry per thread) cost
//! as much as reading the states: it is listed again only when the count of
//! threads changed (the directory's link count, two plus the threads, from
//! one `fstat`) or a listed thread is gone. With the count unchanged and
//! every listed thread still there, the list is the process's threads: each
//! read thread was alive at the `fstat` before it (threads do not come
//! back), and as many as the count.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What one look at the threads found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scan {
    pub threads: u32,
    /// Every thread asleep (`S`) in the kernel.
    pub all_sleeping: bool,
    /// A thread is a zombie or dead: the process is ending.
    pub exited: bool,
}

/// The open `/proc/<pid>/task` directory and its threads' `stat` files.
pub(crate) struct Tasks {
    pid: u32,
    dir: OwnedFd,
    stats: HashMap<u32, OwnedFd>,
    seen: Vec<u32>,
    dirbuf: Vec<u8>,
    /// The thread the last scan found awake.
    awake: Option<u32>,
    /// The directory's link count when it was last listed.
    listed: Option<u64>,
    /// Threads' `stat` files read so far (what a look costs).
    pub reads: u64,
}

fn open(path: &CString, dirfd: Option<&OwnedFd>, flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; a non-negative result is a new fd we own.
    let fd = unsafe {
        libc::openat(
            dirfd.map_or(libc::AT_FDCWD, |d| d.as_raw_fd()),
            path.as_ptr(),
            flags | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads `fd` from offset 0 into `buf`; the bytes read.
fn pread(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into our own buffer.
    let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The state letter of a `stat` line: "tid (comm) S ..."; comm may
/// contain ')' so the last one ends it.
fn state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&c| c == b')')?;
    stat[close + 1..]
        .iter()
        .copied()
        .find(|c| !c.is_ascii_whitespace())
}

impl Tasks {
    pub fn open(pid: u32) -> io::Result<Tasks> {
        let path = CString::new(format!("/proc/{pid}/task")).expect("no NUL");
        Ok(Tasks {
            pid,
            dir: open(&path, None, libc::O_DIRECTORY)?,
            stats: HashMap::new(),
            seen: Vec::new(),
            dirbuf: vec![0u8; 16 * 1024],
            awake: None,
            listed: None,
            reads: 0,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The directory's link count: two plus the process's threads (0 once
    /// the process is gone).
    fn nlink(&self) -> io::Result<u64> {
        // SAFETY: fstat of our own descriptor into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(self.dir.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_nlink as u64)
    }

    /// The thread ids, read again from the start of the directory.
    fn list(&mut self) -> io::Result<()> {
        self.seen.clear();
        // SAFETY: rewinding our own directory descriptor.
        if unsafe { libc::lseek(self.dir.as_raw_fd(), 0, libc::SEEK_SET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            // SAFETY: getdents64 fills our buffer with whole records.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    self.dir.as_raw_fd(),
                    self.dirbuf.as_mut_ptr(),
                    self.dirbuf.len(),
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                return Ok(());
            }
            let mut at = 0usize;
            while at < n as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let rec = &self.dirbuf[at..n as usize];
                let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
                if reclen == 0 {
                    return Ok(());
                }
                let name = &rec[19..reclen];
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                if let Some(tid) = std::str::from_utf8(name).ok().and_then(|s| s.parse().ok()) {
                    self.seen.push(tid);
                }
                at += reclen;
            }
        }
    }

    /// Looks at the threads, and stops at the first that is not asleep
    /// (`all_sleeping` false; a quiescence check has failed, the rest
    /// would not change that). The thread found awake last time is looked
    /// at first: it is likely awake still. `Err(NotFound)` if the process
    /// is gone.
    pub fn scan(&mut self) -> io::Result<Scan> {
        // A listed thread found gone: listed again, and looked at again.
        for _ in 0..64 {
            if let Some(scan) = self.scan_listed()? {
                return Ok(scan);
            }
            self.listed = None;
        }
        Err(io::Error::other(format!(
            "the threads of process {} kept changing while they were looked at",
            self.pid
        )))
    }

    /// One look at the listed threads, listed again first if their count
    /// changed. `None` if a listed thread is gone (the list is stale).
    fn scan_listed(&mut self) -> io::Result<Option<Scan>> {
        let gone = |e: &io::Error| {
            e.raw_os_error() == Some(libc::ENOENT) || e.raw_os_error() == Some(libc::ESRCH)
        };
        let nlink = self.nlink()?;
        if self.listed != Some(nlink) || self.seen.is_empty() {
            match self.list() {
                Ok(()) => {}
                Err(e) if gone(&e) => return Err(io::Error::from(io::ErrorKind::NotFound)),
                Err(e) => return Err(e),
            }
            if self.seen.is_empty() {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            }
            self.stats.retain(|tid, _| self.seen.contains(tid));
            self.listed = Some(nlink);
        }
        let mut seen = std::mem::take(&mut self.seen);
        if let Some(i) = self.awake.and_then(|t| seen.iter().position(|&s| s == t)) {
            seen.swap(0, i);
        }
        let mut scan = Scan {
            threads: seen.len() as u32,
            all_sleeping: true,
            exited: false,
        };
        self.awake = None;
        let mut stale = false;
        let mut buf = [0u8; 1024];
        for &tid in &seen {
            if !self.stats.contains_key(&tid) {
                let name = CString::new(format!("{tid}/stat")).expect("no NUL");
                match open(&name, Some(&self.dir), 0) {
                    Ok(fd) => drop(self.stats.insert(tid, fd)),
                    Err(_) => {
                        stale = true; // vanished since the list
                        break;
                    }
                }
            }
            self.reads += 1;
            let n = match pread(&self.stats[&tid], &mut buf) {
                Ok(n) => n,
                Err(_) => {
                    // Gone (ESRCH): forget it; the list is stale.
                    self.stats.remove(&tid);
                    stale = true;
                    break;
                }
            };
            match state(&buf[..n]) {
                Some(b'S') => continue, // asleep
                None => {
                    stale = true; // vanished while we looked
                    break;
                }
                Some(b'Z') | Some(b'X') => scan.exited = true,
                _ => {}
            }
            scan.all_sleeping = false;
            self.awake = Some(tid);
            break;
        }
        self.seen = seen;
        Ok((!stale).then_some(scan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_threads_come_and_go() {
        let mut t = Tasks::open(std::process::id()).unwrap();
        let before = t.scan().unwrap();
        assert!(before.threads >= 1);
        // This thread runs while it looks.
        assert!(!before.all_sleeping);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || rx.recv().ok());
        let during = t.scan().unwrap();
        assert_eq!(during.threads, before.threads + 1);
        drop(tx);
        h.join().unwrap();
        // Threads of other tests may come and go too: only check ours left.
        let after = t.scan().unwrap();
        assert!(after.threads < during.threads + 8);
        assert!(!after.exited);
    }

    /// A thread that ends while another starts leaves the count as it
    /// was: the new one is still seen (running here), from the old one's
    /// `stat` found gone.
    #[test]
    fn a_thread_replaced_by_another_is_seen() {
        use std::io::{BufRead, Write};
        let script = r#"
import sys, threading
stop = threading.Event()
a = threading.Thread(target=stop.wait); a.start()
print("one", flush=True); sys.stdin.readline()
stop.set(); a.join()
def spin():
    while True: pass
threading.Thread(target=spin, daemon=True).start()
print("two", flush=True); sys.stdin.readline()
"#;
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (the CI installs it)");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let mut t = Tasks::open(child.id()).unwrap();
        let start = std::time::Instant::now();
        let one = loop {
            let s = t.scan().unwrap();
            if s.all_sleeping {
                break s;
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(one.threads, 2);
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin).unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "two");
        // The main thread reads its stdin again (asleep); the spinning
        // thread runs: never all asleep, with two threads as before.
        for _ in 0..50 {
            let s = t.scan().unwrap();
            assert_eq!(s.threads, 2);
            assert!(!s.all_sleeping, "the new thread runs");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_sleeping_child_is_seen_asleep_and_its_end() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut t = Tasks::open(child.id()).unwrap();
        let start = std::time::Instant::now();
        loop {
            let s = t.scan().unwrap();
            assert_eq!(s.threads, 1);
            if s.all_sleeping {
                break;
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child.kill().unwrap();
        // A zombie until reaped: seen exited.
        let start = std::time::Instant::now();
        loop {
            let s = t.scan().unwrap();
            if s.exited {
                break;
            }
            assert!(start.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child.wait().unwrap();
        assert_eq!(t.scan().unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn state_letter() {
        assert_eq!(state(b"12 (a) b) S 1 2"), Some(b'S'));
        assert_eq!(state(b"12 (x) R 1"), Some(b'R'));
        assert_eq!(state(b""), None);
    }
}

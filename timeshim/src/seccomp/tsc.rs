//! The time stamp counter in a deterministic run: Go's `runtime.cputicks`.
//!
//! `rdtsc` is an instruction, not a system call, so the filter never sees
//! it, and it reads the CPU's cycle counter: a different value on every
//! run. Go's runtime reads it in one place, `runtime.cputicks`, which before
//! Go 1.22 seeds each thread's random generator (`fastrand`: map iteration
//! order, `select`'s choice, `math/rand`'s global seed) and otherwise feeds
//! profiles and the tracer. At the program's exec stop, the function's body
//! (found by its code, stripped binaries included) is rewritten to return 0:
//! the generators then depend on the thread's number and on `AT_RANDOM`
//! (the seed) only. Both entries of the function (after `RDTSCP`, and the
//! `done` label that the `RDTSC` path jumps to) return 0.
//!
//! Other programs that execute `rdtsc` themselves are not covered
//! (trapping it needs `PR_SET_TSC` and a tracer on every thread).

use std::io::{self, Read, Seek, SeekFrom, Write};

/// `RDTSCP; SHLQ $32, DX; ADDQ DX, AX; MOVQ AX, ret+0(FP)`
/// (runtime/asm_amd64.s, Go 1.17 to 1.26).
const CPUTICKS: [u8; 15] = [
    0x0f, 0x01, 0xf9, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x01, 0xd0, 0x48, 0x89, 0x44, 0x24, 0x08,
];

/// The first 10 bytes rewritten: `XOR EAX,EAX; NOP; XOR EAX,EAX; XOR
/// EDX,EDX; NOP×3`. Offset 0 (the function's path through `RDTSCP`) and
/// offset 3 (`done`, where the `RDTSC` path lands) both zero RAX and RDX,
/// so the unchanged `SHL; ADD`-free tail stores 0.
const PATCH: [u8; 10] = [0x31, 0xc0, 0x90, 0x31, 0xc0, 0x31, 0xd2, 0x90, 0x90, 0x90];

/// Rewrites `runtime.cputicks` in the stopped tracee `pid`'s executable
/// mappings. Returns how many copies were found (0: not a Go program, or
/// an unknown layout).
pub(crate) fn patch_go_cputicks(pid: u32) -> io::Result<usize> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    let mut found = 0;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(3).unwrap_or("");
        if !perms.contains('x') || std::path::Path::new(path) != exe {
            continue;
        }
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else {
            continue;
        };
        let mut text = vec![0u8; (hi - lo) as usize];
        mem.seek(SeekFrom::Start(lo))?;
        mem.read_exact(&mut text)?;
        let mut i = 0;
        while let Some(at) = find(&text[i..], &CPUTICKS) {
            let addr = lo + (i + at) as u64;
            mem.seek(SeekFrom::Start(addr))?;
            mem.write_all(&PATCH)?;
            found += 1;
            i += at + CPUTICKS.len();
        }
    }
    Ok(found)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

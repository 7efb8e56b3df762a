//! Go's runtime on simulated time: the forced garbage collection, and the
//! heap's growth between collections (`GOGC`, see [`GOGC_DEFAULT`]).
//!
//! Go's runtime reads the same clock as the program (`nanotime`, through
//! the vDSO the launcher points at the clock page), so its housekeeping is
//! paced by simulated time too. One piece of it costs a run dearly and
//! changes nothing a program does: sysmon forces a full collection when
//! none ran for `runtime.forcegcperiod` (2 minutes), and, with every
//! processor idle, sleeps at most half that period. On a trace of months
//! of simulated time, every program woken after two quiet minutes starts
//! with a full collection of its heap (a scheduler holding thousands of
//! pods: tens of milliseconds), and an idle program asks for a wake-up
//! every simulated minute. On a real cluster the same period passes in
//! real time, in which the program does a hundred times more work.
//!
//! At the program's exec stop, the launcher sets `runtime.forcegcperiod`
//! (a variable "for testing purposes", runtime/proc.go) to `i64::MAX`: no
//! forced collection, and an idle sysmon sleeps until the next timer.
//! Collections then follow the heap's growth only, which the launcher
//! spaces out too (`GOGC=400` in the command's environment unless it sets
//! its own, [`gogc_wanted`]). What the program computes is unchanged: what
//! it allocates, frees and decides does not depend on when a collection
//! ran.
//!
//! Except in a deterministic run (`--deterministic`, `--seed`): there the
//! runtime's own threads are part of the schedule a seed names (the seeded
//! pick among ready threads sees the collector's workers and sysmon), so
//! without the forced collections a seed names another of the program's
//! possible outcomes (a status update that loses a race, a tie between
//! equal nodes drawn otherwise; `experiments/forced_gc_compare.py`). A
//! seed keeps naming the outcome it named before: the period (and Go's
//! default `GOGC`) is kept there unless asked. `TIMESHIM_GO_FORCED_GC=never`
//! or `=keep`, and `TIMESHIM_GO_GC=N` (a percentage, or `off`) or `=keep`,
//! in the controller's environment decide for every run.
//!
//! The variable is found in stripped binaries too: `.gopclntab` (which
//! the runtime needs, so no build strips it) names `runtime.sysmon`; of the
//! addresses its code reads RIP-relative, the one in the writable data
//! that holds 2 minutes in nanoseconds is the period (sysmon reads it for
//! its sleep and its trigger). Exactly one such address, or nothing is
//! changed.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// `runtime.forcegcperiod`'s initial value, 2 minutes (every Go release).
const FORCEGC_PERIOD_NS: u64 = 120_000_000_000;
/// What it becomes: never reached (`now - lastgc > forcegcperiod`).
const NEVER: i64 = i64::MAX;

/// What [`unforce_gc`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForcedGc {
    /// The period was found at this address and set to never.
    Disabled(u64),
    /// Not a Go program (no `.gopclntab`, no `runtime.sysmon`).
    NotGo,
    /// A Go program whose period was not found exactly once (an unknown
    /// layout): left as it is.
    NotFound,
}

/// Whether the launcher turns the forced collection off in a program it
/// starts: `TIMESHIM_GO_FORCED_GC=never` or `=keep` if set, else off
/// except in a deterministic run (see the module's documentation).
pub(crate) fn unforce_gc_wanted(deterministic: bool) -> bool {
    wanted(
        std::env::var("TIMESHIM_GO_FORCED_GC").ok().as_deref(),
        deterministic,
    )
}

fn wanted(setting: Option<&str>, deterministic: bool) -> bool {
    match setting {
        Some("never") => true,
        Some("keep") => false,
        _ => !deterministic,
    }
}

/// The heap growth the launcher gives the Go programs it starts (`GOGC`,
/// a percentage), unless told otherwise: on simulated time a program
/// computes only what its events ask for, so its collector's share of its
/// CPU is large (a quarter of vc-scheduler's on the NASA trace at Go's
/// default of 100), and a collection changes nothing it decides. At 400 a
/// collection runs once the heap has grown by four times what survived
/// the last one instead of once: vc-scheduler's CPU per job fell by about a
/// quarter on the first 1,000 jobs of the split NASA trace, its peak
/// resident memory rose from 94 to 163 MB (`experiments/README.md`, "Go's
/// runtime on simulated time").
pub(crate) const GOGC_DEFAULT: &str = "400";

/// The `GOGC` the launcher puts in the environment of the command it
/// starts, if any: none when the command or batkube's environment sets
/// `GOGC` already (theirs is kept), nor in a deterministic run (as for the
/// forced collection, a seed keeps naming the outcome it named before);
/// `TIMESHIM_GO_GC=keep` never sets it, `TIMESHIM_GO_GC=N` sets `N` in
/// every run.
pub(crate) fn gogc_wanted(command_sets_it: bool, deterministic: bool) -> Option<String> {
    gogc(
        std::env::var("TIMESHIM_GO_GC").ok().as_deref(),
        command_sets_it || std::env::var_os("GOGC").is_some(),
        deterministic,
    )
}

fn gogc(setting: Option<&str>, already: bool, deterministic: bool) -> Option<String> {
    if already {
        return None;
    }
    match setting {
        Some("keep") => None,
        Some(n) if n == "off" || (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) => {
            Some(n.to_string())
        }
        Some(other) if !other.is_empty() => {
            tracing::warn!(
                value = other,
                "TIMESHIM_GO_GC is neither keep, off nor a percentage: ignored"
            );
            gogc(None, false, deterministic)
        }
        _ if deterministic => None,
        _ => Some(GOGC_DEFAULT.to_string()),
    }
}

/// Sets `runtime.forcegcperiod` to never in the stopped tracee `pid`
/// (at its exec stop, before the runtime starts).
pub(crate) fn unforce_gc(pid: u32) -> io::Result<ForcedGc> {
    let exe = File::open(format!("/proc/{pid}/exe"))?;
    let Some(elf) = Elf::read(&exe)? else {
        return Ok(ForcedGc::NotGo);
    };
    let addr = match find_forcegc_period(&exe, &elf)? {
        Found::At(a) => a,
        Found::NotGo => return Ok(ForcedGc::NotGo),
        Found::NotOnce => return Ok(ForcedGc::NotFound),
    };
    let bias = if elf.position_independent {
        load_bias(pid)?
    } else {
        0
    };
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    let at = addr + bias;
    let mut now = [0u8; 8];
    mem.read_exact_at(&mut now, at)?;
    if u64::from_le_bytes(now) != FORCEGC_PERIOD_NS {
        return Ok(ForcedGc::NotFound);
    }
    mem.write_all_at(&NEVER.to_le_bytes(), at)?;
    Ok(ForcedGc::Disabled(at))
}

enum Found {
    At(u64),
    NotGo,
    NotOnce,
}

/// The link-time address of `runtime.forcegcperiod`, if found exactly once.
fn find_forcegc_period(exe: &File, elf: &Elf) -> io::Result<Found> {
    let (entry, code) = match function_code(exe, elf, &["runtime.sysmon"])? {
        Code::Found(entry, code) => (entry, code),
        Code::NotGo => return Ok(Found::NotGo),
        Code::Odd => return Ok(Found::NotOnce),
    };
    let data: Vec<&Section> = [".noptrdata", ".data"]
        .iter()
        .filter_map(|n| elf.section(n))
        .collect();
    let mut found: Vec<u64> = Vec::new();
    for p in 0..code.len().saturating_sub(3) {
        let disp = i32::from_le_bytes(code[p..p + 4].try_into().unwrap());
        // A RIP-relative operand whose displacement ends its instruction
        // (a load or compare without an immediate): the next instruction's
        // address plus the displacement.
        let target = (entry + p as u64 + 4).wrapping_add(disp as i64 as u64);
        if !target.is_multiple_of(8) || found.contains(&target) {
            continue;
        }
        let Some(s) = data
            .iter()
            .find(|s| target >= s.addr && target + 8 <= s.addr + s.size)
        else {
            continue;
        };
        let mut v = [0u8; 8];
        exe.read_exact_at(&mut v, s.offset + (target - s.addr))?;
        if u64::from_le_bytes(v) == FORCEGC_PERIOD_NS {
            found.push(target);
        }
    }
    Ok(match found[..] {
        [one] => Found::At(one),
        _ => Found::NotOnce,
    })
}

/// Where Go's runtime keeps the deadline of its network poller's wait:
/// the run-time address of `runtime.sched.lastpoll`, followed by
/// `runtime.sched.pollUntil` (fields 2 and 3 of `schedt`, at offsets 8 and
/// 16 in every release since Go 1.14). `None` when the process is not a Go
/// program or the pair is not found exactly once.
///
/// Go multiplexes its timers onto one wait: `findRunnable` stores the
/// earliest timer's time in `pollUntil`, then calls `netpoll`, which waits
/// in `epoll_pwait` for that delay in whole milliseconds, rounded down
/// (`runtime/netpoll_epoll.go`). The kernel (and so the supervisor) sees
/// only the milliseconds; the nanoseconds are in `pollUntil`
/// (see `Supervisor::go_poll_wait` for what is done with them).
///
/// Found in stripped binaries too, from `findRunnable`'s code (named in
/// `.gopclntab`): `sched.lastpoll.Swap(0)` and `sched.pollUntil.Store(…)`
/// (and, after the wait, `Store(0)` and `Store(now)`) compile to a
/// RIP-relative `LEAQ` of the field followed by a 64-bit `XCHGQ` through
/// that register. The pair is the one address X with X + 8 such that both
/// are so exchanged; anything else (none, or several) and nothing is used.
pub(crate) fn find_poll_until(pid: u32) -> io::Result<Option<u64>> {
    let exe = File::open(format!("/proc/{pid}/exe"))?;
    let Some(elf) = Elf::read(&exe)? else {
        return Ok(None);
    };
    let Some(at) = find_lastpoll(&exe, &elf)? else {
        return Ok(None);
    };
    let bias = if elf.position_independent {
        load_bias(pid)?
    } else {
        0
    };
    Ok(Some(at + bias))
}

/// The link-time address of `runtime.sched.lastpoll` (see
/// [`find_poll_until`]).
fn find_lastpoll(exe: &File, elf: &Elf) -> io::Result<Option<u64>> {
    // `findrunnable` before Go 1.19.
    let Code::Found(entry, code) =
        function_code(exe, elf, &["runtime.findRunnable", "runtime.findrunnable"])?
    else {
        return Ok(None);
    };
    let data: Vec<&Section> = [".noptrdata", ".data", ".bss", ".noptrbss"]
        .iter()
        .filter_map(|n| elf.section(n))
        .collect();
    let exchanged = exchanged_through_lea(&code, entry);
    let in_data = |a: u64| data.iter().any(|s| a >= s.addr && a + 8 <= s.addr + s.size);
    let pairs: Vec<u64> = exchanged
        .iter()
        .copied()
        .filter(|&a| a.is_multiple_of(8) && in_data(a) && exchanged.contains(&(a + 8)))
        .collect();
    Ok(match pairs[..] {
        [one] => Some(one),
        _ => None,
    })
}

/// The addresses a function's code exchanges 64 bits with through a
/// register just loaded with a RIP-relative `LEAQ` (`LEAQ x(RIP), R` then,
/// at most one instruction of up to 3 bytes later, `XCHGQ S, 0(R)`).
/// `entry` is the code's address.
fn exchanged_through_lea(code: &[u8], entry: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 7 <= code.len() {
        let (rex, op, modrm) = (code[p], code[p + 1], code[p + 2]);
        // REX.W (0x48..0x4f), LEA, mod 00 r/m 101: RIP + disp32.
        if rex & 0xf8 != 0x48 || op != 0x8d || modrm & 0xc7 != 0x05 {
            p += 1;
            continue;
        }
        let reg = ((modrm >> 3) & 7) | ((rex & 0x04) << 1);
        let disp = i32::from_le_bytes(code[p + 3..p + 7].try_into().unwrap());
        let next = p + 7;
        let target = (entry + next as u64).wrapping_add(disp as i64 as u64);
        // The exchange, right after the LEA or after one short move.
        let exchanges = [next, next + 3].iter().any(|&q| {
            code.get(q..q + 3).is_some_and(|x| {
                let (rex, op, modrm) = (x[0], x[1], x[2]);
                // REX.W, XCHG r/m64 r64, mod 00 with the LEA's register as
                // the base (r/m 100 and 101 mean a SIB byte and RIP).
                let base = (modrm & 7) | ((rex & 0x01) << 3);
                rex & 0xf8 == 0x48
                    && op == 0x87
                    && modrm >> 6 == 0
                    && modrm & 7 != 4
                    && modrm & 7 != 5
                    && base == reg
            })
        });
        if exchanges && !out.contains(&target) {
            out.push(target);
        }
        p = next;
    }
    out
}

enum Code {
    /// The function's address and machine code.
    Found(u64, Vec<u8>),
    /// No `.gopclntab`, or no function of those names.
    NotGo,
    /// No `.text`, or a range outside it.
    Odd,
}

/// The code of the first of `names` that `.gopclntab` names.
fn function_code(exe: &File, elf: &Elf, names: &[&str]) -> io::Result<Code> {
    let Some(pcln) = elf.section(".gopclntab") else {
        return Ok(Code::NotGo);
    };
    let Some(text) = elf.section(".text") else {
        return Ok(Code::Odd);
    };
    let mut tab = vec![0u8; pcln.size as usize];
    exe.read_exact_at(&mut tab, pcln.offset)?;
    let Some((entry, end)) = names
        .iter()
        .find_map(|n| function_range(&tab, text.addr, n))
    else {
        return Ok(Code::NotGo);
    };
    if entry < text.addr || end > text.addr + text.size || end <= entry {
        return Ok(Code::Odd);
    }
    let mut code = vec![0u8; (end - entry) as usize];
    exe.read_exact_at(&mut code, text.offset + (entry - text.addr))?;
    Ok(Code::Found(entry, code))
}

/// `[entry, end)` of the function `name` from a `.gopclntab` (Go 1.18 and
/// later: magic 0xfffffff0 or 0xfffffff1, 64-bit pointers). `text` is the
/// `.text` section's address (`runtime.text`, the base of the entry
/// offsets since Go 1.20).
fn function_range(tab: &[u8], text: u64, name: &str) -> Option<(u64, u64)> {
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(tab.get(o..o + 4)?.try_into().ok()?)) };
    let u64_at =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(tab.get(o..o + 8)?.try_into().ok()?)) };
    let magic = u32_at(0)?;
    if !matches!(magic, 0xffff_fff0 | 0xffff_fff1) || tab.get(7) != Some(&8) {
        return None;
    }
    let nfunc = u64_at(8)? as usize;
    let base = if magic == 0xffff_fff0 {
        u64_at(24)?
    } else {
        text
    };
    let names = u64_at(32)? as usize;
    let cu = u64_at(40)? as usize;
    let pcln = u64_at(64)? as usize;
    let nametab = tab.get(names..cu)?;
    // The name's offset in the name table: preceded by the previous
    // name's NUL (or at the start), ended by its own.
    let mut key = Vec::with_capacity(name.len() + 2);
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key.push(0);
    let name_off = if nametab.starts_with(&key[1..]) {
        0
    } else {
        nametab.windows(key.len()).position(|w| w == key)? + 1
    };
    for i in 0..nfunc {
        let ft = pcln + i * 8;
        let (entry, funcoff) = (u32_at(ft)?, u32_at(ft + 4)? as usize);
        if u32_at(pcln + funcoff + 4)? as usize == name_off {
            let end = u32_at(ft + 8)?;
            return Some((base + entry as u64, base + end as u64));
        }
    }
    None
}

/// Where a position-independent executable was loaded: the start of its
/// first mapping (file offset 0).
fn load_bias(pid: u32) -> io::Result<u64> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 6 && f[2] == "00000000" && std::path::Path::new(f[5]) == exe {
            if let Some((lo, _)) = f[0].split_once('-') {
                if let Ok(lo) = u64::from_str_radix(lo, 16) {
                    return Ok(lo);
                }
            }
        }
    }
    Err(io::Error::other("the executable's mapping not found"))
}

struct Section {
    name: String,
    addr: u64,
    offset: u64,
    size: u64,
}

/// The section headers of a 64-bit little-endian ELF executable.
struct Elf {
    sections: Vec<Section>,
    position_independent: bool,
}

impl Elf {
    /// `None` if not a 64-bit little-endian ELF executable.
    fn read(f: &File) -> io::Result<Option<Elf>> {
        let mut h = [0u8; 64];
        if f.read_exact_at(&mut h, 0).is_err() || &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
            return Ok(None);
        }
        let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let e_type = u16_at(&h, 16);
        let shoff = u64_at(&h, 40);
        let shentsize = u16_at(&h, 58) as usize;
        let shnum = u16_at(&h, 60) as usize;
        let shstrndx = u16_at(&h, 62) as usize;
        if shentsize < 64 || shnum == 0 || shstrndx >= shnum || shnum > 4096 {
            return Ok(None);
        }
        let mut sh = vec![0u8; shentsize * shnum];
        f.read_exact_at(&mut sh, shoff)?;
        let raw: Vec<(u32, u64, u64, u64)> = (0..shnum)
            .map(|i| {
                let s = &sh[i * shentsize..];
                (u32_at(s, 0), u64_at(s, 16), u64_at(s, 24), u64_at(s, 32))
            })
            .collect();
        let (_, _, stroff, strsize) = raw[shstrndx];
        let mut strtab = vec![0u8; strsize.min(1 << 20) as usize];
        f.read_exact_at(&mut strtab, stroff)?;
        let sections = raw
            .iter()
            .map(|&(name, addr, offset, size)| {
                let n = strtab.get(name as usize..).unwrap_or(&[]);
                let n = &n[..n.iter().position(|&b| b == 0).unwrap_or(n.len())];
                Section {
                    name: String::from_utf8_lossy(n).into_owned(),
                    addr,
                    offset,
                    size,
                }
            })
            .collect();
        Ok(Some(Elf {
            sections,
            position_independent: e_type == 3,
        }))
    }

    fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gogc_400_unless_set_or_deterministic_or_asked() {
        assert_eq!(gogc(None, false, false).as_deref(), Some(GOGC_DEFAULT));
        assert_eq!(gogc(None, false, true), None);
        assert_eq!(gogc(None, true, false), None);
        assert_eq!(gogc(Some("keep"), false, false), None);
        assert_eq!(gogc(Some("200"), false, true).as_deref(), Some("200"));
        assert_eq!(gogc(Some("off"), false, false).as_deref(), Some("off"));
        // The command's or batkube's own GOGC wins over everything.
        assert_eq!(gogc(Some("200"), true, false), None);
        // A value Go would not read: the default, as if unset.
        assert_eq!(
            gogc(Some("lots"), false, false).as_deref(),
            Some(GOGC_DEFAULT)
        );
        assert_eq!(gogc(Some("lots"), false, true), None);
        assert_eq!(gogc(Some(""), false, false).as_deref(), Some(GOGC_DEFAULT));
    }

    #[test]
    fn off_by_default_kept_in_deterministic_runs_unless_asked() {
        assert!(wanted(None, false));
        assert!(!wanted(None, true));
        assert!(wanted(Some("never"), true));
        assert!(!wanted(Some("keep"), false));
        // Anything else: the default.
        assert!(wanted(Some(""), false));
        assert!(!wanted(Some("yes"), true));
    }

    #[test]
    fn a_binary_that_is_not_go_is_left_alone() {
        // The test binary is not Go: nothing found, nothing claimed.
        let me = File::open("/proc/self/exe").unwrap();
        let elf = Elf::read(&me).unwrap().expect("an ELF executable");
        assert!(elf.section(".gopclntab").is_none());
        assert!(matches!(
            find_forcegc_period(&me, &elf).unwrap(),
            Found::NotGo
        ));
    }
}

//! The vDSO, pointed at the clock page: clock reads at memory speed.
//!
//! Go's runtime, glibc and most programs read the clock through the vDSO
//! (`__vdso_clock_gettime`, `__vdso_gettimeofday`, `__vdso_time`), which no
//! system call filter sees. Hidden (`AT_SYSINFO_EHDR` retagged), every read
//! becomes a system call for the supervisor: exact, but 7 µs each, and the
//! upstream kube-scheduler reads the clock hundreds of thousands of times a
//! run. Instead, at the program's exec stop, the launcher (still its
//! tracer) maps two pages into it and rewrites the vDSO's clock entries:
//!
//! - the first page of the clock page file, read-only, shared with the
//!   controller (the same seqlock the linked shim reads);
//! - a page of code, [`STUB`], the assembly below: each entry reads the
//!   seqlock and answers from the page exactly as the supervisor would
//!   (same clocks, same `CLOCK_MONOTONIC` offset, same TAI offset), and
//!   falls back to the real system call (which the filter hands to the
//!   supervisor) for the clocks it does not serve (CPU-time clocks) and
//!   while the clock runs in realtime mode;
//!
//! and each patched vDSO function starts with `movabs rax, entry; jmp rax`
//! (12 bytes, so every alias and every way of finding the symbol lands in
//! the stub). With `--seed`, `__vdso_getrandom` answers `-ENOSYS`, so Go
//! and glibc take the `getrandom` system call, which the supervisor seeds.
//!
//! The mappings are made by system calls injected into the stopped program
//! (`syscall; int3` at the patched entry, registers restored);
//! none of them is one the filter notifies, so the supervisor need not run
//! yet. Writes into the vDSO and the read-only code page go through
//! `/proc/<pid>/mem`, which may write read-only private pages (copy on
//! write) for the process's tracer, as debuggers insert breakpoints. If
//! anything is missing (no vDSO, a symbol too short), the launcher hides
//! the vDSO instead, as before: slower, equally exact.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::remote;
use crate::page::Page;

/// Bytes `movabs rax, imm64; jmp rax` takes at each patched entry.
const JUMP_BYTES: usize = 12;
const NS: u64 = 1_000_000_000;
/// `syscall; int3`: where injected system calls run.
const SCRATCH: [u8; 3] = [0x0f, 0x05, 0xcc];
const TAI_OFFSET_NS: u64 = 37 * NS;

// The stub: position-independent, no stack, only caller-saved registers
// (rax, rcx, rdx, r8–r11) and the arguments it answers through. Offset 0
// holds the address of the page in the program; entries read it
// rip-relative, so the block works wherever it is copied.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.timeshim_vdso,\"ax\",@progbits",
    ".balign 16",
    ".globl timeshim_vdso_start",
    ".hidden timeshim_vdso_start",
    "timeshim_vdso_start:",
    ".quad 0",
    ".balign 16",
    // int clock_gettime(clockid_t clk /* edi */, struct timespec *ts /* rsi */)
    ".globl timeshim_vdso_clock_gettime",
    ".hidden timeshim_vdso_clock_gettime",
    "timeshim_vdso_clock_gettime:",
    "cmp edi, 11",
    "ja .Ltsv_cg_sys",
    "xor ecx, ecx",
    "mov eax, 0x121", // REALTIME 0, REALTIME_COARSE 5, REALTIME_ALARM 8
    "bt eax, edi",
    "jc .Ltsv_cg_read",
    "mov ecx, 1",
    "mov eax, 0x2d2", // MONOTONIC 1, _RAW 4, _COARSE 6, BOOTTIME 7, BOOTTIME_ALARM 9
    "bt eax, edi",
    "jc .Ltsv_cg_read",
    "mov ecx, 2",
    "cmp edi, 11", // TAI
    "jne .Ltsv_cg_sys", // the CPU-time clocks
    ".Ltsv_cg_read:",
    "mov r8, qword ptr [rip + timeshim_vdso_start]",
    ".Ltsv_cg_retry:",
    "mov r9, qword ptr [r8 + {seq}]",
    "test r9d, 1",
    "jnz .Ltsv_cg_spin",
    "mov eax, dword ptr [r8 + {mode}]",
    "test eax, eax",
    "jnz .Ltsv_cg_sys",
    "mov r10, qword ptr [r8 + {sim}]",
    "mov r11, qword ptr [r8 + {mono}]",
    "cmp r9, qword ptr [r8 + {seq}]",
    "jne .Ltsv_cg_retry",
    "cmp ecx, 1",
    "jne .Ltsv_cg_tai",
    "sub r10, r11",
    "jae .Ltsv_cg_out",
    "xor r10d, r10d",
    "jmp .Ltsv_cg_out",
    ".Ltsv_cg_tai:",
    "cmp ecx, 2",
    "jne .Ltsv_cg_out",
    "mov rax, {tai}",
    "add r10, rax",
    ".Ltsv_cg_out:",
    "mov rax, r10",
    "xor edx, edx",
    "mov r9, {ns}",
    "div r9",
    "mov qword ptr [rsi], rax",
    "mov qword ptr [rsi + 8], rdx",
    "xor eax, eax",
    "ret",
    ".Ltsv_cg_spin:",
    "pause",
    "jmp .Ltsv_cg_retry",
    ".Ltsv_cg_sys:",
    "mov eax, 228",
    "syscall",
    "ret",
    ".balign 16",
    // int gettimeofday(struct timeval *tv /* rdi */, struct timezone *tz /* rsi */)
    ".globl timeshim_vdso_gettimeofday",
    ".hidden timeshim_vdso_gettimeofday",
    "timeshim_vdso_gettimeofday:",
    "mov r8, qword ptr [rip + timeshim_vdso_start]",
    ".Ltsv_gt_retry:",
    "mov r9, qword ptr [r8 + {seq}]",
    "test r9d, 1",
    "jnz .Ltsv_gt_spin",
    "mov eax, dword ptr [r8 + {mode}]",
    "test eax, eax",
    "jnz .Ltsv_gt_sys",
    "mov r10, qword ptr [r8 + {sim}]",
    "cmp r9, qword ptr [r8 + {seq}]",
    "jne .Ltsv_gt_retry",
    "test rdi, rdi",
    "jz .Ltsv_gt_tz",
    "mov rax, r10",
    "xor edx, edx",
    "mov r9, {ns}",
    "div r9",
    "mov qword ptr [rdi], rax",
    "mov rax, rdx",
    "xor edx, edx",
    "mov r9, 1000",
    "div r9",
    "mov qword ptr [rdi + 8], rax",
    ".Ltsv_gt_tz:",
    "test rsi, rsi",
    "jz .Ltsv_gt_done",
    "mov qword ptr [rsi], 0",
    ".Ltsv_gt_done:",
    "xor eax, eax",
    "ret",
    ".Ltsv_gt_spin:",
    "pause",
    "jmp .Ltsv_gt_retry",
    ".Ltsv_gt_sys:",
    "mov eax, 96",
    "syscall",
    "ret",
    ".balign 16",
    // time_t time(time_t *t /* rdi */)
    ".globl timeshim_vdso_time",
    ".hidden timeshim_vdso_time",
    "timeshim_vdso_time:",
    "mov r8, qword ptr [rip + timeshim_vdso_start]",
    ".Ltsv_tm_retry:",
    "mov r9, qword ptr [r8 + {seq}]",
    "test r9d, 1",
    "jnz .Ltsv_tm_spin",
    "mov eax, dword ptr [r8 + {mode}]",
    "test eax, eax",
    "jnz .Ltsv_tm_sys",
    "mov r10, qword ptr [r8 + {sim}]",
    "cmp r9, qword ptr [r8 + {seq}]",
    "jne .Ltsv_tm_retry",
    "mov rax, r10",
    "xor edx, edx",
    "mov r9, {ns}",
    "div r9",
    "test rdi, rdi",
    "jz .Ltsv_tm_done",
    "mov qword ptr [rdi], rax",
    ".Ltsv_tm_done:",
    "ret",
    ".Ltsv_tm_spin:",
    "pause",
    "jmp .Ltsv_tm_retry",
    ".Ltsv_tm_sys:",
    "mov eax, 201",
    "syscall",
    "ret",
    ".balign 16",
    // ssize_t getrandom(...): -ENOSYS, so callers take the system call.
    ".globl timeshim_vdso_nosys",
    ".hidden timeshim_vdso_nosys",
    "timeshim_vdso_nosys:",
    "mov rax, -38",
    "ret",
    ".globl timeshim_vdso_end",
    ".hidden timeshim_vdso_end",
    "timeshim_vdso_end:",
    ".popsection",
    seq = const std::mem::offset_of!(Page, clock_seq),
    sim = const std::mem::offset_of!(Page, sim_ns),
    mono = const std::mem::offset_of!(Page, mono_offset_ns),
    mode = const std::mem::offset_of!(Page, mode),
    ns = const NS,
    tai = const TAI_OFFSET_NS,
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    static timeshim_vdso_start: u8;
    static timeshim_vdso_clock_gettime: u8;
    static timeshim_vdso_gettimeofday: u8;
    static timeshim_vdso_time: u8;
    static timeshim_vdso_nosys: u8;
    static timeshim_vdso_end: u8;
}

/// The stub's bytes and its entries' offsets in them.
pub(crate) struct Stub {
    pub bytes: &'static [u8],
    pub clock_gettime: usize,
    pub gettimeofday: usize,
    pub time: usize,
    pub nosys: usize,
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn stub() -> Stub {
    // SAFETY: symbols of the block above, in one section, start < end;
    // only their addresses are taken, and the bytes between them are code
    // and data of this binary (readable text).
    unsafe {
        let start = &raw const timeshim_vdso_start as usize;
        let end = &raw const timeshim_vdso_end as usize;
        let off = |p: *const u8| p as usize - start;
        Stub {
            bytes: std::slice::from_raw_parts(start as *const u8, end - start),
            clock_gettime: off(&raw const timeshim_vdso_clock_gettime),
            gettimeofday: off(&raw const timeshim_vdso_gettimeofday),
            time: off(&raw const timeshim_vdso_time),
            nosys: off(&raw const timeshim_vdso_nosys),
        }
    }
}

/// The stub's bytes for a program whose clock page is mapped at `page`.
pub(crate) fn stub_for(stub: &Stub, page: u64) -> Vec<u8> {
    let mut bytes = stub.bytes.to_vec();
    bytes[..8].copy_from_slice(&page.to_ne_bytes());
    bytes
}

/// The functions of a vDSO image, by name: address (in the program) and size.
pub(crate) struct Symbols(Vec<(String, u64, u64)>);

impl Symbols {
    fn get(&self, name: &str) -> Option<(u64, u64)> {
        self.0
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|&(_, a, s)| (a, s))
    }
}

fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}
fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}
fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Reads the dynamic symbols of a vDSO image mapped at `base` (an ELF64
/// little-endian shared object, as on x86_64): section headers for
/// `.dynsym` and its string table, the first `PT_LOAD` for the load bias.
pub(crate) fn parse(image: &[u8], base: u64) -> Option<Symbols> {
    if image.get(..4)? != b"\x7fELF" || image.get(4)? != &2 || image.get(5)? != &1 {
        return None;
    }
    let phoff = le64(image, 0x20)? as usize;
    let shoff = le64(image, 0x28)? as usize;
    let phentsize = le16(image, 0x36)? as usize;
    let phnum = le16(image, 0x38)? as usize;
    let shentsize = le16(image, 0x3a)? as usize;
    let shnum = le16(image, 0x3c)? as usize;
    let mut bias = None;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if le32(image, ph)? == 1 {
            // PT_LOAD: the image is mapped from its start at p_vaddr - p_offset.
            bias =
                Some(base.wrapping_sub(le64(image, ph + 0x10)?.wrapping_sub(le64(image, ph + 8)?)));
            break;
        }
    }
    let bias = bias?;
    let mut out = Vec::new();
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        if le32(image, sh + 4)? != 11 {
            continue; // not SHT_DYNSYM
        }
        let off = le64(image, sh + 0x18)? as usize;
        let size = le64(image, sh + 0x20)? as usize;
        let link = le32(image, sh + 0x28)? as usize;
        let entsize = (le64(image, sh + 0x38)? as usize).max(24);
        let strsh = shoff + link * shentsize;
        let stroff = le64(image, strsh + 0x18)? as usize;
        for j in 0..size / entsize {
            let sym = off + j * entsize;
            let name = le32(image, sym)? as usize;
            let info = *image.get(sym + 4)?;
            let shndx = le16(image, sym + 6)?;
            if info & 0xf != 2 || shndx == 0 {
                continue; // not a defined STT_FUNC
            }
            let rest = image.get(stroff + name..)?;
            let len = rest.iter().position(|&c| c == 0)?;
            let name = String::from_utf8_lossy(&rest[..len]).into_owned();
            out.push((
                name,
                bias.wrapping_add(le64(image, sym + 8)?),
                le64(image, sym + 16)?,
            ));
        }
    }
    Some(Symbols(out))
}

/// The vDSO's extent in process `pid`, from its maps.
fn vdso_extent(pid: u32) -> io::Result<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    for line in maps.lines() {
        if line.ends_with("[vdso]") {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                    return Ok((a, b - a));
                }
            }
        }
    }
    Err(io::Error::other("no [vdso] mapping"))
}

/// A stopped tracee whose registers are put back when dropped.
struct Stopped {
    pid: u32,
    saved: libc::user_regs_struct,
}

impl Stopped {
    fn new(pid: u32) -> io::Result<Self> {
        // SAFETY: a zeroed register struct for GETREGS to fill.
        let mut saved: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: our stopped tracee; the kernel fills `saved`.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut saved as *mut _) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Stopped { pid, saved })
    }

    /// Lets the tracee leave the system call it is stopped in (an exec
    /// event stop is inside `execve`, whose result is yet to be stored in
    /// `rax`) by resuming it at the `int3` of the scratch at `at`; the
    /// registers to restore become those it then has, at its entry point.
    fn leave(&mut self, at: u64) -> io::Result<()> {
        let entry = self.saved.rip;
        let mut r = self.saved;
        r.rip = at + SCRATCH.len() as u64 - 1;
        let out = self.run(r, at + SCRATCH.len() as u64)?;
        self.saved = out;
        self.saved.rip = entry;
        Ok(())
    }

    /// Runs system call `nr` in the tracee at `at`, where `syscall; int3`
    /// was written, up to the breakpoint; returns its raw result. (Not a
    /// single step: resumed from an exec event stop, which is inside the
    /// `execve` call, a single step is reported at that call's exit,
    /// before any instruction runs.)
    fn syscall(&self, at: u64, nr: i64, args: [u64; 6]) -> io::Result<i64> {
        let mut r = self.saved;
        r.rip = at;
        r.rax = nr as u64;
        // Not in a system call: no restart logic on resume.
        r.orig_rax = u64::MAX;
        r.rdi = args[0];
        r.rsi = args[1];
        r.rdx = args[2];
        r.r10 = args[3];
        r.r8 = args[4];
        r.r9 = args[5];
        Ok(self.run(r, at + SCRATCH.len() as u64)?.rax as i64)
    }

    /// Resumes the tracee with registers `r` until the breakpoint that
    /// leaves it at `stop`; returns its registers there.
    fn run(&self, r: libc::user_regs_struct, stop: u64) -> io::Result<libc::user_regs_struct> {
        // SAFETY: our stopped tracee; registers from a valid struct.
        if unsafe { libc::ptrace(libc::PTRACE_SETREGS, self.pid, 0, &r as *const _) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("setting registers: {e}")));
        }
        // SAFETY: resuming our tracee, up to the breakpoint.
        if unsafe { libc::ptrace(libc::PTRACE_CONT, self.pid, 0, 0) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("resuming: {e}")));
        }
        let mut status = 0;
        loop {
            // SAFETY: waiting for our tracee's next stop.
            let w = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, libc::__WALL) };
            if w >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        if !libc::WIFSTOPPED(status) || libc::WSTOPSIG(status) != libc::SIGTRAP {
            return Err(io::Error::other(format!(
                "unexpected state {status:#x} while mapping the clock page"
            )));
        }
        // SAFETY: as in `new`.
        let mut out: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, self.pid, 0, &mut out as *mut _) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if out.rip != stop {
            return Err(io::Error::other(format!(
                "stopped at {:#x}, not the breakpoint, while mapping the clock page",
                out.rip
            )));
        }
        Ok(out)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: our stopped tracee; the registers it had at the exec stop.
        unsafe { libc::ptrace(libc::PTRACE_SETREGS, self.pid, 0, &self.saved as *const _) };
    }
}

fn check(what: &str, r: i64) -> io::Result<u64> {
    if (-4095..0).contains(&r) {
        return Err(io::Error::new(
            io::Error::from_raw_os_error(-r as i32).kind(),
            format!(
                "{what} in the program: {}",
                io::Error::from_raw_os_error(-r as i32)
            ),
        ));
    }
    Ok(r as u64)
}

/// At the exec stop of `pid` (its tracer's thread): maps the clock page
/// file `page` and the stub into it and points the vDSO's clock entries
/// (and, with `seeded`, `getrandom`) at the stub. `Err` leaves the vDSO as
/// it was (the caller hides it instead); the program's registers are
/// restored either way.
#[cfg(target_arch = "x86_64")]
pub(crate) fn patch(pid: u32, page: &Path, seeded: bool) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ctx =
        |what: &'static str| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let (base, len) = vdso_extent(pid).map_err(ctx("finding the vDSO"))?;
    let mut image = vec![0u8; len as usize];
    remote::read(pid, base, &mut image).map_err(ctx("reading the vDSO image"))?;
    let syms = parse(&image, base).ok_or_else(|| io::Error::other("unreadable vDSO image"))?;
    let entry = |name: &str| -> io::Result<Option<u64>> {
        match syms.get(name) {
            Some((a, s)) if s as usize >= JUMP_BYTES => Ok(Some(a)),
            Some(_) => Err(io::Error::other(format!("{name} is too short to patch"))),
            None => Ok(None),
        }
    };
    let cg = entry("__vdso_clock_gettime")?
        .ok_or_else(|| io::Error::other("no __vdso_clock_gettime"))?;
    let gtod = entry("__vdso_gettimeofday")?;
    let time = entry("__vdso_time")?;
    let rnd = if seeded {
        entry("__vdso_getrandom")?
    } else {
        None
    };

    let mem = File::options()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .map_err(ctx("opening /proc/<pid>/mem"))?;
    let mut original = [0u8; JUMP_BYTES];
    mem.read_exact_at(&mut original, cg)
        .map_err(ctx("reading the vDSO"))?;
    let mut stopped = Stopped::new(pid).map_err(ctx("reading the registers"))?;
    // The scratch instructions, where the jump will go.
    mem.write_all_at(&SCRATCH, cg)
        .map_err(ctx("writing the vDSO"))?;
    let result = (|| {
        stopped.leave(cg)?;
        const PAGE: u64 = 4096;
        let code = check(
            "mmap",
            stopped.syscall(
                cg,
                libc::SYS_mmap,
                [
                    0,
                    PAGE,
                    (libc::PROT_READ | libc::PROT_EXEC) as u64,
                    (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
                    u64::MAX,
                    0,
                ],
            )?,
        )?;
        // The path, for openat, in the code page past the stub.
        let stub = stub();
        let path_at = code + PAGE / 2;
        let mut path = page.as_os_str().as_bytes().to_vec();
        path.push(0);
        if stub.bytes.len() > (PAGE / 2) as usize || path.len() > (PAGE / 2) as usize {
            return Err(io::Error::other("clock page path too long"));
        }
        mem.write_all_at(&path, path_at)
            .map_err(ctx("writing the path"))?;
        let fd = check(
            "openat",
            stopped.syscall(
                cg,
                libc::SYS_openat,
                [
                    libc::AT_FDCWD as u64,
                    path_at,
                    (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
                    0,
                    0,
                    0,
                ],
            )?,
        )?;
        let mapped = stopped.syscall(
            cg,
            libc::SYS_mmap,
            [
                0,
                PAGE,
                libc::PROT_READ as u64,
                libc::MAP_SHARED as u64,
                fd,
                0,
            ],
        );
        check(
            "close",
            stopped.syscall(cg, libc::SYS_close, [fd, 0, 0, 0, 0, 0])?,
        )?;
        let page_at = check("mmap", mapped?)?;
        mem.write_all_at(&vec![0u8; path.len()], path_at)?;
        mem.write_all_at(&stub_for(&stub, page_at), code)
            .map_err(ctx("writing the stub"))?;
        let jump = |to: u64| {
            let mut j = [0u8; JUMP_BYTES];
            j[..2].copy_from_slice(&[0x48, 0xb8]); // movabs rax, imm64
            j[2..10].copy_from_slice(&to.to_ne_bytes());
            j[10..].copy_from_slice(&[0xff, 0xe0]); // jmp rax
            j
        };
        if let Some(at) = gtod {
            mem.write_all_at(&jump(code + stub.gettimeofday as u64), at)?;
        }
        if let Some(at) = time {
            mem.write_all_at(&jump(code + stub.time as u64), at)?;
        }
        if let Some(at) = rnd {
            mem.write_all_at(&jump(code + stub.nosys as u64), at)?;
        }
        mem.write_all_at(&jump(code + stub.clock_gettime as u64), cg)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = mem.write_all_at(&original, cg);
    }
    drop(stopped);
    result
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn patch(_pid: u32, _page: &Path, _seeded: bool) -> io::Result<()> {
    Err(io::Error::other(
        "vDSO patching is implemented for x86_64 only",
    ))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// Runs the stub in this process against a page of our own.
    struct Local {
        code: *mut libc::c_void,
        page: Box<Page>,
    }

    impl Local {
        fn new(sim_ns: u64, mono_offset_ns: u64) -> Self {
            // SAFETY: Page is all atomics; zeroed is valid.
            let page: Box<Page> = unsafe { Box::new(std::mem::zeroed()) };
            page.mono_offset_ns.store(mono_offset_ns, Ordering::Relaxed);
            page.write_clock(sim_ns, 0, crate::page::MODE_FROZEN);
            let stub = stub();
            let bytes = stub_for(&stub, &*page as *const Page as u64);
            // SAFETY: a fresh private mapping, filled then made executable.
            let code = unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(p, libc::MAP_FAILED);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), p as *mut u8, bytes.len());
                assert_eq!(
                    libc::mprotect(p, 4096, libc::PROT_READ | libc::PROT_EXEC),
                    0
                );
                p
            };
            Local { code, page }
        }

        fn entry<F: Copy>(&self, off: usize) -> F {
            assert_eq!(std::mem::size_of::<F>(), 8);
            let addr = self.code as usize + off;
            // SAFETY: a function pointer into the stub, with its C signature.
            unsafe { std::mem::transmute_copy(&addr) }
        }

        fn clock_gettime(&self, clk: i32) -> (i32, libc::timespec) {
            let f: extern "C" fn(i32, *mut libc::timespec) -> i32 =
                self.entry(stub().clock_gettime);
            let mut ts = libc::timespec {
                tv_sec: -1,
                tv_nsec: -1,
            };
            (f(clk, &mut ts), ts)
        }
    }

    impl Drop for Local {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.code, 4096) };
        }
    }

    #[test]
    fn stub_answers_like_the_supervisor() {
        let sim = 1_700_000_123_456_789_012u64;
        let off = 1_700_000_000_000_000_000u64;
        let l = Local::new(sim, off);
        for clk in [
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME_COARSE,
            libc::CLOCK_REALTIME_ALARM,
        ] {
            let (r, ts) = l.clock_gettime(clk);
            assert_eq!(
                (r, ts.tv_sec, ts.tv_nsec),
                (0, 1_700_000_123, 456_789_012),
                "clock {clk}"
            );
        }
        for clk in [
            libc::CLOCK_MONOTONIC,
            libc::CLOCK_MONOTONIC_RAW,
            libc::CLOCK_MONOTONIC_COARSE,
            libc::CLOCK_BOOTTIME,
            libc::CLOCK_BOOTTIME_ALARM,
        ] {
            let (r, ts) = l.clock_gettime(clk);
            assert_eq!(
                (r, ts.tv_sec, ts.tv_nsec),
                (0, 123, 456_789_012),
                "clock {clk}"
            );
        }
        let (r, ts) = l.clock_gettime(libc::CLOCK_TAI);
        assert_eq!((r, ts.tv_sec, ts.tv_nsec), (0, 1_700_000_160, 456_789_012));
        // CPU clocks go to the kernel (here, unfiltered: real CPU time).
        let (r, ts) = l.clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID);
        assert_eq!(r, 0);
        assert!(ts.tv_sec < 1_000_000);
        let (r, _) = l.clock_gettime(1000);
        assert_eq!(r, -libc::EINVAL);

        let gtod: extern "C" fn(*mut libc::timeval, *mut u64) -> i32 = l.entry(stub().gettimeofday);
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let mut tz = u64::MAX;
        assert_eq!(gtod(&mut tv, &mut tz), 0);
        assert_eq!((tv.tv_sec, tv.tv_usec, tz), (1_700_000_123, 456_789, 0));
        assert_eq!(gtod(std::ptr::null_mut(), std::ptr::null_mut()), 0);

        let time: extern "C" fn(*mut i64) -> i64 = l.entry(stub().time);
        let mut t = 0i64;
        assert_eq!(time(&mut t), 1_700_000_123);
        assert_eq!(t, 1_700_000_123);
        assert_eq!(time(std::ptr::null_mut()), 1_700_000_123);

        let nosys: extern "C" fn() -> i64 = l.entry(stub().nosys);
        assert_eq!(nosys(), -38);

        // The clock moves: the next read sees it.
        l.page
            .write_clock(sim + 1_000_000_000, 0, crate::page::MODE_FROZEN);
        assert_eq!(l.clock_gettime(libc::CLOCK_MONOTONIC).1.tv_sec, 124);
        // Monotonic saturates at 0 rather than wrap.
        l.page.mono_offset_ns.store(u64::MAX, Ordering::Relaxed);
        let (_, ts) = l.clock_gettime(libc::CLOCK_MONOTONIC);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (0, 0));
    }

    #[test]
    fn realtime_mode_reads_the_kernel() {
        let l = Local::new(5 * NS, 0);
        l.page.write_clock(5 * NS, 0, crate::page::MODE_REALTIME);
        // Unfiltered here, so the real clock: far from 5 s since the epoch.
        let (r, ts) = l.clock_gettime(libc::CLOCK_REALTIME);
        assert_eq!(r, 0);
        assert!(ts.tv_sec > 1_000_000_000);
    }

    #[test]
    fn parses_this_process_vdso() {
        let pid = std::process::id();
        let (base, len) = vdso_extent(pid).expect("a vDSO");
        let mut image = vec![0u8; len as usize];
        remote::read(pid, base, &mut image).unwrap();
        let syms = parse(&image, base).expect("parsed");
        let (cg, size) = syms.get("__vdso_clock_gettime").expect("clock_gettime");
        assert!(size as usize >= JUMP_BYTES);
        assert!(cg > base && cg < base + len);
        // The symbol is the function libc calls: same answer, give or take.
        let f: extern "C" fn(i32, *mut libc::timespec) -> i32 =
            unsafe { std::mem::transmute(cg as usize) };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        assert_eq!(f(libc::CLOCK_REALTIME, &mut ts), 0);
        assert!(ts.tv_sec > 1_000_000_000);
    }
}

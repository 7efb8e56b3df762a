//! Benchmark child: `clockloop N` reads the monotonic clock N times
//! (`Instant::now`) and exits. It links the shim, so under a controller in
//! linked mode a read is a load from the page; under the seccomp supervisor
//! (no `TIMESHIM_PAGE`, vDSO hidden) it is a `clock_gettime` system call the
//! supervisor answers. `experiments/shim_bench.py` times it both ways.

fn main() {
    timeshim::install();
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("usage: clockloop N");
    let mut last = std::time::Instant::now();
    for _ in 0..n {
        last = std::hint::black_box(std::time::Instant::now());
    }
    std::hint::black_box(last);
}

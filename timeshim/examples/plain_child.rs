//! Test child, preloaded mode: does not reference timeshim at all, so it is
//! an unmodified binary; the tests run it with LD_PRELOAD=libtimeshim.so.
#[path = "common/scenario.rs"]
mod scenario;

fn main() {
    scenario::run();
}

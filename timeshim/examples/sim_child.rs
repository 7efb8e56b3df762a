//! Test child, linked mode: calls `timeshim::install()` first.
#[path = "common/scenario.rs"]
mod scenario;

fn main() {
    timeshim::install();
    scenario::run();
}

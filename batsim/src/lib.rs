//! The Batsim world, knowing nothing of Kubernetes: the typed v4 protocol,
//! allocation interval sets, the ZeroMQ link, the platform and workload
//! models, and the built-in stand-in engine with its output files.

pub mod intervals;
pub mod link;
pub mod platform;
pub mod protocol;
pub mod standin;
pub mod workload;

pub use intervals::IntervalSet;
pub use protocol::{Event, EventData, Message};

use std::io;

/// Serializes a message the way real Batsim prints it: floating-point
/// numbers with six decimals (`5.000100`), integers as integers.
pub fn to_batsim_text(msg: &Message) -> String {
    struct SixDecimals;
    impl serde_json::ser::Formatter for SixDecimals {
        fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
            write!(w, "{v:.6}")
        }
        fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
            write!(w, "{v:.6}")
        }
    }
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SixDecimals);
    serde::Serialize::serialize(msg, &mut ser).expect("protocol messages always serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Rounds a time to the microsecond, as Batsim's `%f` printing does.
pub fn round6(t: f64) -> f64 {
    (t * 1e6).round() / 1e6
}

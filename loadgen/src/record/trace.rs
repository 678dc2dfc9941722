//! W3C Trace Context (`--trace`): the `traceparent` header a request carries and the trace
//! id its row keeps, so a slow or failed row opens in a tracing backend (Jaeger, Tempo, any
//! OpenTelemetry one).
//!
//! The header is `00-{trace id: 32 hex}-{parent id: 16 hex}-{flags: 2 hex}`
//! (<https://www.w3.org/TR/trace-context/#traceparent-header>), the flags' lowest bit asking
//! the server to sample (record) the trace. Ids are drawn from the worker's own `fastrand`
//! generator and written into a fixed array on the stack: a request pays for two random
//! numbers and 55 bytes of hex, no lock and no allocation. A row keeps the trace id as a
//! `u128`; the writer thread turns it into hex ([`Hex32`]).

/// The length of a version-00 `traceparent` value.
pub const TRACEPARENT_LEN: usize = 55;

/// The header's name, lower case as HTTP/2 wants it.
pub const TRACEPARENT: &str = "traceparent";

const HEX: &[u8; 16] = b"0123456789abcdef";

/// One request's trace context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: u128,
    pub parent_id: u64,
    pub sampled: bool,
}

impl TraceParent {
    /// A new trace: random non-zero ids (all-zero ids are invalid), sampled with probability
    /// `sample`.
    #[inline]
    pub fn draw(rng: &mut fastrand::Rng, sample: f64) -> Self {
        TraceParent {
            trace_id: rng.u128(1..),
            parent_id: rng.u64(1..),
            sampled: sample >= 1.0 || (sample > 0.0 && rng.f64() < sample),
        }
    }

    /// The header's value, e.g. `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
    #[inline]
    pub fn header_value(&self) -> [u8; TRACEPARENT_LEN] {
        let mut out = [b'-'; TRACEPARENT_LEN];
        out[..2].copy_from_slice(b"00");
        write_hex(&mut out[3..35], self.trace_id);
        write_hex(&mut out[36..52], u128::from(self.parent_id));
        out[53..].copy_from_slice(if self.sampled { b"01" } else { b"00" });
        out
    }

    /// The trace id of a `traceparent` value (a scenario's own header), or `None` when the
    /// value is not a valid one.
    pub fn trace_id_of(value: &[u8]) -> Option<u128> {
        let text = std::str::from_utf8(value).ok()?;
        let mut parts = text.trim().split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        if version.len() != 2 || version == "ff" || trace.len() != 32 {
            return None;
        }
        if !trace
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        u128::from_str_radix(trace, 16).ok().filter(|id| *id != 0)
    }
}

/// Writes the low `out.len()` hex digits of `value` into `out`, most significant first.
#[inline]
fn write_hex(out: &mut [u8], mut value: u128) {
    for digit in out.iter_mut().rev() {
        *digit = HEX[(value & 0xf) as usize];
        value >>= 4;
    }
}

/// A trace id as its 32 lowercase hex digits, without allocating.
#[derive(Debug, Clone, Copy)]
pub struct Hex32([u8; 32]);

impl Hex32 {
    pub fn new(id: u128) -> Self {
        let mut out = [0u8; 32];
        write_hex(&mut out, id);
        Hex32(out)
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_the_w3c_format_and_its_trace_id_reads_back() {
        let context = TraceParent {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            parent_id: 0x00f067aa0ba902b7,
            sampled: true,
        };
        let value = context.header_value();
        assert_eq!(
            std::str::from_utf8(&value).unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(TraceParent::trace_id_of(&value), Some(context.trace_id));
        assert_eq!(
            Hex32::new(context.trace_id).as_str(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let unsampled = TraceParent {
            sampled: false,
            ..context
        };
        assert!(unsampled.header_value().ends_with(b"-00"));
    }

    #[test]
    fn invalid_values_have_no_trace_id() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f35-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::trace_id_of(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn sampling_follows_the_fraction() {
        let mut rng = fastrand::Rng::with_seed(7);
        let all = (0..1000).all(|_| TraceParent::draw(&mut rng, 1.0).sampled);
        let none = (0..1000).all(|_| !TraceParent::draw(&mut rng, 0.0).sampled);
        let some = (0..1000)
            .filter(|_| TraceParent::draw(&mut rng, 0.5).sampled)
            .count();
        assert!(all && none);
        assert!((350..650).contains(&some), "{some}");
    }
}

//! Reading a response body to its end: by `Content-Length`, chunked (with trailers), or until
//! the connection closes. Usually only where the body ends matters, and whether the connection
//! ended exactly there (so it can carry the next request); the bytes are kept only when the
//! op's checks or extractions read them (`keep`).

use super::super::connect::Io;
use super::read_more;
use super::wire::Framing;
use crate::record::ErrorClass;
use crate::workload::check::Captured;

/// Reads the body, into `keep` when given, else discarding it; `buf` holds what was read
/// after the head. Returns whether the connection ended exactly at the end of the body (no
/// stray bytes), i.e. can be reused.
pub(super) async fn read_body(
    io: &mut Box<dyn Io>,
    buf: &mut Vec<u8>,
    framing: Framing,
    mut keep: Option<&mut Captured>,
) -> Result<bool, ErrorClass> {
    let mut keep_bytes = |bytes: &[u8]| {
        if let Some(keep) = keep.as_deref_mut() {
            keep.push_body(bytes);
        }
    };
    match framing {
        Framing::Empty => Ok(buf.is_empty()),
        Framing::Length(length) => {
            let mut remaining = length;
            loop {
                let have = buf.len() as u64;
                if have >= remaining {
                    keep_bytes(&buf[..remaining as usize]);
                    return Ok(have == remaining);
                }
                keep_bytes(buf);
                remaining -= have;
                buf.clear();
                if read_more(io, buf).await.map_err(body_error)? == 0 {
                    return Err(ErrorClass::Body);
                }
            }
        }
        Framing::Chunked => {
            let mut chunks = Chunked::default();
            loop {
                let used = chunks
                    .feed(buf, &mut keep_bytes)
                    .map_err(|()| ErrorClass::Body)?;
                buf.drain(..used);
                if chunks.done() {
                    return Ok(buf.is_empty());
                }
                if read_more(io, buf).await.map_err(body_error)? == 0 {
                    return Err(ErrorClass::Body);
                }
            }
        }
        Framing::UntilClose => loop {
            keep_bytes(buf);
            buf.clear();
            if read_more(io, buf).await.map_err(body_error)? == 0 {
                return Ok(false);
            }
        },
    }
}

/// Once the headers have arrived, a broken connection is a broken body (timeouts stay timeouts).
fn body_error(class: ErrorClass) -> ErrorClass {
    match class {
        ErrorClass::Timeout => ErrorClass::Timeout,
        _ => ErrorClass::Body,
    }
}

/// A chunked-body decoder that finds the end — chunk sizes, data, trailers — and hands the
/// data to a sink.
#[derive(Debug, Default)]
struct Chunked {
    state: ChunkState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

impl Chunked {
    /// Consumes what it can of `buf`, passing chunk data to `data`; returns how many bytes it
    /// used. `Err` on malformed input.
    fn feed(&mut self, buf: &[u8], data: &mut impl FnMut(&[u8])) -> Result<usize, ()> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        pos += used;
                        self.state = ChunkState::Trailers;
                    }
                    Ok(httparse::Status::Complete((used, size))) => {
                        pos += used;
                        self.state = ChunkState::Data(size);
                    }
                    Ok(httparse::Status::Partial) => return Ok(pos),
                    Err(_) => return Err(()),
                },
                ChunkState::Data(size) => {
                    let take = size.min(rest.len() as u64);
                    data(&rest[..take as usize]);
                    pos += take as usize;
                    if take < size {
                        self.state = ChunkState::Data(size - take);
                        return Ok(pos);
                    }
                    self.state = ChunkState::DataEnd;
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(());
                    }
                    pos += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => match rest.windows(2).position(|w| w == b"\r\n") {
                    // An empty line ends the trailers (and the body).
                    Some(0) => {
                        pos += 2;
                        self.state = ChunkState::Done;
                    }
                    Some(line) => pos += line + 2,
                    None => return Ok(pos),
                },
                ChunkState::Done => return Ok(pos),
            }
        }
    }

    fn done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_end_where_they_end_in_any_split() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n";
        for split in 0..body.len() {
            let mut chunks = Chunked::default();
            let mut data = Vec::new();
            let mut sink = |bytes: &[u8]| data.extend_from_slice(bytes);
            let mut buf = body[..split].to_vec();
            let used = chunks.feed(&buf, &mut sink).unwrap();
            buf.drain(..used);
            buf.extend_from_slice(&body[split..]);
            let used = chunks.feed(&buf, &mut sink).unwrap();
            assert!(chunks.done(), "split at {split}");
            assert_eq!(used, buf.len(), "split at {split}");
            assert_eq!(data, b"hello, world", "split at {split}");
        }
        let mut ignore = |_: &[u8]| {};
        assert!(Chunked::default().feed(b"zz\r\n", &mut ignore).is_err());
        assert!(Chunked::default().feed(b"2\r\nabXY", &mut ignore).is_err());
    }
}

//! gRPC unary calls over the HTTP/2 transport, from a `.proto` file read at run time.
//!
//! With `--proto FILE`, a request whose path is `/package.Service/Method` is a gRPC call: its
//! body, rendered as for any request (JSON with templated fields), is turned into the method's
//! input message by the descriptors `protox` (a pure-Rust `.proto` compiler) built from the
//! file, encoded with `prost-reflect` and sent in one length-prefixed gRPC frame with
//! `content-type: application/grpc`. No code is generated for the user's service. The reply's
//! `grpc-status` and `grpc-message` (trailers, or the headers of a trailers-only reply) go into
//! the exchange; a status other than 0 (OK) makes the row a `grpc_status` error. When the op's
//! checks read the body, the reply message is decoded and handed to them as JSON, so checks and
//! extractions are written as for JSON bodies.
//!
//! This module owns the descriptors, the encoding and the reading of the status; the stream
//! itself, timing and byte counts are `http2`'s.

use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, TE};
use hyper::Uri;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};

use crate::record::ErrorClass;
use crate::workload::template::BodyBytes;

/// Length of a gRPC message frame's prefix: a compression flag and a big-endian length.
const FRAME_PREFIX_BYTES: usize = 5;

/// The services a run calls, compiled from its `.proto` file.
#[derive(Clone)]
pub struct Codec {
    /// The file and import paths as given (kept for run.json and for equality).
    pub proto: PathBuf,
    pub includes: Vec<PathBuf>,
    pool: DescriptorPool,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "grpc::Codec({})", self.proto.display())
    }
}

impl PartialEq for Codec {
    fn eq(&self, other: &Self) -> bool {
        self.proto == other.proto && self.includes == other.includes
    }
}

impl Eq for Codec {}

impl Codec {
    /// Compiles `proto`, resolving its imports in `includes` and then in the file's own
    /// directory. The error is one sentence for the user.
    pub fn load(proto: &Path, includes: &[PathBuf]) -> Result<Self, String> {
        let dir = proto
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut paths: Vec<PathBuf> = includes.to_vec();
        paths.push(dir.to_path_buf());
        let name = proto.file_name().map(PathBuf::from).unwrap_or_default();
        let fail = |e: &dyn std::fmt::Display| {
            format!(
                "--proto {}: {e}; give a readable .proto file (and --import-path DIR for its imports)",
                proto.display()
            )
        };
        let mut compiler = protox::Compiler::new(paths).map_err(|e| fail(&e))?;
        compiler.include_imports(true);
        compiler.open_file(&name).map_err(|e| fail(&e))?;
        Ok(Codec {
            proto: proto.to_path_buf(),
            includes: includes.to_vec(),
            pool: compiler.descriptor_pool(),
        })
    }

    /// The method a request path names (`/package.Service/Method`), if the file has it.
    pub fn method(&self, path: &str) -> Option<MethodDescriptor> {
        let (service, method) = path.strip_prefix('/')?.split_once('/')?;
        self.pool
            .get_service_by_name(service)?
            .methods()
            .find(|m| m.name() == method)
    }

    /// Checks that `method` (`package.Service/Method`) is in the file: the one sentence
    /// otherwise names the methods it has.
    pub fn check_method(&self, method: &str) -> Result<(), String> {
        if self.method(&format!("/{method}")).is_some() {
            return Ok(());
        }
        Err(format!("--grpc {method} {}", self.not_a_method()))
    }

    /// "is not a method of demo.proto; it has: demo.Greeter/Hello, …".
    pub fn not_a_method(&self) -> String {
        let known: Vec<String> = self
            .pool
            .services()
            .flat_map(|s| {
                s.methods()
                    .map(|m| format!("{}/{}", s.full_name(), m.name()))
                    .collect::<Vec<_>>()
            })
            .collect();
        format!(
            "is not a method of {}; it has: {}",
            self.proto.display(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
    }
}

/// One stream's gRPC state: the method and the request last encoded, reused while the next
/// request is the same (the common case: a body without templated fields), and the reply
/// body's bytes while the op's checks need it.
#[derive(Default)]
pub struct Calls {
    method: Option<(Uri, MethodDescriptor)>,
    request: Option<(BodyBytes, Bytes)>,
    /// The reply body, kept only when the op's checks read it.
    pub reply: Vec<u8>,
}

/// A call about to be sent: its method and its request as a gRPC frame.
pub struct Call {
    pub method: MethodDescriptor,
    framed: [Bytes; 1],
}

impl Call {
    /// Makes `head` this call's request (a POST with gRPC's headers); returns its body.
    pub fn onto(&self, head: &mut hyper::Request<()>) -> &[Bytes] {
        set_headers(head.headers_mut(), self.framed[0].len());
        *head.method_mut() = hyper::Method::POST;
        &self.framed
    }
}

impl Calls {
    /// The call a request to `path` with `body` (JSON) makes; `None` when `path` names no
    /// method of the file (the request goes out as plain HTTP/2). A body that is not the
    /// method's input message is an `other` row: the client's input is at fault.
    pub fn prepare(
        &mut self,
        codec: &Codec,
        path: &Uri,
        body: &BodyBytes,
    ) -> Result<Option<Call>, ErrorClass> {
        let method = match &self.method {
            Some((last, method)) if last == path => method.clone(),
            _ => {
                let Some(method) = codec.method(path.path()) else {
                    return Ok(None);
                };
                self.method = Some((path.clone(), method.clone()));
                self.request = None;
                method
            }
        };
        let framed = match &self.request {
            Some((last, framed)) if last == body => framed.clone(),
            _ => {
                let framed =
                    encode(&method.input(), &body.concat()).map_err(|_| ErrorClass::Other)?;
                self.request = Some((body.clone(), framed.clone()));
                framed
            }
        };
        Ok(Some(Call {
            method,
            framed: [framed],
        }))
    }
}

/// The request headers of a call: gRPC's content type, `te: trailers`, the frame's length.
fn set_headers(headers: &mut HeaderMap, framed_bytes: usize) {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(framed_bytes));
}

/// A message as one gRPC frame: uncompressed, length-prefixed.
fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(FRAME_PREFIX_BYTES + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// The request body (JSON; empty means the default message) as a gRPC frame of `input`; the
/// error says why the JSON is not a valid `input`.
pub fn encode(input: &MessageDescriptor, json: &[u8]) -> Result<Bytes, String> {
    let message = if json.iter().all(u8::is_ascii_whitespace) {
        DynamicMessage::new(input.clone())
    } else {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let message = DynamicMessage::deserialize(input.clone(), &mut deserializer)
            .map_err(|e| e.to_string())?;
        deserializer.end().map_err(|e| e.to_string())?;
        message
    };
    Ok(frame(&message.encode_to_vec()))
}

/// `input`'s fields with their default values as JSON (`{"name":"","failWith":0}`): the shape
/// of a body the method takes, for the hint when the one given is not (prost-reflect writes
/// it, with proto3's JSON names).
pub fn example_json(input: &MessageDescriptor) -> String {
    let options = prost_reflect::SerializeOptions::new().skip_default_fields(false);
    let mut out = Vec::new();
    let written = DynamicMessage::new(input.clone())
        .serialize_with_options(&mut serde_json::Serializer::new(&mut out), &options);
    match written {
        Ok(()) => String::from_utf8(out).unwrap_or_else(|_| "{}".into()),
        Err(_) => "{}".into(),
    }
}

/// The first message of a reply body (gRPC frames) as JSON, for the op's checks; `None` when
/// the body is not a frame of `output` (a compressed reply is not decoded).
pub fn decode_json(output: &MessageDescriptor, body: &[u8]) -> Option<Vec<u8>> {
    let (&[flag, a, b, c, d], rest) = body.split_first_chunk::<FRAME_PREFIX_BYTES>()?;
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    if flag != 0 || rest.len() < len {
        return None;
    }
    let message = DynamicMessage::decode(output.clone(), &rest[..len]).ok()?;
    serde_json::to_vec(&message).ok()
}

/// The call's status from the reply's trailers (or, for a trailers-only reply, its headers):
/// the code and the message (percent-decoded). A reply without `grpc-status` is `protocol`.
pub fn status(fields: &HeaderMap) -> Result<(u8, Option<String>), ErrorClass> {
    let code = fields
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u8>().ok())
        .ok_or(ErrorClass::Protocol)?;
    let message = fields
        .get("grpc-message")
        .map(|v| percent_decode(v.as_bytes()))
        .filter(|m| !m.is_empty());
    Ok((code, message))
}

/// Puts the call's status into `out`; a status other than OK is the row's error.
pub fn settle(
    status: Result<(u8, Option<String>), ErrorClass>,
    out: &mut super::Exchange,
) -> Result<(), ErrorClass> {
    let (code, message) = status?;
    out.grpc_status = Some(code);
    out.grpc_message = message.as_deref().map(crate::record::grpc::intern);
    match code {
        0 => Ok(()),
        _ => Err(ErrorClass::GrpcStatus),
    }
}

/// `grpc-message` is percent-encoded UTF-8 (gRPC over HTTP/2, "Responses").
fn percent_decode(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (text[i], text.get(i + 1), text.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> (tempfile::TempDir, Codec) {
        let dir = tempfile::tempdir().unwrap();
        let proto = dir.path().join("echo.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; package t; \
             message Req { string name = 1; int32 n = 2; } \
             message Rep { string text = 1; } \
             service Echo { rpc Say (Req) returns (Rep); }",
        )
        .unwrap();
        let codec = Codec::load(&proto, &[]).unwrap();
        (dir, codec)
    }

    #[test]
    fn json_becomes_a_framed_message_of_the_methods_input() {
        let (_dir, codec) = codec();
        let method = codec.method("/t.Echo/Say").unwrap();
        let framed = encode(&method.input(), br#"{"name": "ab", "n": 3}"#).unwrap();
        // Field 1 (string "ab"), field 2 (varint 3), after a 5-byte prefix saying 6 bytes.
        assert_eq!(&framed[..], &[0, 0, 0, 0, 6, 0x0a, 2, b'a', b'b', 0x10, 3]);
        assert!(encode(&method.input(), br#"{"nope": 1}"#).is_err());
        assert_eq!(&encode(&method.input(), b"").unwrap()[..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_reply_frame_reads_back_as_json() {
        let (_dir, codec) = codec();
        let output = codec.method("/t.Echo/Say").unwrap().output();
        let json = decode_json(&output, &[0, 0, 0, 0, 4, 0x0a, 2, b'h', b'i']).unwrap();
        assert_eq!(json, br#"{"text":"hi"}"#);
        assert!(decode_json(&output, &[0, 0, 0, 0, 9, 0x0a]).is_none());
    }

    #[test]
    fn unknown_methods_and_bad_files_are_one_sentence() {
        let (_dir, codec) = codec();
        assert!(codec.check_method("t.Echo/Say").is_ok());
        let error = codec.check_method("t.Echo/Shout").unwrap_err();
        assert!(error.contains("it has: t.Echo/Say"), "{error}");
        let error = Codec::load(Path::new("/nonexistent/x.proto"), &[]).unwrap_err();
        assert!(
            error.starts_with("--proto /nonexistent/x.proto: "),
            "{error}"
        );
    }

    #[test]
    fn the_status_and_its_percent_encoded_message_are_read() {
        let mut fields = HeaderMap::new();
        assert_eq!(status(&fields), Err(ErrorClass::Protocol));
        fields.insert("grpc-status", HeaderValue::from_static("14"));
        fields.insert("grpc-message", HeaderValue::from_static("no%20way%zz"));
        assert_eq!(status(&fields), Ok((14, Some("no way%zz".to_string()))));
    }
}

//! A scenario's gRPC calls, checked against `--proto` before the run: a request whose path
//! looks like a call (`/package.Service/Method`) must name a unary method of the file, and
//! its body — rendered once with drawn field values, unless it uses extracted ones — must be
//! that method's input message in JSON. Each mistake is one sentence naming the request, where it would otherwise become
//! rows of `other`, `reset` or `protocol` with no word of why. A call goes out as a POST
//! whatever the scenario's `method`, so its op label says POST. What it does not do: send.

use hyper::Method;

use super::ConfigError;
use crate::transport::grpc::{self, Codec};
use crate::workload::secret::redact_target;
use crate::workload::Workload;

/// Checks every request of `workload` that calls, or looks like it calls, a method of
/// `codec`'s file, and makes each call a POST.
pub(super) fn check_calls(workload: &mut Workload, codec: &Codec) -> Result<(), ConfigError> {
    let values = match workload.phase_fields.first() {
        Some(fields) => fields.draw(&mut fastrand::Rng::with_seed(1)),
        None => Vec::new(),
    };
    for (i, template) in workload.templates.iter_mut().enumerate() {
        let name = workload
            .request_names
            .get(i)
            .map_or_else(|| template.label.clone(), |n| format!("request '{n}'"));
        let prepared = template.render(&values);
        let path = prepared.uri.path();
        let Some(method) = codec.method(path) else {
            if looks_like_a_call(path) {
                return Err(ConfigError::Grpc(format!(
                    "{name}: {} {}; fix the path, or give the .proto that has it",
                    &path[1..],
                    codec.not_a_method()
                )));
            }
            continue;
        };
        if method.is_client_streaming() || method.is_server_streaming() {
            return Err(ConfigError::Grpc(format!(
                "{name}: {} is a streaming method, and loadgen calls unary methods only (one \
                 request, one reply); call a unary method",
                method.full_name()
            )));
        }
        // A body with extracted values is only known once they are (an empty one now).
        let known = template.session_fields.is_empty();
        if let (true, Err(why)) = (
            known,
            grpc::encode(&method.input(), &prepared.body.concat()),
        ) {
            return Err(ConfigError::Grpc(format!(
                "{name}: its body is not a {} message in JSON ({why}); write its fields with \
                 the .proto's names and types (a string field takes a quoted value, e.g. \
                 \"{{n|str}}\")",
                method.input().full_name()
            )));
        }
        if template.method != Method::POST {
            let default_label = format!(
                "{} {}",
                template.method,
                redact_target(template.path.source())
            );
            if template.label == default_label {
                template.label = format!("POST {}", redact_target(template.path.source()));
            }
            template.method = Method::POST;
        }
    }
    Ok(())
}

/// `/a.B/C`: two segments, the first with a dot — the shape of a gRPC call's path.
fn looks_like_a_call(path: &str) -> bool {
    let mut segments = path.trim_start_matches('/').split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some(service), Some(method), None) => service.contains('.') && !method.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_path_has_a_dotted_service_and_a_method() {
        assert!(looks_like_a_call("/demo.Greeter/Hello"));
        assert!(!looks_like_a_call("/albums/1"));
        assert!(!looks_like_a_call("/static/app.js"));
        assert!(!looks_like_a_call("/a.b/c/d"));
    }
}

//! The `grpc-message` texts of a process's gRPC rows, each kept once.
//!
//! A row is a small `Copy` value; the message a server sent with a non-OK status is text, and
//! most runs see a handful of distinct ones. A row holds the message's index in this table,
//! and the writer turns it back into text for the `grpc_message` column. The table is capped:
//! past [`MAX_MESSAGES`] distinct texts, further new ones share one entry that says so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Distinct messages kept per process.
pub const MAX_MESSAGES: usize = 4096;

/// The text that stands for every message past the cap.
pub const TOO_MANY: &str = "(more distinct grpc-message texts than loadgen keeps)";

#[derive(Default)]
struct Table {
    texts: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u16>,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The index of `message` (added if new).
pub fn intern(message: &str) -> u16 {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = table.index.get(message) {
        return i;
    }
    let text: Arc<str> = if table.texts.len() + 1 >= MAX_MESSAGES {
        Arc::from(TOO_MANY)
    } else {
        Arc::from(message)
    };
    if let Some(&i) = table.index.get(&text) {
        return i;
    }
    let i = table.texts.len() as u16;
    table.texts.push(text.clone());
    table.index.insert(text, i);
    i
}

/// The message at `index`; `None` for an index [`intern`] never gave.
pub fn text(index: u16) -> Option<Arc<str>> {
    let table = table().lock().unwrap_or_else(|e| e.into_inner());
    table.texts.get(usize::from(index)).cloned()
}

/// gRPC's status codes by number, as its spec names them (grpc/grpc doc/statuscodes.md).
const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// `14 UNAVAILABLE "no bob, ever"` — a failed call's status by its number and name, and the
/// server's message (run.json `summary.failed_grpc`'s keys, the console's failures): the
/// number alone reads like an HTTP status.
pub fn failure_text(code: u8, message: Option<u16>) -> String {
    let name = CODE_NAMES
        .get(usize::from(code))
        .unwrap_or(&"(not a gRPC code)");
    match message.and_then(text).filter(|m| !m.is_empty()) {
        Some(m) => format!("{code} {name} {m:?}"),
        None => format!("{code} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_named_by_its_code_and_message() {
        let m = intern("no bob, ever (a test)");
        assert_eq!(
            failure_text(14, Some(m)),
            "14 UNAVAILABLE \"no bob, ever (a test)\""
        );
        assert_eq!(failure_text(5, None), "5 NOT_FOUND");
        assert_eq!(failure_text(40, None), "40 (not a gRPC code)");
    }

    #[test]
    fn a_message_is_kept_once_and_read_back() {
        let a = intern("deadline exceeded in test");
        assert_eq!(intern("deadline exceeded in test"), a);
        let b = intern("another text in test");
        assert_ne!(a, b);
        assert_eq!(text(b).as_deref(), Some("another text in test"));
    }
}

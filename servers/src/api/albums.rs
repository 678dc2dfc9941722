//! The albums API: `GET /albums/{id}` and `POST /albums` (multipart `profile` + `image`).
//!
//! Albums are not stored: a GET answers a deterministic synthetic album for any well-formed
//! id, and a POST validates the profile, counts the image bytes as they stream past (the
//! image is never buffered) and hands out the next id. Keeping albums would make memory grow
//! with every request of a load test, which would then measure the allocator, not the server.

use std::sync::atomic::Ordering;

use http_body_util::BodyDataStream;
use hyper::header::CONTENT_TYPE;
use hyper::{HeaderMap, StatusCode};
use multer::{Constraints, Multipart, SizeLimit};
use serde::{Deserialize, Serialize};

use crate::reply::{self, Rejection, Reply, RequestBody};
use crate::state::AppState;

/// A whole multipart request (image included) may be at most this big; larger is a 413.
const MULTIPART_LIMIT_BYTES: usize = 64 * 1024 * 1024;
/// The profile is a few short strings; anything bigger is not a profile.
const PROFILE_LIMIT_BYTES: u64 = 64 * 1024;
/// Longer ids are rejected so a GET cannot make the server hash megabytes.
const MAX_ID_BYTES: usize = 64;

const ARTISTS: [&str; 8] = [
    "Sex Pistols",
    "Pink Floyd",
    "Joni Mitchell",
    "Talking Heads",
    "Kraftwerk",
    "Nina Simone",
    "The Clash",
    "Miles Davis",
];
const TITLES: [&str; 8] = [
    "Never Mind The Bollocks",
    "The Wall",
    "Blue",
    "Remain in Light",
    "Computer World",
    "Pastel Blues",
    "London Calling",
    "Kind of Blue",
];

#[derive(Serialize)]
struct AlbumInfo {
    artist: &'static str,
    title: &'static str,
    /// A string, as in the course API.
    year: String,
}

#[derive(Serialize)]
struct ImageMetaData {
    #[serde(rename = "albumID")]
    album_id: String,
    #[serde(rename = "imageSize")]
    image_size: String,
}

/// The `profile` part, as the course API types it (every field a string). Parsed only to
/// validate its shape, so the fields are never read.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Profile {
    artist: String,
    title: String,
    year: String,
}

/// The profile `--lenient` accepts: the year as a string or a number.
#[derive(Deserialize)]
#[allow(dead_code)]
struct LenientProfile {
    artist: String,
    title: String,
    year: Year,
}

#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum Year {
    Text(String),
    Number(i64),
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// FNV-1a: stable across runs and platforms (unlike `std`'s randomly keyed hasher), so the
/// same id always gets the same album.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(super) fn get(id: &str) -> Result<Reply, Rejection> {
    if !valid_id(id) {
        return Err(Rejection::bad_request(format!(
            "albumID must be 1 to {MAX_ID_BYTES} letters, digits, '-' or '_', got {id:?}"
        )));
    }
    let hash = fnv1a(id.as_bytes());
    let album = AlbumInfo {
        artist: ARTISTS[(hash % 8) as usize],
        title: TITLES[((hash >> 8) % 8) as usize],
        year: (1950 + (hash >> 16) % 75).to_string(),
    };
    Ok(reply::json(StatusCode::OK, &album))
}

pub(super) async fn post(
    headers: &HeaderMap,
    body: RequestBody,
    state: &AppState,
) -> Result<Reply, Rejection> {
    let image_size_bytes = parse(headers, body, state.lenient).await?;
    // Ids start at 1; Relaxed is enough, only uniqueness matters.
    let album_id = state.next_album_id.fetch_add(1, Ordering::Relaxed) + 1;
    Ok(reply::json(
        StatusCode::CREATED,
        &ImageMetaData {
            album_id: album_id.to_string(),
            image_size: image_size_bytes.to_string(),
        },
    ))
}

/// Validates the parts and returns the image size in bytes.
async fn parse(headers: &HeaderMap, body: RequestBody, lenient: bool) -> Result<u64, Rejection> {
    let boundary = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| multer::parse_boundary(v).ok())
        .ok_or_else(|| {
            Rejection::bad_request(
                "expected a multipart/form-data body (with a boundary) holding `profile` and `image` parts",
            )
        })?;
    let constraints = Constraints::new().size_limit(
        SizeLimit::new()
            .whole_stream(MULTIPART_LIMIT_BYTES as u64)
            .for_field("profile", PROFILE_LIMIT_BYTES),
    );
    let mut multipart =
        Multipart::with_constraints(BodyDataStream::new(body), boundary, constraints);

    let mut profile_seen = false;
    let mut image_size_bytes = None;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("profile") if profile_seen => {
                return Err(Rejection::bad_request("more than one `profile` part"));
            }
            Some("profile") => {
                let bytes = field.bytes().await.map_err(multipart_error)?;
                let what = "`profile` part (JSON with the strings artist, title and year)";
                if lenient {
                    reply::decode_json::<LenientProfile>(&bytes, what)?;
                } else {
                    reply::decode_json::<Profile>(&bytes, what)?;
                }
                profile_seen = true;
            }
            Some("image") if image_size_bytes.is_some() => {
                return Err(Rejection::bad_request("more than one `image` part"));
            }
            Some("image") => {
                let mut size_bytes = 0u64;
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    size_bytes += chunk.len() as u64;
                }
                image_size_bytes = Some(size_bytes);
            }
            // Other parts are ignored; multer skips what we do not read.
            _ => {}
        }
    }
    if !profile_seen {
        return Err(Rejection::bad_request("missing the `profile` part"));
    }
    image_size_bytes.ok_or_else(|| Rejection::bad_request("missing the `image` part"))
}

fn multipart_error(error: multer::Error) -> Rejection {
    match error {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            Rejection::too_large(error.to_string())
        }
        _ => Rejection::bad_request(format!("malformed multipart body: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_plain() {
        assert!(valid_id("7"));
        assert!(valid_id("a1-b_2"));
        assert!(!valid_id(""));
        assert!(!valid_id("a b"));
        assert!(!valid_id("%41"));
        assert!(!valid_id(&"9".repeat(MAX_ID_BYTES + 1)));
    }

    #[test]
    fn the_same_id_is_the_same_album() {
        assert_eq!(fnv1a(b"7"), fnv1a(b"7"));
        assert_ne!(fnv1a(b"7"), fnv1a(b"8"));
    }
}

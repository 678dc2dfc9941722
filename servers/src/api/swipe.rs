//! The swipe API (Twinder): `POST /swipe/{left|right}/` with `{"swiper", "swipee", "comment"}`.
//!
//! Validates the direction and the body and answers 201 with no body. An unknown direction
//! is a 400 (the path has the right shape, one of its values is wrong), not a 404. The body
//! is decoded into the course API's types (every field a string); `--lenient` also takes
//! numeric user ids. Swipes are not stored.

use hyper::StatusCode;
use serde::Deserialize;

use crate::reply::{self, Rejection, Reply, RequestBody};

/// The request body, as the course API types it. Parsed only to validate its shape, so the
/// fields are never read.
#[derive(Deserialize)]
#[allow(dead_code)]
struct SwipeDetails {
    swiper: String,
    swipee: String,
    comment: String,
}

/// The body `--lenient` accepts: user ids as strings or numbers.
#[derive(Deserialize)]
#[allow(dead_code)]
struct LenientSwipeDetails {
    swiper: UserId,
    swipee: UserId,
    comment: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum UserId {
    Text(String),
    Number(u64),
}

pub(super) async fn post(
    direction: &str,
    body: RequestBody,
    lenient: bool,
) -> Result<Reply, Rejection> {
    if direction != "left" && direction != "right" {
        return Err(Rejection::bad_request(format!(
            "swipe direction must be \"left\" or \"right\", got {direction:?}"
        )));
    }
    if lenient {
        reply::read_json::<LenientSwipeDetails>(body).await?;
    } else {
        reply::read_json::<SwipeDetails>(body).await?;
    }
    Ok(reply::empty(StatusCode::CREATED))
}

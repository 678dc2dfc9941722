//! The swipe API (Twinder): `POST /swipe/{left|right}/` with `{"swiper", "swipee", "comment"}`.
//!
//! Validates the direction and the body and answers 201 with no body. An unknown direction
//! is a 400 (the path has the right shape, one of its values is wrong), not a 404. Swipes are
//! not stored.

use hyper::body::Incoming;
use hyper::StatusCode;
use serde::Deserialize;

use crate::reply::{self, Rejection, Reply};

/// The request body. Parsed only to validate its shape, so the fields are never read.
#[derive(Deserialize)]
#[allow(dead_code)]
struct SwipeDetails {
    swiper: UserId,
    swipee: UserId,
    comment: String,
}

/// The course sends user ids as strings ("1234"); some clients send numbers. Both are fine.
#[derive(Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum UserId {
    Text(String),
    Number(u64),
}

pub(super) async fn post(direction: &str, body: Incoming) -> Result<Reply, Rejection> {
    if direction != "left" && direction != "right" {
        return Err(Rejection::bad_request(format!(
            "swipe direction must be \"left\" or \"right\", got {direction:?}"
        )));
    }
    reply::read_json::<SwipeDetails>(body).await?;
    Ok(reply::empty(StatusCode::CREATED))
}

//! The skiers API: `POST /skiers/{resortID}/seasons/{seasonID}/days/{dayID}/skiers/{skierID}`.
//!
//! Validates the path ids and the `{"time", "liftID"}` body and answers 201 with no body, as
//! the course API does. Lift rides are not stored: a load test would only grow memory, and
//! no endpoint here reads them back. Value ranges of `time` and `liftID` are not checked
//! (any integer is accepted) because clients of different course years use different ones.

use hyper::StatusCode;
use serde::Deserialize;

use super::{day_of_year, integer};
use crate::reply::{self, Rejection, Reply, RequestBody};

/// The request body. Parsed only to validate its shape, so the fields are never read.
#[derive(Deserialize)]
#[allow(dead_code)]
struct LiftRide {
    time: i64,
    #[serde(rename = "liftID")]
    lift_id: i64,
}

pub(super) async fn post(
    resort: &str,
    season: &str,
    day: &str,
    skier: &str,
    body: RequestBody,
) -> Result<Reply, Rejection> {
    integer::<u64>("resortID", resort)?;
    integer::<u64>("seasonID", season)?;
    day_of_year("dayID", day)?;
    if integer::<u64>("skierID", skier)? == 0 {
        return Err(Rejection::bad_request(
            "skierID must be at least 1, got \"0\"",
        ));
    }
    reply::read_json::<LiftRide>(body).await?;
    Ok(reply::empty(StatusCode::CREATED))
}

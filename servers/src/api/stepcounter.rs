//! The stepcounter API, over the small in-memory store in `state::steps`.
//!
//! - `POST /stepcounter/{userID}/{day}/{timeInterval}/{stepCount}` adds `stepCount` to the
//!   user's total for `day` (1..=366) and answers 201 with no body; `timeInterval` must be a
//!   non-negative integer but is otherwise not used.
//! - `GET /stepcounter/single/{userID}/{day}` answers that day's total.
//! - `GET /stepcounter/current/{userID}` answers the total of the user's latest recorded day.
//!
//! A user or day with nothing recorded answers 200 with `stepCount` 0 (and `"day": null` for
//! `current`): a load test that reads ids it never wrote sees successes, as it would from a
//! real service where nobody walked. The store is capped at about a million (user, day)
//! entries: beyond that, new entries are answered 201 but not kept, and counted in
//! `loadgen_server_stepcounter_dropped_total`, so a long run cannot exhaust memory.

use hyper::StatusCode;
use serde::Serialize;

use super::{day_of_year, integer};
use crate::reply::{self, Rejection, Reply};
use crate::state::{AppState, StepStore};

#[derive(Serialize)]
struct StepCount {
    #[serde(rename = "userID")]
    user_id: u64,
    day: Option<u16>,
    #[serde(rename = "stepCount")]
    step_count: u64,
}

pub(super) fn post(
    user: &str,
    day: &str,
    interval: &str,
    steps: &str,
    state: &AppState,
) -> Result<Reply, Rejection> {
    let user = integer::<u64>("userID", user)?;
    let day = day_of_year("day", day)?;
    integer::<u32>("timeInterval", interval)?;
    let steps = integer::<u64>("stepCount", steps)?;
    if !state.steps.add(user, day, steps) {
        state.metrics.stepcounter_dropped();
    }
    Ok(reply::empty(StatusCode::CREATED))
}

pub(super) fn current(user: &str, store: &StepStore) -> Result<Reply, Rejection> {
    let user_id = integer::<u64>("userID", user)?;
    let (day, step_count) = match store.current(user_id) {
        Some((day, steps)) => (Some(day), steps),
        None => (None, 0),
    };
    Ok(reply::json(
        StatusCode::OK,
        &StepCount {
            user_id,
            day,
            step_count,
        },
    ))
}

pub(super) fn single(user: &str, day: &str, store: &StepStore) -> Result<Reply, Rejection> {
    let user_id = integer::<u64>("userID", user)?;
    let day = day_of_year("day", day)?;
    Ok(reply::json(
        StatusCode::OK,
        &StepCount {
            user_id,
            day: Some(day),
            step_count: store.total(user_id, day),
        },
    ))
}

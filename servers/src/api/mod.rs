//! The course APIs: one file per service (albums, skiers, swipe, stepcounter), dispatched here.
//!
//! Handlers check the method, validate path parameters and bodies, and build the response.
//! They know nothing of the knobs (service time, workers, injected errors) or of counting;
//! the server wraps every API call with those, so each handler stays a plain function of
//! its request and the [`AppState`] the APIs share (which lives below both, in `state`).

mod albums;
mod skiers;
mod stepcounter;
mod swipe;

use std::str::FromStr;

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::StatusCode;

use crate::reply::{self, Rejection, Reply, RequestBody};
use crate::router::Matched;
use crate::state::AppState;

const HELLO: &[u8] = b"hello, world\n";

/// Answers one request whose route is already resolved.
pub(crate) async fn handle(
    matched: Matched<'_>,
    parts: &Parts,
    body: RequestBody,
    state: &AppState,
) -> Reply {
    let route = matched.route();
    if !route.allows(&parts.method) {
        if let Some(allowed) = route.method() {
            return reply::method_not_allowed(&allowed);
        }
    }
    let result = match matched {
        Matched::Root => Ok(reply::text(StatusCode::OK, Bytes::from_static(HELLO))),
        Matched::Metrics => Ok(reply::prometheus(state.metrics.render())),
        Matched::AlbumsGet { id } => albums::get(id),
        // Boxed so the multipart parser's large state does not inflate every request's future.
        Matched::AlbumsPost => Box::pin(albums::post(&parts.headers, body, state)).await,
        Matched::Skiers {
            resort,
            season,
            day,
            skier,
        } => skiers::post(resort, season, day, skier, body).await,
        Matched::Swipe { direction } => swipe::post(direction, body, state.lenient).await,
        Matched::StepcounterPost {
            user,
            day,
            interval,
            steps,
        } => stepcounter::post(user, day, interval, steps, state),
        Matched::StepcounterCurrent { user } => stepcounter::current(user, &state.steps),
        Matched::StepcounterSingle { user, day } => stepcounter::single(user, day, &state.steps),
        Matched::NotFound => Ok(reply::not_found(parts.uri.path())),
    };
    result.unwrap_or_else(Reply::from)
}

/// A path parameter that must be an integer of type `T` (unsigned types reject negatives).
fn integer<T: FromStr>(name: &str, raw: &str) -> Result<T, Rejection> {
    raw.parse().map_err(|_| {
        Rejection::bad_request(format!(
            "{name} must be a non-negative integer, got {raw:?}"
        ))
    })
}

/// A day of the year, 1..=366, as in the skiers and stepcounter APIs.
fn day_of_year(name: &str, raw: &str) -> Result<u16, Rejection> {
    match raw.parse::<u16>() {
        Ok(day @ 1..=366) => Ok(day),
        _ => Err(Rejection::bad_request(format!(
            "{name} must be an integer in 1..=366, got {raw:?}"
        ))),
    }
}

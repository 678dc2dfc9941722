//! Hand routing: turn a request path into a [`Matched`] route with its raw path parameters.
//!
//! Routing is a split on `/` and a slice pattern match, with no allocation, so `GET /` costs
//! almost nothing. This module only decides *which* endpoint a path names; it does not check
//! the method, parse or validate parameters (a malformed id is the handler's `400`, not a
//! `404`), or touch bodies.

use hyper::Method;

/// Every endpoint the server knows, plus `NotFound`. The index is the row in the metrics table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Root,
    Metrics,
    AlbumsGet,
    AlbumsPost,
    Skiers,
    Swipe,
    StepcounterPost,
    StepcounterCurrent,
    StepcounterSingle,
    NotFound,
}

impl Route {
    pub(crate) const ALL: [Route; 10] = [
        Route::Root,
        Route::Metrics,
        Route::AlbumsGet,
        Route::AlbumsPost,
        Route::Skiers,
        Route::Swipe,
        Route::StepcounterPost,
        Route::StepcounterCurrent,
        Route::StepcounterSingle,
        Route::NotFound,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The `route` label in `/metrics`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Route::Root => "root",
            Route::Metrics => "metrics",
            Route::AlbumsGet => "albums_get",
            Route::AlbumsPost => "albums_post",
            Route::Skiers => "skiers_post",
            Route::Swipe => "swipe_post",
            Route::StepcounterPost => "stepcounter_post",
            Route::StepcounterCurrent => "stepcounter_current",
            Route::StepcounterSingle => "stepcounter_single",
            Route::NotFound => "not_found",
        }
    }

    /// The one method each path accepts (GET routes also take HEAD); `None` for `NotFound`,
    /// which answers 404 whatever the method.
    pub(crate) fn method(self) -> Option<Method> {
        match self {
            Route::Root
            | Route::Metrics
            | Route::AlbumsGet
            | Route::StepcounterCurrent
            | Route::StepcounterSingle => Some(Method::GET),
            Route::AlbumsPost | Route::Skiers | Route::Swipe | Route::StepcounterPost => {
                Some(Method::POST)
            }
            Route::NotFound => None,
        }
    }

    pub(crate) fn allows(self, method: &Method) -> bool {
        match self.method() {
            Some(Method::GET) => method == Method::GET || method == Method::HEAD,
            Some(allowed) => *method == allowed,
            None => true,
        }
    }
}

/// A route and its path parameters, still as the raw text from the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matched<'a> {
    Root,
    Metrics,
    AlbumsGet {
        id: &'a str,
    },
    AlbumsPost,
    Skiers {
        resort: &'a str,
        season: &'a str,
        day: &'a str,
        skier: &'a str,
    },
    Swipe {
        direction: &'a str,
    },
    StepcounterPost {
        user: &'a str,
        day: &'a str,
        interval: &'a str,
        steps: &'a str,
    },
    StepcounterCurrent {
        user: &'a str,
    },
    StepcounterSingle {
        user: &'a str,
        day: &'a str,
    },
    NotFound,
}

impl Matched<'_> {
    pub(crate) fn route(&self) -> Route {
        match self {
            Matched::Root => Route::Root,
            Matched::Metrics => Route::Metrics,
            Matched::AlbumsGet { .. } => Route::AlbumsGet,
            Matched::AlbumsPost => Route::AlbumsPost,
            Matched::Skiers { .. } => Route::Skiers,
            Matched::Swipe { .. } => Route::Swipe,
            Matched::StepcounterPost { .. } => Route::StepcounterPost,
            Matched::StepcounterCurrent { .. } => Route::StepcounterCurrent,
            Matched::StepcounterSingle { .. } => Route::StepcounterSingle,
            Matched::NotFound => Route::NotFound,
        }
    }
}

/// The longest route (`/skiers/…`) has eight segments; anything longer is a 404.
const MAX_SEGMENTS: usize = 8;

/// Matches a path (no query string). One trailing slash is ignored everywhere, because the
/// course clients disagree on it (`/swipe/left/` vs `/swipe/left`).
pub(crate) fn resolve(path: &str) -> Matched<'_> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Matched::Root;
    }
    let mut segments = [""; MAX_SEGMENTS];
    let mut count = 0;
    for segment in trimmed.split('/') {
        if count == MAX_SEGMENTS {
            return Matched::NotFound;
        }
        segments[count] = segment;
        count += 1;
    }
    match segments[..count] {
        ["metrics"] => Matched::Metrics,
        ["albums"] => Matched::AlbumsPost,
        ["albums", id] => Matched::AlbumsGet { id },
        ["skiers", resort, "seasons", season, "days", day, "skiers", skier] => Matched::Skiers {
            resort,
            season,
            day,
            skier,
        },
        ["swipe", direction] => Matched::Swipe { direction },
        ["stepcounter", "current", user] => Matched::StepcounterCurrent { user },
        ["stepcounter", "single", user, day] => Matched::StepcounterSingle { user, day },
        ["stepcounter", user, day, interval, steps] => Matched::StepcounterPost {
            user,
            day,
            interval,
            steps,
        },
        _ => Matched::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_and_its_parameters() {
        assert_eq!(resolve("/"), Matched::Root);
        assert_eq!(resolve("/metrics"), Matched::Metrics);
        assert_eq!(resolve("/albums"), Matched::AlbumsPost);
        assert_eq!(resolve("/albums/7"), Matched::AlbumsGet { id: "7" });
        assert_eq!(
            resolve("/skiers/1/seasons/2019/days/3/skiers/42"),
            Matched::Skiers {
                resort: "1",
                season: "2019",
                day: "3",
                skier: "42"
            }
        );
        assert_eq!(
            resolve("/swipe/left/"),
            Matched::Swipe { direction: "left" }
        );
        assert_eq!(
            resolve("/swipe/right"),
            Matched::Swipe { direction: "right" }
        );
        assert_eq!(
            resolve("/stepcounter/5/6/7/8"),
            Matched::StepcounterPost {
                user: "5",
                day: "6",
                interval: "7",
                steps: "8"
            }
        );
        assert_eq!(
            resolve("/stepcounter/current/5"),
            Matched::StepcounterCurrent { user: "5" }
        );
        assert_eq!(
            resolve("/stepcounter/single/5/6"),
            Matched::StepcounterSingle {
                user: "5",
                day: "6"
            }
        );
    }

    #[test]
    fn malformed_parameters_still_match_so_the_handler_can_say_400() {
        assert_eq!(resolve("/albums/"), Matched::AlbumsPost);
        assert_eq!(resolve("/albums//"), Matched::AlbumsGet { id: "" });
        assert_eq!(resolve("/swipe/up/"), Matched::Swipe { direction: "up" });
        assert_eq!(
            resolve("/skiers/x/seasons/y/days/z/skiers/w").route(),
            Route::Skiers
        );
    }

    #[test]
    fn wrong_shapes_are_not_found() {
        for path in [
            "/nope",
            "/albums/1/2",
            "/skiers/1/season/2019/days/3/skiers/42",
            "/skiers/1/seasons/2019/days/3/skiers/42/9",
            "/swipe",
            "/stepcounter/current",
            "/stepcounter/1/2/3",
            "//albums",
            "/albums/1//",
            "/a/b/c/d/e/f/g/h/i/j",
        ] {
            assert_eq!(resolve(path), Matched::NotFound, "{path}");
        }
    }

    #[test]
    fn route_table_indices_match_the_order_of_all() {
        for (i, route) in Route::ALL.iter().enumerate() {
            assert_eq!(route.index(), i);
        }
    }
}

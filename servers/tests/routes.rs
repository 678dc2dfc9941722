//! Every route against a real server on 127.0.0.1:0: happy paths with status and body, and
//! the 400 / 404 / 405 answers for malformed ids, bodies, unknown paths and wrong methods.

mod common;

use bytes::Bytes;
use common::{default_server, multipart, multipart_content_type, Client};
use hyper::Method;

#[tokio::test]
async fn root_says_hello_in_plain_text() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let reply = client.get("/").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "hello, world\n");
    assert!(reply.content_type().starts_with("text/plain"));
    // Keep-alive: the same connection serves the next request too.
    assert_eq!(client.get("/").await.status, 200);
    assert_eq!(server.requests_total(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn h2c_with_prior_knowledge_is_served_on_the_same_port() {
    let server = default_server().await;
    let mut client = Client::connect_h2(server.local_addr()).await;
    let reply = client.get("/").await;
    assert_eq!((reply.status, reply.text()), (200, "hello, world\n"));
    let album = client.get("/albums/3").await;
    assert_eq!(album.status, 200);
    assert_eq!(server.requests_total(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn get_album_is_json_with_a_string_year_and_the_same_for_the_same_id() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let reply = client.get("/albums/7").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "application/json");
    let album = reply.json();
    assert!(album["artist"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(album["title"].as_str().is_some_and(|s| !s.is_empty()));
    let year: u32 = album["year"].as_str().unwrap().parse().unwrap();
    assert!((1950..2025).contains(&year), "{year}");
    assert_eq!(client.get("/albums/7").await.json(), album);
    assert_eq!(client.get("/albums/a1-b_2").await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn post_album_counts_every_image_byte_and_hands_out_new_ids() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    // Bytes that look like multipart syntax must still count as image bytes.
    let mut image: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    image.extend_from_slice(b"\r\n--not-the-boundary\r\n--");
    let profile = br#"{"artist":"Sex Pistols","title":"Never Mind The Bollocks","year":"1977"}"#;
    let content_type = multipart_content_type();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let body = multipart(&[
            ("profile", None, profile),
            ("image", Some("cover.png"), &image),
        ]);
        let reply = client
            .send(
                Method::POST,
                "/albums",
                &[("content-type", &content_type)],
                body,
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text());
        let json = reply.json();
        assert_eq!(json["imageSize"], image.len().to_string());
        ids.push(json["albumID"].as_str().unwrap().to_owned());
    }
    assert_ne!(ids[0], ids[1]);
    // Parts in the other order and an extra part are fine.
    let body = multipart(&[
        ("image", Some("empty.png"), b""),
        ("note", None, b"ignored"),
        (
            "profile",
            None,
            br#"{"artist":"a","title":"b","year":"1979"}"#,
        ),
    ]);
    let reply = client
        .send(
            Method::POST,
            "/albums",
            &[("content-type", &content_type)],
            body,
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert_eq!(reply.json()["imageSize"], "0");
    server.shutdown().await;
}

#[tokio::test]
async fn post_album_without_a_part_or_with_bad_json_is_400() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let content_type = multipart_content_type();
    let profile: &[u8] = br#"{"artist":"a","title":"b","year":"1979"}"#;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (multipart(&[("image", Some("x.png"), b"123")]), "profile"),
        (multipart(&[("profile", None, profile)]), "image"),
        (
            multipart(&[("profile", None, b"{not json"), ("image", Some("x"), b"1")]),
            "profile",
        ),
        (
            multipart(&[
                ("profile", None, br#"{"artist":"a"}"#),
                ("image", Some("x"), b"1"),
            ]),
            "profile",
        ),
        (b"--garbage".to_vec(), "multipart"),
    ];
    for (body, mentions) in cases {
        let reply = client
            .send(
                Method::POST,
                "/albums",
                &[("content-type", &content_type)],
                body,
            )
            .await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert!(reply.message().contains(mentions), "{}", reply.message());
    }
    let reply = client
        .send(
            Method::POST,
            "/albums",
            &[("content-type", "application/json")],
            "{}",
        )
        .await;
    assert_eq!(reply.status, 400);
    assert!(reply.message().contains("multipart/form-data"));
    server.shutdown().await;
}

#[tokio::test]
async fn album_ids_that_are_not_plain_are_400() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for path in [
        "/albums//",
        "/albums/a%20b",
        "/albums/a.b",
        &format!("/albums/{}", "9".repeat(65)),
    ] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, 400, "{path}");
        assert!(reply.message().contains("albumID"), "{}", reply.message());
    }
    server.shutdown().await;
}

#[tokio::test]
async fn lift_ride_is_201_and_malformed_ids_or_bodies_are_400() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let ride = r#"{"time": 217, "liftID": 21}"#;
    let reply = client
        .post_json("/skiers/12/seasons/2019/days/1/skiers/123", ride)
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert!(reply.body.is_empty());
    assert_eq!(
        client
            .post_json("/skiers/1/seasons/2019/days/366/skiers/1", ride)
            .await
            .status,
        201
    );

    for (path, mentions) in [
        ("/skiers/x/seasons/2019/days/1/skiers/1", "resortID"),
        ("/skiers/-1/seasons/2019/days/1/skiers/1", "resortID"),
        ("/skiers/1/seasons/20x9/days/1/skiers/1", "seasonID"),
        ("/skiers/1/seasons/2019/days/0/skiers/1", "dayID"),
        ("/skiers/1/seasons/2019/days/367/skiers/1", "dayID"),
        ("/skiers/1/seasons/2019/days/1/skiers/0", "skierID"),
        ("/skiers/1/seasons/2019/days/1/skiers/abc", "skierID"),
    ] {
        let reply = client.post_json(path, ride).await;
        assert_eq!(reply.status, 400, "{path}");
        assert!(
            reply.message().contains(mentions),
            "{path}: {}",
            reply.message()
        );
    }

    let path = "/skiers/1/seasons/2019/days/1/skiers/1";
    for (body, mentions) in [
        ("", "JSON"),
        ("{", "JSON"),
        (r#"{"time": 1}"#, "liftID"),
        (r#"{"liftID": 1}"#, "time"),
        (r#"{"time": "1", "liftID": 2}"#, "field `time`"),
        (r#"{"time": 1.5, "liftID": 2}"#, "field `time`"),
        (r#"{"time": 1, "liftID": "2"}"#, "field `liftID`"),
    ] {
        let reply = client.post_json(path, body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert!(
            reply.message().contains(mentions),
            "{body}: {}",
            reply.message()
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn swipe_left_or_right_with_or_without_slash_is_201_others_400() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let swipe = r#"{"swiper": "1234", "swipee": "56789", "comment": "hi"}"#;
    for path in [
        "/swipe/left/",
        "/swipe/right/",
        "/swipe/left",
        "/swipe/right",
    ] {
        let reply = client.post_json(path, swipe).await;
        assert_eq!(reply.status, 201, "{path}: {}", reply.text());
    }
    // The course API's user ids are strings: a number is a 400 naming the field.
    let numeric = r#"{"swiper": 1234, "swipee": "56789", "comment": ""}"#;
    let reply = client.post_json("/swipe/left/", numeric).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.message().contains("field `swiper`") && reply.message().contains("expected a string"),
        "{}",
        reply.message()
    );

    let reply = client.post_json("/swipe/up/", swipe).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.message().contains("\"left\" or \"right\""),
        "{}",
        reply.message()
    );
    for body in [
        "",
        "not json",
        r#"{"swiper": "1", "swipee": "2"}"#,
        r#"{"swiper": "1", "comment": "x"}"#,
        r#"{"swiper": "1", "swipee": "2", "comment": 5}"#,
    ] {
        let reply = client.post_json("/swipe/right/", body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert!(!reply.message().is_empty());
    }
    server.shutdown().await;
}

#[tokio::test]
async fn step_counts_add_up_and_read_back() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for path in [
        "/stepcounter/7/3/10/500",
        "/stepcounter/7/3/11/250",
        "/stepcounter/7/1/8/40",
    ] {
        let reply = client.post_json(path, "").await;
        assert_eq!(reply.status, 201, "{path}: {}", reply.text());
    }
    let single = client.get("/stepcounter/single/7/3").await;
    assert_eq!(single.status, 200);
    assert_eq!(
        single.json(),
        serde_json::json!({"userID": 7, "day": 3, "stepCount": 750})
    );
    let current = client.get("/stepcounter/current/7").await;
    assert_eq!(current.status, 200);
    assert_eq!(
        current.json(),
        serde_json::json!({"userID": 7, "day": 3, "stepCount": 750})
    );
    // Nothing recorded is zero steps, not an error.
    assert_eq!(
        client.get("/stepcounter/single/8/3").await.json(),
        serde_json::json!({"userID": 8, "day": 3, "stepCount": 0})
    );
    assert_eq!(
        client.get("/stepcounter/current/8").await.json(),
        serde_json::json!({"userID": 8, "day": null, "stepCount": 0})
    );
    server.shutdown().await;
}

#[tokio::test]
async fn step_counter_rejects_malformed_numbers() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for (path, mentions) in [
        ("/stepcounter/x/3/10/500", "userID"),
        ("/stepcounter/7/0/10/500", "day"),
        ("/stepcounter/7/367/10/500", "day"),
        ("/stepcounter/7/3/-1/500", "timeInterval"),
        ("/stepcounter/7/3/10/many", "stepCount"),
    ] {
        let reply = client.post_json(path, "").await;
        assert_eq!(reply.status, 400, "{path}");
        assert!(
            reply.message().contains(mentions),
            "{path}: {}",
            reply.message()
        );
    }
    for (path, mentions) in [
        ("/stepcounter/current/x", "userID"),
        ("/stepcounter/single/7/x", "day"),
        ("/stepcounter/single/-7/1", "userID"),
    ] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, 400, "{path}");
        assert!(
            reply.message().contains(mentions),
            "{path}: {}",
            reply.message()
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_paths_are_404_with_a_json_message() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for path in [
        "/nope",
        "/albums/1/tracks",
        "/skiers/1/season/2019/days/1/skiers/1",
        "/stepcounter/1/2/3",
        "/swipe",
    ] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.content_type(), "application/json");
        assert!(reply.message().contains(path), "{}", reply.message());
    }
    assert_eq!(client.post_json("/nope", "{}").await.status, 404);
    assert_eq!(server.requests_with_status(404), 6);
    server.shutdown().await;
}

#[tokio::test]
async fn a_wrong_method_on_a_known_route_is_405_with_allow() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for (method, path, allowed) in [
        (Method::POST, "/", "GET"),
        (Method::DELETE, "/albums/1", "GET"),
        (Method::GET, "/albums", "POST"),
        (
            Method::GET,
            "/skiers/1/seasons/2019/days/1/skiers/1",
            "POST",
        ),
        (Method::GET, "/swipe/left/", "POST"),
        (Method::PUT, "/stepcounter/1/2/3/4", "POST"),
        (Method::POST, "/stepcounter/current/1", "GET"),
        (Method::POST, "/stepcounter/single/1/2", "GET"),
        (Method::POST, "/metrics", "GET"),
    ] {
        let reply = client.send(method.clone(), path, &[], Bytes::new()).await;
        assert_eq!(reply.status, 405, "{method} {path}");
        assert_eq!(reply.headers["allow"], allowed, "{method} {path}");
        assert!(reply.message().contains(allowed));
    }
    // HEAD is fine wherever GET is.
    let head = client.send(Method::HEAD, "/", &[], Bytes::new()).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn json_bodies_over_the_limit_are_413() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    let huge = format!(
        r#"{{"swiper": "1", "swipee": "2", "comment": "{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let reply = client.post_json("/swipe/left/", &huge).await;
    assert_eq!(reply.status, 413);
    assert!(reply.message().contains("larger than"));
    // The rest of the body was read and dropped, so the connection is still good.
    assert_eq!(client.get("/").await.status, 200);
    server.shutdown().await;
}

/// The server decodes bodies into the course APIs' types: a wrong type or a missing field is a
/// 400 naming the field, in a JSON body or a multipart part; `--lenient` takes numbers where
/// the API has strings.
// A table of cases, one per field and API, read top to bottom.
#[allow(clippy::too_many_lines)]
#[tokio::test]
async fn wrong_types_and_missing_fields_are_400_naming_the_field_unless_lenient() {
    let strict = default_server().await;
    let lenient = common::server(servers::ServerConfig {
        lenient: true,
        ..Default::default()
    })
    .await;
    let content_type = multipart_content_type();
    let album = |profile: &'static [u8]| {
        multipart(&[("profile", None, profile), ("image", Some("x.png"), b"1")])
    };
    for (server, lenient) in [(&strict, false), (&lenient, true)] {
        let mut client = Client::connect(server.local_addr()).await;
        for (profile, field) in [
            (
                &br#"{"artist":"a","title":"b","year":1977}"#[..],
                "field `year`",
            ),
            (
                br#"{"artist":"a","title":7,"year":"1977"}"#,
                "field `title`",
            ),
            (br#"{"artist":"a","year":"1977"}"#, "missing field `title`"),
        ] {
            let reply = client
                .send(
                    Method::POST,
                    "/albums",
                    &[("content-type", &content_type)],
                    album(profile),
                )
                .await;
            let numeric_year = field == "field `year`";
            if lenient && numeric_year {
                assert_eq!(reply.status, 201, "{}", reply.text());
            } else {
                assert_eq!(reply.status, 400, "{}", reply.text());
                assert!(reply.message().contains(field), "{}", reply.message());
                assert!(
                    reply.message().contains("`profile` part"),
                    "{}",
                    reply.message()
                );
            }
        }
        for (body, field) in [
            (
                r#"{"swiper": "1", "swipee": 2, "comment": "c"}"#,
                "field `swipee`",
            ),
            (
                r#"{"swiper": "1", "swipee": "2"}"#,
                "missing field `comment`",
            ),
        ] {
            let reply = client.post_json("/swipe/left/", body).await;
            if lenient && field == "field `swipee`" {
                assert_eq!(reply.status, 201, "{}", reply.text());
            } else {
                assert_eq!(reply.status, 400, "{}", reply.text());
                assert!(reply.message().contains(field), "{}", reply.message());
            }
        }
        let ride = client
            .post_json("/skiers/1/seasons/2019/days/1/skiers/1", r#"{"time": 1}"#)
            .await;
        assert_eq!(ride.status, 400);
        assert!(
            ride.message().contains("missing field `liftID`"),
            "{}",
            ride.message()
        );
        // The stepcounter API has no body: its typed values are the path's.
        let steps = client.post_json("/stepcounter/1/1/x/5", "").await;
        assert_eq!(steps.status, 400);
        assert!(
            steps.message().contains("timeInterval"),
            "{}",
            steps.message()
        );
    }
    strict.shutdown().await;
    lenient.shutdown().await;
}

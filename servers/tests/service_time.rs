//! `ServiceTime`'s text forms (the `--service-time` flag) and its distribution.

use std::time::Duration;

use servers::ServiceTime;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn accepts_the_documented_forms() {
    let cases = [
        ("0", ServiceTime::Zero),
        ("0ms", ServiceTime::Zero),
        ("5ms", ServiceTime::Fixed(ms(5))),
        (" 1s ", ServiceTime::Fixed(ms(1000))),
        ("250us", ServiceTime::Fixed(Duration::from_micros(250))),
        ("exp:5ms", ServiceTime::Exponential { mean: ms(5) }),
        ("exp:0", ServiceTime::Zero),
        (
            "uniform:2ms..8ms",
            ServiceTime::Uniform {
                min: ms(2),
                max: ms(8),
            },
        ),
        (
            "uniform:0..8ms",
            ServiceTime::Uniform {
                min: ms(0),
                max: ms(8),
            },
        ),
        ("uniform:3ms..3ms", ServiceTime::Fixed(ms(3))),
    ];
    for (text, expected) in cases {
        assert_eq!(text.parse::<ServiceTime>(), Ok(expected), "{text:?}");
    }
    assert_eq!(ServiceTime::default(), ServiceTime::Zero);
}

#[test]
fn rejects_everything_else_naming_the_accepted_forms() {
    for text in [
        "",
        "fast",
        "5",
        "-5ms",
        "exp:",
        "exp:soon",
        "exponential:5ms",
        "uniform:2ms",
        "uniform:8ms..2ms",
        "uniform:2ms..",
        "uniform:..8ms",
    ] {
        let error = text.parse::<ServiceTime>().expect_err(text).to_string();
        assert!(error.contains(&format!("{text:?}")), "{error}");
        for form in ["`5ms`", "`exp:5ms`", "`uniform:2ms..8ms`"] {
            assert!(error.contains(form), "{text:?}: {error}");
        }
    }
}

#[test]
fn display_round_trips_through_from_str() {
    for time in [
        ServiceTime::Zero,
        ServiceTime::Fixed(ms(5)),
        ServiceTime::Fixed(Duration::from_micros(1500)),
        ServiceTime::Exponential { mean: ms(20) },
        ServiceTime::Uniform {
            min: ms(2),
            max: ms(8),
        },
    ] {
        let text = time.to_string();
        assert_eq!(text.parse::<ServiceTime>(), Ok(time), "{text}");
    }
    assert_eq!(
        ServiceTime::Exponential { mean: ms(5) }.to_string(),
        "exp:5ms"
    );
    assert_eq!(
        ServiceTime::Uniform {
            min: ms(2),
            max: ms(8)
        }
        .to_string(),
        "uniform:2ms..8ms"
    );
}

#[test]
fn quantiles_follow_each_distribution() {
    let exp = ServiceTime::Exponential { mean: ms(10) };
    assert_eq!(exp.quantile(0.0), Duration::ZERO);
    // The median of an exponential is mean * ln 2.
    let median = exp.quantile(0.5).as_secs_f64();
    assert!(
        (median - 0.010 * std::f64::consts::LN_2).abs() < 1e-9,
        "{median}"
    );
    // The tail is capped, never infinite.
    assert!(exp.quantile(1.0) <= ms(10) * 50);

    let uniform = ServiceTime::Uniform {
        min: ms(2),
        max: ms(8),
    };
    assert_eq!(uniform.quantile(0.0), ms(2));
    assert_eq!(uniform.quantile(0.5), ms(5));
    assert_eq!(uniform.mean(), ms(5));
    assert_eq!(ServiceTime::Fixed(ms(5)).quantile(0.9), ms(5));
    assert!(ServiceTime::Zero.is_zero());
    assert!(!exp.is_zero());
}

#[test]
fn samples_stay_in_range_and_average_near_the_mean() {
    let uniform = ServiceTime::Uniform {
        min: ms(2),
        max: ms(8),
    };
    for _ in 0..1000 {
        let sample = uniform.sample();
        assert!((ms(2)..=ms(8)).contains(&sample), "{sample:?}");
    }
    let exp = ServiceTime::Exponential { mean: ms(10) };
    let n = 20_000;
    let mean_s = (0..n).map(|_| exp.sample().as_secs_f64()).sum::<f64>() / f64::from(n);
    // The standard error of the mean is 10 ms / sqrt(20000) ≈ 0.07 ms; 1 ms is > 10 sigma.
    assert!((mean_s - 0.010).abs() < 0.001, "{mean_s}");
}

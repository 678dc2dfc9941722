//! `loadgen-server`: the reference server as a binary.
//!
//! Thin on purpose: parse flags, build the tokio runtime (its size is a knob, so benchmarks
//! can pin the server to one core), start the library's server, print the address, and stop
//! cleanly on Ctrl-C or SIGTERM. All behaviour lives in the `servers` library.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use servers::{ServerConfig, ServiceTime, TlsConfig};

/// Reference server for the course APIs (albums, skiers, swipe, stepcounter) with knobs for
/// service time, worker capacity, error rate, periodic stalls, connection faults, slow
/// bodies, a connection cap and TLS.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,

    /// Port to listen on; 0 picks a free port (read it from the "listening on" line).
    #[arg(long, default_value_t = 8080)]
    port: u16,

    /// Time spent on each API request: `0`, a fixed duration (`5ms`), `exp:5ms`
    /// (exponential with that mean) or `uniform:2ms..8ms`. Not applied to /metrics.
    #[arg(long, default_value = "0", value_name = "DIST")]
    service_time: ServiceTime,

    /// CPU each API request burns on the server's threads (a busy loop of this duration, after
    /// the service time), e.g. `2ms`: a CPU-bound server, whose capacity is its cores over this
    /// time and whose CPU node_exporter shows full. None when not given.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    cpu_time: Option<std::time::Duration>,

    /// At most N API requests in service at once; the rest wait in arrival order.
    /// Unlimited when not given.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    workers: Option<u64>,

    /// Fraction (0..=1) of API requests answered 500 instead of being handled.
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = parse_fraction)]
    error_rate: f64,

    /// At most REQ/S API requests per second are served; faster ones are answered 503 at once
    /// (as an API gateway or nginx's limit_req does), allowing a burst of 10. Unlimited when
    /// not given.
    #[arg(long, value_name = "REQ/S")]
    rate_limit: Option<f64>,

    /// Fraction (0..=1) of API requests answered with a TCP reset (RST) instead of a
    /// response; the client sees ECONNRESET.
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = parse_fraction)]
    reset_rate: f64,

    /// Fraction (0..=1) of API requests whose response stops after the headers (with the full
    /// Content-Length) and about half the body, then the connection closes.
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = parse_fraction)]
    close_mid_body_rate: f64,

    /// Fraction (0..=1) of API requests answered with bytes that are not HTTP, then the
    /// connection closes. The error and fault rates share one draw and add up to at most 1.
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = parse_fraction)]
    garbage_rate: f64,

    /// Send each API response body in two halves, the second DURATION after the first;
    /// headers go out at once, so the first byte is quick and the whole response slow.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    slow_body: Option<std::time::Duration>,

    /// At most N client connections open at once; a connection accepted beyond that is reset
    /// at once (RST). Unlimited when not given.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,

    /// HTTP/2: at most N streams open at once on a connection (SETTINGS_MAX_CONCURRENT_STREAMS);
    /// a client's further requests wait in the client for a slot. hyper's default (200) when
    /// not given.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    h2_max_streams: Option<u32>,

    /// Serve HTTPS with this PEM certificate chain (needs --tls-key); ALPN offers h2 and
    /// http/1.1.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// Serve HTTP/3 too, over QUIC on the UDP port of the same number as the TCP one
    /// (needs --tls-cert and --tls-key); --h2-max-streams limits its concurrent streams too.
    #[arg(long, requires = "tls_cert")]
    http3: bool,

    /// Accept a JSON number where the course API has a string (`"year": 1977`); by default
    /// bodies are decoded into the API's types and a wrong type is a 400 naming the field.
    #[arg(long)]
    lenient: bool,

    /// The PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Stall periodically: in every DURATION (counted from start), the whole server stops
    /// answering API requests for its last --stall-for; requests arriving or in service then
    /// are held until the stall ends, then served normally. /metrics is never held.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "stall_for")]
    stall_every: Option<std::time::Duration>,

    /// How long each stall lasts (shorter than --stall-every).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "stall_every")]
    stall_for: Option<std::time::Duration>,

    /// Tokio worker threads; 1 runs everything on one thread. Default: one per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    threads: Option<u64>,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(format!(
            "expected a fraction between 0 and 1 (e.g. 0.05 for 5 %), got {text:?}"
        )),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = match cli.threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(threads) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::try_from(threads).context("--threads is too large")?)
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
    .context("could not start the tokio runtime")?;

    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => match TlsConfig::from_files(cert, key) {
            Ok(tls) => Some(tls),
            Err(e) => bad_flags(&e),
        },
        // clap's `requires` leaves only both or neither.
        _ => None,
    };
    let config = ServerConfig {
        bind: cli.bind,
        port: cli.port,
        service_time: cli.service_time,
        cpu_time: cli.cpu_time,
        workers: cli
            .workers
            .map(usize::try_from)
            .transpose()
            .context("--workers is too large")?,
        error_rate: cli.error_rate,
        rate_limit: cli.rate_limit,
        reset_rate: cli.reset_rate,
        close_mid_body_rate: cli.close_mid_body_rate,
        garbage_rate: cli.garbage_rate,
        slow_body: cli.slow_body,
        max_connections: cli
            .max_connections
            .map(usize::try_from)
            .transpose()
            .context("--max-connections is too large")?,
        stall: cli
            .stall_every
            .zip(cli.stall_for)
            .map(|(every, duration)| servers::Stall { every, duration }),
        tls,
        h2_max_streams: cli.h2_max_streams,
        http3: cli.http3,
        lenient: cli.lenient,
    };
    if let Err(e) = config.validate() {
        bad_flags(&e);
    }
    runtime.block_on(serve(config))
}

/// A flag value the server cannot run with: say why and exit 2, like clap does.
fn bad_flags(error: &servers::ConfigError) -> ! {
    eprintln!("error: {error}");
    std::process::exit(2);
}

async fn serve(config: ServerConfig) -> anyhow::Result<()> {
    let addr = std::net::SocketAddr::new(config.bind, config.port);
    let knobs = format!(
        "service time {}, workers {}, error rate {}, {}, {}, {}, max connections {}",
        config.service_time,
        config
            .workers
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
        config.error_rate,
        config.stall.map_or_else(
            || "no stalls".to_owned(),
            |s| format!(
                "stalls for {} every {}",
                humantime::format_duration(s.duration),
                humantime::format_duration(s.every)
            )
        ),
        format_args!(
            "reset rate {}, close-mid-body rate {}, garbage rate {}",
            config.reset_rate, config.close_mid_body_rate, config.garbage_rate
        ),
        config.slow_body.map_or_else(
            || "bodies sent whole".to_owned(),
            |d| format!(
                "second half of bodies after {}",
                humantime::format_duration(d)
            )
        ),
        config
            .max_connections
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
    );
    let server = servers::start(config)
        .await
        .with_context(|| format!("could not listen on {addr}"))?;

    // Scripts and tests read this exact line from stdout to learn the port, so it is the
    // only thing printed there, and it is flushed at once (stdout is block-buffered when
    // piped).
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "loadgen-server listening on {}", server.url())
        .and_then(|()| stdout.flush())
        .context("could not write to stdout")?;
    drop(stdout);
    if let Some(udp) = server.http3_addr() {
        eprintln!("HTTP/3 over QUIC on UDP {udp}");
    }
    eprintln!("{knobs}; stop with Ctrl-C");

    shutdown_signal().await?;
    server.shutdown().await;
    Ok(())
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM, the two ways scripts and orchestrators stop us.
async fn shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate =
            signal(SignalKind::terminate()).context("could not listen for SIGTERM")?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.context("could not listen for Ctrl-C")?,
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("could not listen for Ctrl-C")?;
    Ok(())
}

//! The first part of a run's preparation: the target. Start the embedded reference server, or
//! resolve the user's URL; plan the local addresses its connections start from and how every
//! worker connects (the transport configuration); look up what the client monitor
//! needs to know about this machine's side of the connection (CPU limit, the interface the
//! traffic leaves by); then check that it answers (a TCP connect, and the TLS handshake for
//! `https://`) and that `--server-saturation`'s gauges pick one series each — before anything
//! is written.

use std::net::SocketAddr;
use std::sync::Arc;

use super::RunError;
use crate::config::{ConfigError, RunConfig, Target, TargetUrl};
use crate::record::ErrorClass;
use crate::sysmon::cgroup::Cgroup;
use crate::sysmon::link;
use crate::transport::tls::{self, Verify};
use crate::transport::{probe, ConnectPacer, Origin, Redirects, TransportConfig};

/// A target that answered, and what the run needs to know about reaching it.
pub(super) struct PreparedTarget {
    /// The in-process reference server, when the run tests that.
    pub embedded: Option<Embedded>,
    pub url: TargetUrl,
    pub addr: SocketAddr,
    /// Looked up before `--start-at`, so the shards' first requests are not delayed by it.
    pub cgroup: Cgroup,
    pub interface: Option<String>,
    /// The link's capacity and where it was read (`--link-capacity`, the interface's speed).
    pub link: (Option<u64>, Option<&'static str>),
}

impl PreparedTarget {
    /// Finds the target (starts the embedded server, or resolves the URL), plans the local
    /// addresses its connections start from (into `config.connection.source_addrs`) and how
    /// every worker connects (the returned transport configuration), looks up this machine's
    /// side of it, then holds it to answering and the `--server-saturation` gauges to one
    /// scrape: all before anything is written.
    pub async fn prepare(config: &mut RunConfig) -> Result<(Self, TransportConfig), RunError> {
        let (embedded, url) = locate(config).await?;
        let addr = resolve(&url).await?;
        let origin = origin(&url, addr, config)?;
        config.connection.source_addrs = super::ports::plan_sources(config, addr)?;
        let transport = transport_config(config, &origin)?;
        let (cgroup, interface) = (Cgroup::discover(), link::target_interface(addr));
        let link = link::link_capacity(config.evidence.link_capacity_bps, interface.as_deref());
        let probed = match config.connection.http3 {
            true => crate::transport::http3::probe(&origin, config.connect_timeout).await,
            false => probe(&origin, config.connect_timeout).await,
        };
        probed.map_err(|source| match source.class {
            ErrorClass::Tls => RunError::Certificate {
                url: url.url.clone(),
                detail: source.detail,
            },
            _ => RunError::Unreachable {
                url: url.url.clone(),
                addr,
                source,
            },
        })?;
        let metrics = &config.evidence.server_metrics;
        if metrics.gauges_to_check() {
            // A hanging endpoint delays the run's start by this much at most.
            let timeout = metrics.timeout.min(std::time::Duration::from_secs(2));
            let rows = crate::servermon::scrape_once(&metrics.sources, timeout).await;
            crate::verdict::check_before_run(&rows, &metrics.saturation)
                .map_err(RunError::SaturationGauge)?;
        }
        let target = PreparedTarget {
            embedded,
            url,
            addr,
            cgroup,
            interface,
            link,
        };
        Ok((target, transport))
    }

    /// Who shares the client's cores with it: a saturated client starves that server too.
    pub fn server_on_this_machine(&self) -> Option<&'static str> {
        match &self.embedded {
            Some(_) => Some("the embedded server"),
            None if self.addr.ip().is_loopback() => Some("the server on this machine (loopback)"),
            None => None,
        }
    }

    /// The console header's name for the target.
    pub fn describe(&self) -> String {
        match &self.embedded {
            Some(_) => format!("{} (embedded loadgen-server)", self.url.url),
            None => self.url.url.clone(),
        }
    }

    /// Stops the embedded server, if the run started one.
    pub async fn shut_down(self) {
        if let Some(mut embedded) = self.embedded {
            if let Some(server) = embedded.server.take() {
                server.shutdown().await;
            }
        }
    }
}

/// The embedded reference server, on a runtime of its own whose threads are named
/// [`servers::THREAD_NAME`]: the client's CPU is measured without them. Dropped (a run that
/// failed before its end, or after `shut_down`), its runtime stops in the background.
pub(super) struct Embedded {
    server: Option<servers::RunningServer>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// A warning for run.json when the server's certificate will not be checked (`--insecure`
/// against `https://`).
pub(super) fn tls_warning(config: &RunConfig) -> Option<String> {
    let https = matches!(&config.target, Target::Url(url) if url.scheme == "https");
    (https && config.connection.verify == Verify::Insecure)
        .then(|| "--insecure: the server's TLS certificate was not verified".to_string())
}

impl Drop for Embedded {
    fn drop(&mut self) {
        // Not `Runtime::drop`: it blocks, which an async context forbids.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Embedded {
    fn url(&self) -> String {
        self.server.as_ref().map(|s| s.url()).unwrap_or_default()
    }

    async fn start() -> Result<Self, RunError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(servers::THREAD_NAME)
            .enable_all()
            .build()
            .map_err(RunError::EmbeddedServer)?;
        let server = runtime
            .spawn(servers::start(servers::ServerConfig::default()))
            .await
            .map_err(|e| RunError::EmbeddedServer(std::io::Error::other(e)))?
            .map_err(RunError::EmbeddedServer)?;
        Ok(Embedded {
            server: Some(server),
            runtime: Some(runtime),
        })
    }
}

/// The embedded server, started, or the user's URL.
async fn locate(config: &RunConfig) -> Result<(Option<Embedded>, TargetUrl), RunError> {
    match &config.target {
        Target::Url(url) => Ok((None, url.clone())),
        Target::Embedded => {
            let embedded = Embedded::start().await?;
            let url = TargetUrl::parse(&format!("{}/", embedded.url()))?;
            Ok((Some(embedded), url))
        }
    }
}

async fn resolve(target: &TargetUrl) -> Result<SocketAddr, RunError> {
    let dns = |reason: String| RunError::Dns {
        url: target.url.clone(),
        host: target.host.clone(),
        reason,
    };
    let mut addrs = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| dns(e.to_string()))?;
    addrs.next().ok_or_else(|| dns("no addresses".to_string()))
}

/// The target as the transport connects to it, with TLS settings for `https://`.
fn origin(target: &TargetUrl, addr: SocketAddr, config: &RunConfig) -> Result<Origin, RunError> {
    let tls = match target.scheme {
        "https" => Some(tls::client_config(
            &config.connection.verify,
            match (config.connection.http3, config.connection.http2) {
                (true, _) => tls::Alpn::H3,
                (false, true) => tls::Alpn::H2,
                (false, false) => tls::Alpn::Http1,
            },
        )?),
        _ => None,
    };
    let bad_url = |reason: String| ConfigError::BadUrl {
        url: target.url.clone(),
        reason,
    };
    let server_name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|e| bad_url(e.to_string()))?;
    Ok(Origin {
        scheme: target.scheme,
        addr,
        authority: hyper::header::HeaderValue::from_str(&target.authority)
            .map_err(|e| bad_url(e.to_string()))?,
        server_name,
        tls,
    })
}

/// How every worker connects: the target's origin and the connection flags.
fn transport_config(config: &RunConfig, origin: &Origin) -> Result<TransportConfig, RunError> {
    Ok(TransportConfig {
        origin: origin.clone(),
        http2: config.connection.http2,
        http3: config.connection.http3,
        streams_per_connection: config.connection.streams_per_connection,
        grpc: config.connection.grpc.clone(),
        keepalive: config.connection.keepalive,
        redirects: config.connection.redirects,
        redirect_tls: match config.connection.redirects {
            Redirects::Any => Some(tls::client_config(
                &config.connection.verify,
                tls::Alpn::Http1,
            )?),
            _ => None,
        },
        connect_timeout: config.connect_timeout,
        request_timeout: config.timeout,
        sources: config.connection.source_addrs.clone(),
        connect_pacer: Some(Arc::new(ConnectPacer::new(f64::from(
            config.connection.connect_rate_per_s,
        )))),
        tcp: Arc::default(),
    })
}

//! From a command's flags to a scenario and its compiled plan: the flags are checked, a
//! scenario is read (a file or a built-in) and patched by `-H`, or — for a quick run
//! (`--url … -c … -d …`) — synthesized around a default closed model; that happens once per
//! command ([`Source::read`]). Each run made from it (`run`'s one, every level of a workflow)
//! then shapes a copy of its `[model]` by one set of rules (`model_flags`), or takes a
//! workflow's own model, and goes through `scenario::compile`; this file never builds a plan
//! itself.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::model_flags::{self, Applied, ModelFlags};
use super::{ConfigError, ConnectionOptions, Target, TargetUrl};
use crate::cli::{ModelArgs, OutputArgs, RedirectsArg, TargetArgs};
use crate::model::DEFAULT_DURATION;
use crate::scenario::schema::{ClosedSpec, Defaults, Dur, ModelSpec, RequestSpec};
use crate::scenario::{self, builtin, Compiled, Scenario, ScenarioError};
use crate::transport::grpc::{self, Codec};
use crate::transport::Redirects;
use crate::workload::template::{Body, Text};
use crate::workload::{RequestTemplate, StatusSet};

/// Connections of a quick run without `-c`.
const DEFAULT_CONNECTIONS: u32 = crate::scenario::schema::DEFAULT_WORKERS;

/// `-c`, `-n`, `--streams-per-connection` and the durations: zero is a mistake.
pub(super) fn check_counts(
    target: &TargetArgs,
    model: Option<&ModelArgs>,
    output: &OutputArgs,
) -> Result<(), ConfigError> {
    let counts = [
        (
            "-c/--connections",
            model.and_then(|m| m.connections.map(u64::from)),
        ),
        (
            "--streams-per-connection",
            target.streams_per_connection.map(u64::from),
        ),
        ("-n/--requests", model.and_then(|m| m.requests)),
    ];
    if let Some((flag, _)) = counts.iter().find(|(_, n)| *n == Some(0)) {
        return Err(ConfigError::Zero { flag });
    }
    for (flag, value) in [
        ("-d/--duration", model.and_then(|m| m.duration)),
        ("--timeout", target.timeout),
        ("--connect-timeout", target.connect_timeout),
        ("--segment-interval", Some(output.segment_interval)),
    ] {
        if let Some(value) = value.filter(|v| v.is_zero()) {
            return Err(ConfigError::ZeroDuration {
                flag,
                value: format!("{value:?}"),
            });
        }
    }
    Ok(())
}

impl ConnectionOptions {
    pub(super) fn from_args(args: &TargetArgs) -> Result<Self, ConfigError> {
        use crate::transport::tls::Verify;
        let multiplexed = args.http2 || args.http3 || args.proto.is_some();
        if args.streams_per_connection.is_some() && !multiplexed {
            return Err(ConfigError::StreamsWithoutHttp2);
        }
        let grpc = match &args.proto {
            Some(proto) => {
                let codec = Codec::load(proto, &args.import_path).map_err(ConfigError::Grpc)?;
                if let Some(method) = &args.grpc {
                    codec.check_method(method).map_err(ConfigError::Grpc)?;
                }
                Some(std::sync::Arc::new(codec))
            }
            None => None,
        };
        Ok(ConnectionOptions {
            verify: match (&args.cacert, args.insecure) {
                (_, true) => Verify::Insecure,
                (Some(path), false) => Verify::CaFile(path.clone()),
                (None, false) => Verify::System,
            },
            http2: args.http2 || grpc.is_some(),
            http3: args.http3,
            streams_per_connection: args.streams_per_connection.unwrap_or(1),
            grpc,
            keepalive: !args.no_keepalive,
            redirects: match args.follow_redirects {
                None => Redirects::None,
                Some(RedirectsArg::SameOrigin) => Redirects::SameOrigin,
                Some(RedirectsArg::Any) => Redirects::Any,
            },
            source_addrs: args.source_addr.clone().map(|a| a.0).unwrap_or_default(),
            connect_rate_per_s: args
                .connect_rate
                .unwrap_or(super::DEFAULT_CONNECT_RATE_PER_S),
        })
    }

    /// Workers a closed model runs for `-c` connections: one per connection over HTTP/1.1,
    /// `--streams-per-connection` per connection over HTTP/2 and HTTP/3.
    fn workers_for(&self, connections: u32) -> u32 {
        connections.saturating_mul(self.streams_per_connection)
    }
}

/// A URL given where the scenario file goes (`loadgen run http://host/`, as wrk, oha and hey
/// take it): the flags with it as `--url`. Both it and `--url`: refused, naming the fix.
fn url_as_argument(args: &TargetArgs) -> Result<Option<TargetArgs>, ConfigError> {
    let Some(text) = args.file.as_deref().and_then(|p| p.to_str()) else {
        return Ok(None);
    };
    if !text.contains("://") {
        return Ok(None);
    }
    if args.url.is_some() {
        return Err(ConfigError::UrlTwice(text.to_string()));
    }
    let mut args = args.clone();
    args.url = Some(text.to_string());
    args.file = None;
    Ok(Some(args))
}

/// Whether a scenario file's name that is not there reads as a host and port without its
/// scheme (`127.0.0.1:8080/albums/1`, `localhost:8080`, `api.example.com:443/x`): a URL meant
/// as `--url`, as wrk and oha take it with `http://`.
fn looks_like_host(given: &str) -> bool {
    let authority = given.split('/').next().unwrap_or("");
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, ""));
    let port_ok = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    let named = host == "localhost" || host.starts_with('[');
    !host.is_empty() && !given.ends_with(".toml") && (port_ok || (named && port.is_empty()))
}

/// The scenario text the flags name, with its origin: `--file`'s or a built-in's.
fn scenario_text(args: &TargetArgs) -> Result<Option<(String, String)>, ConfigError> {
    Ok(match (&args.file, &args.scenario) {
        (Some(path), _) => Some((
            path.display().to_string(),
            std::fs::read_to_string(path).map_err(|source| {
                let given = path.display().to_string();
                match looks_like_host(&given) && !path.exists() {
                    true => ConfigError::UrlWithoutScheme(given),
                    false => ConfigError::ScenarioFile {
                        path: given,
                        source,
                    },
                }
            })?,
        )),
        (None, Some(name)) => Some((
            format!("built-in scenario {name}"),
            builtin::get(name)
                .ok_or_else(|| ConfigError::UnknownScenario {
                    name: name.clone(),
                    known: builtin::names().join(", "),
                })?
                .to_string(),
        )),
        (None, None) => None,
    })
}

/// What a command's target flags amount to, read once: the target, the scenario as written
/// (with `--set` and `-H` applied; a quick run's synthesized around the default closed
/// model) and, for a quick run, its one request already compiled.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub target: Target,
    pub origin: String,
    pub scenario: Scenario,
    /// The requests of a quick run or a targets file, already compiled.
    literal: Option<Literal>,
}

/// Requests given already compiled — a quick run's one, a targets file's — because their
/// paths and bodies are literal, never templates; with the sequence of one iteration.
#[derive(Debug, Clone)]
struct Literal {
    templates: Vec<RequestTemplate>,
    sequence: Vec<u16>,
}

/// A run's scenario with its model decided, and its compilation.
pub(super) struct Shaped {
    pub scenario: Scenario,
    pub compiled: Compiled,
    /// What the model rules decided beside the spec: `-d`/`-n` caps and notes.
    pub applied: Applied,
}

impl Source {
    /// Reads the scenario the flags name (a file or a built-in, with `--set` and `-H`), or
    /// synthesizes a quick run's.
    pub(super) fn read(
        args: &TargetArgs,
        headers: &[(HeaderName, HeaderValue)],
        connection: &ConnectionOptions,
    ) -> Result<Self, ConfigError> {
        if args.targets.is_none() && !args.targets_weights.is_empty() {
            // clap's `requires` does not hold a list flag to it: said here, not ignored.
            return Err(ConfigError::QuickOnlyWeights);
        }
        let url_argument = url_as_argument(args)?;
        let args = &url_argument.unwrap_or_else(|| args.clone());
        let url = args.url.as_deref().map(TargetUrl::parse).transpose()?;
        let headers = &with_basic_auth(headers, url.as_ref());
        match scenario_text(args)? {
            Some((origin, text)) => from_scenario(args, url, origin, &text, headers),
            None => from_command_line(args, url, headers, connection),
        }
    }

    /// The scenario with its model shaped by `flags` (see `model_flags`), or replaced by a
    /// workflow's own `model` as it is, and compiled.
    pub(super) fn shape(
        &self,
        flags: &ModelFlags,
        model: Option<ModelSpec>,
    ) -> Result<Shaped, ConfigError> {
        let mut scenario = self.scenario.clone();
        let applied = match model {
            Some(model) => {
                scenario.model = model;
                Applied::default()
            }
            None => shape_model(&mut scenario, flags, self.literal.is_none())?,
        };
        let compiled = match &self.literal {
            Some(literal) => scenario::compile::compile_literals(
                &scenario,
                literal.templates.clone(),
                literal.sequence.clone(),
            )
            .map_err(|v| ConfigError::Template(format!("{}: {}", v.path, v.message)))?,
            None => scenario::compile_scenario(&self.origin, &scenario, self.target.base_path())?,
        };
        Ok(Shaped {
            scenario,
            compiled,
            applied,
        })
    }
}

/// `headers` with the `Authorization: Basic …` of a user name and password in `url`, as curl
/// sends it — unless `headers` has an `Authorization` of its own, which wins.
fn with_basic_auth(
    headers: &[(HeaderName, HeaderValue)],
    url: Option<&TargetUrl>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = headers.to_vec();
    let given = headers
        .iter()
        .any(|(name, _)| name == hyper::header::AUTHORIZATION);
    if let (false, Some(auth)) = (given, url.and_then(|url| url.basic_auth.clone())) {
        headers.push((hyper::header::AUTHORIZATION, *auth));
    }
    headers
}

/// A scenario file or built-in, with `--set` and `-H` applied.
fn from_scenario(
    args: &TargetArgs,
    url: Option<TargetUrl>,
    origin: String,
    text: &str,
    headers: &[(HeaderName, HeaderValue)],
) -> Result<Source, ConfigError> {
    if args.method.is_some() || args.body.is_some() {
        return Err(ConfigError::QuickOnly);
    }
    let mut scenario = scenario::parse(&origin, text, &args.sets)?;
    for (name, value) in headers {
        scenario.defaults.headers.insert(
            name.to_string(),
            value.to_str().unwrap_or_default().to_string(),
        );
    }
    let target = match (url, &scenario.target) {
        (Some(url), _) => Target::Url(url),
        (None, Some(t)) => Target::Url(TargetUrl::parse(t).map_err(|e| {
            ConfigError::Scenario(ScenarioError {
                origin: origin.clone(),
                line: None,
                path: "target".into(),
                message: e.to_string(),
            })
        })?),
        (None, None) => Target::Embedded,
    };
    if let Target::Url(url) = &target {
        let given = scenario.defaults.headers.keys();
        if !given
            .clone()
            .any(|name| name.eq_ignore_ascii_case("authorization"))
        {
            if let Some(auth) = url.basic_auth.as_ref().and_then(|a| a.to_str().ok()) {
                let name = hyper::header::AUTHORIZATION.to_string();
                scenario.defaults.headers.insert(name, auth.to_string());
            }
        }
    }
    Ok(Source {
        target,
        origin,
        scenario,
        literal: None,
    })
}

/// A quick run: one request to `--url` (or the embedded server), its model the default
/// closed one for the model flags to shape.
fn from_command_line(
    args: &TargetArgs,
    url: Option<TargetUrl>,
    headers: &[(HeaderName, HeaderValue)],
    connection: &ConnectionOptions,
) -> Result<Source, ConfigError> {
    if !args.sets.is_empty() {
        return Err(ConfigError::SetWithoutScenario);
    }
    if let Some(path) = &args.targets {
        return from_targets(args, path, headers, connection);
    }
    let target = url.map_or(Target::Embedded, Target::Url);
    let (scenario, request) = quick_scenario(args, &target, headers, connection)?;
    Ok(Source {
        target,
        origin: "command line".to_string(),
        scenario,
        literal: Some(Literal {
            templates: vec![request],
            sequence: vec![0],
        }),
    })
}

/// A `--targets` file's requests (`scenario::targets`) around the quick run's default model,
/// for the model flags to shape.
fn from_targets(
    args: &TargetArgs,
    path: &std::path::Path,
    headers: &[(HeaderName, HeaderValue)],
    connection: &ConnectionOptions,
) -> Result<Source, ConfigError> {
    let from_stdin = path.as_os_str() == "-";
    let origin = match from_stdin {
        true => "targets from stdin".to_string(),
        false => path.display().to_string(),
    };
    let text = match from_stdin {
        true => std::io::read_to_string(std::io::stdin()),
        false => std::fs::read_to_string(path),
    };
    let text = text.map_err(|e| ScenarioError {
        origin: origin.clone(),
        line: None,
        path: String::new(),
        message: format!("cannot read the targets file ({e}); check the path"),
    })?;
    let default_model = ModelSpec::Closed(ClosedSpec {
        workers: connection.workers_for(DEFAULT_CONNECTIONS),
        requests: None,
        duration: Some(Dur(DEFAULT_DURATION)),
        warmup: None,
    });
    let targets = scenario::targets::scenario(
        &origin,
        &text,
        &args.targets_weights,
        headers,
        default_model,
    )?;
    Ok(Source {
        target: Target::Url(TargetUrl::parse(&targets.origin_url)?),
        origin,
        scenario: targets.scenario,
        literal: Some(Literal {
            templates: targets.templates,
            sequence: targets.sequence,
        }),
    })
}

/// The scenario's model shaped by the model flags (see `model_flags`), with request counts
/// rounded up to whole iterations of the sequence. `from_scenario` is false for a quick run,
/// whose model nobody wrote.
fn shape_model(
    scenario: &mut Scenario,
    flags: &ModelFlags,
    from_scenario: bool,
) -> Result<Applied, ConfigError> {
    let mut applied = model_flags::apply(&mut scenario.model, flags, from_scenario)?;
    let len = scenario.sequence.len();
    let what = if flags.requests().is_some() {
        "-n"
    } else {
        "model.requests"
    };
    if let ModelSpec::Closed(ClosedSpec {
        requests: Some(n), ..
    }) = &mut scenario.model
    {
        let (rounded, note) = model_flags::whole_iterations(*n, len, what);
        *n = rounded;
        applied.notes.extend(note);
    }
    if matches!(scenario.model, ModelSpec::Open(_)) && scenario.defaults.think_time.is_some() {
        // The open model paces by arrivals: a think time would be silently meaningless.
        applied.notes.push(
            "the open model paces sends by the arrival rate: the scenario's \
             defaults.think_time is not used"
                .to_string(),
        );
    }
    if let Some(cap) = &mut applied.request_cap {
        let (rounded, note) = model_flags::whole_iterations(*cap, len, "-n");
        *cap = rounded;
        applied.notes.extend(note);
    }
    Ok(applied)
}

/// The scenario a quick `loadgen run --url … -c … -d …` amounts to, and its one request
/// compiled directly (a command-line path or body is literal, never a template).
fn quick_scenario(
    args: &TargetArgs,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    connection: &ConnectionOptions,
) -> Result<(Scenario, RequestTemplate), ConfigError> {
    let method_text = args.method.clone().unwrap_or_else(|| "GET".to_string());
    let mut method = Method::from_bytes(method_text.to_ascii_uppercase().as_bytes())
        .map_err(|_| ConfigError::Method(method_text.clone()))?;
    let body = quick_body(args)?;
    let mut path = match target {
        Target::Url(url) => url.path.to_string(),
        Target::Embedded => "/".to_string(),
    };
    if let (Some(call), Some(codec)) = (&args.grpc, &connection.grpc) {
        // A gRPC call is a POST to /PACKAGE.SERVICE/METHOD; its body must be the input message.
        (method, path) = (Method::POST, format!("/{call}"));
        if let Some(input) = codec.method(&path).map(|m| m.input()) {
            if let Err(why) = grpc::encode(&input, &body) {
                return Err(ConfigError::Grpc(format!(
                    "--body is not a {} message in JSON ({why}); write its fields as JSON, e.g. {}",
                    input.full_name(),
                    grpc::example_json(&input)
                )));
            }
        }
    }
    let template = RequestTemplate::new(
        None,
        method.clone(),
        Text::literal(&path),
        headers,
        if body.is_empty() {
            Body::Empty
        } else {
            Body::Static(body.clone())
        },
        StatusSet::default(),
    )
    .map_err(|e| ConfigError::Template(e.to_string()))?;
    // The model nobody wrote: closed, for the model flags to shape.
    let model = ModelSpec::Closed(ClosedSpec {
        workers: connection.workers_for(DEFAULT_CONNECTIONS),
        requests: None,
        duration: Some(Dur(DEFAULT_DURATION)),
        warmup: None,
    });
    let scenario = Scenario {
        name: None,
        description: Some("from the command line".into()),
        thresholds: Vec::new(),
        server_metrics: Vec::new(),
        server_saturation: None,
        target: match target {
            Target::Url(url) => Some(url.url.clone()),
            Target::Embedded => None,
        },
        defaults: Defaults::with_headers(headers),
        fields: Default::default(),
        requests: [(
            "main".to_string(),
            recorded_request(args, &method, path, &body),
        )]
        .into(),
        sequence: vec!["main".to_string()],
        model,
    };
    Ok((scenario, template))
}

/// `--body`: the text, or `@FILE`'s bytes.
fn quick_body(args: &TargetArgs) -> Result<Bytes, ConfigError> {
    Ok(match args.body.as_deref() {
        None => Bytes::new(),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => {
                Bytes::from(std::fs::read(path).map_err(|source| ConfigError::BodyFile {
                    path: path.to_string(),
                    source,
                })?)
            }
            None => Bytes::from(text.to_string()),
        },
    })
}

/// The quick run's request as recorded in the scenario: the body only by its size (and
/// file), as it may be large or secret.
fn recorded_request(args: &TargetArgs, method: &Method, path: String, body: &Bytes) -> RequestSpec {
    RequestSpec {
        method: method.to_string(),
        path,
        label: None,
        headers: Default::default(),
        body: (!body.is_empty()).then(|| match &args.body {
            Some(b) if b.starts_with('@') => {
                format!("<{} bytes from {}>", body.len(), &b[1..])
            }
            _ => format!("<{} bytes>", body.len()),
        }),
        json: None,
        multipart: None,
        expect: None,
        check: Vec::new(),
        extract: Default::default(),
    }
}

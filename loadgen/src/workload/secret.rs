//! What of a request is secret, and its redaction: header names whose values never reach
//! run.json, Parquet metadata, the console or the page (`Authorization`, `X-Api-Key`), and
//! the same for a URL — its user name and password, and the values of query parameters of
//! such names (`api_key`, `access_token`). The one owner of that rule; it does not decide
//! what is sent, only what is shown.

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Whether a header or query parameter of this name holds a secret (case-insensitive; `_`
/// counts as `-`, so `api_key` is `api-key`).
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "key" | "sig"
    ) || [
        "token",
        "secret",
        "api-key",
        "apikey",
        "password",
        "passwd",
        "session",
        "signature",
        "credential",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// `url` with its user name and password, and secret query values, replaced:
/// `http://user:pw@host/p?api_key=k&x=1` → `http://<redacted>@host/p?api_key=<redacted>&x=1`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{REDACTED}@{host}"),
        None => authority.to_string(),
    };
    let scheme = scheme.map(|s| format!("{s}://")).unwrap_or_default();
    format!("{scheme}{authority}{}", redact_target(target))
}

/// A template's placeholder (`{token}`, a value extracted from an earlier response at run
/// time): its name, not a secret, so an op label keeps it.
fn is_placeholder(value: &str) -> bool {
    value.len() > 2 && value.starts_with('{') && value.ends_with('}') && !value[1..].contains('{')
}

/// A request target (`/p?api_key=k&x=1`) with the values of secret query parameters
/// replaced; the path and every other parameter as given.
pub fn redact_target(target: &str) -> String {
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, value)) if is_secret_name(name) && !is_placeholder(value) => {
                format!("{name}={REDACTED}")
            }
            _ => param.to_string(),
        })
        .collect();
    let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{path}?{}{fragment}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_and_secret_query_values_are_redacted() {
        assert_eq!(
            redact_url("http://user:PASSWD1@127.0.0.1:8080/p?api_key=K1&x=1&access_token=T"),
            "http://<redacted>@127.0.0.1:8080/p?api_key=<redacted>&x=1&access_token=<redacted>"
        );
        assert_eq!(redact_url("https://h/a?b=c#d"), "https://h/a?b=c#d");
        // A template's placeholder names the value; it is not one.
        assert_eq!(
            redact_target("/items/{id}?token={token}"),
            "/items/{id}?token={token}"
        );
        assert_eq!(redact_url("http://h"), "http://h");
        assert_eq!(
            redact_target("/p?Token=1&q=a@b"),
            "/p?Token=<redacted>&q=a@b"
        );
        assert!(is_secret_name("X-Api-Key") && !is_secret_name("accept"));
    }
}

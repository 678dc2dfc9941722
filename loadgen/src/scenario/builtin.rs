//! Built-in scenarios: the course workloads, shipped inside the binary as TOML so that
//! `loadgen scenarios show NAME` prints exactly what runs, ready to copy and edit.

/// (name, TOML text)
pub const BUILTINS: [(&str, &str); 5] = [
    ("albums", include_str!("builtin/albums.toml")),
    (
        "albums-chained",
        include_str!("builtin/albums-chained.toml"),
    ),
    ("skiers", include_str!("builtin/skiers.toml")),
    ("twinder", include_str!("builtin/twinder.toml")),
    ("stepcounter", include_str!("builtin/stepcounter.toml")),
];

/// The TOML of a built-in scenario.
pub fn get(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names of all built-ins, for error messages.
pub fn names() -> Vec<&'static str> {
    BUILTINS.iter().map(|(n, _)| *n).collect()
}

/// The `description` line of a built-in.
pub fn description(text: &str) -> String {
    toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| {
            t.get("description")
                .and_then(|d| d.as_str())
                .map(String::from)
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in parses and validates as shipped.
    #[test]
    fn builtins_compile() {
        for (name, text) in BUILTINS {
            let loaded = crate::scenario::parse(name, text, &[])
                .and_then(|s| crate::scenario::compile_scenario(name, &s, ""));
            assert!(loaded.is_ok(), "{name}: {}", loaded.unwrap_err());
            assert!(!description(text).is_empty(), "{name} has no description");
        }
    }
}

//! Payload generators: named fields whose values are drawn fresh for every request.
//!
//! A scenario declares fields (`skier = { int = [1, 100000] }`, `direction = { choice =
//! ["left", "right"] }`, `id = { sequence = 1 }`, `comment = { chars = 256 }`, `season =
//! { literal = "2024" }`) and templates refer to them as `{skier}`. This module draws values;
//! it does not know where they go (that is `template.rs`).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// One generated value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Str(String),
}

impl Value {
    pub fn write_to(&self, out: &mut String) {
        use std::fmt::Write;
        match self {
            Value::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Str(s) => out.push_str(s),
        }
    }

    /// True when the value, written as text, is longer than `bytes`.
    pub fn is_longer_than(&self, bytes: usize) -> bool {
        match self {
            Value::Int(n) => n.to_string().len() > bytes,
            Value::Str(s) => s.len() > bytes,
        }
    }
}

/// How one field's values are drawn.
#[derive(Debug, Clone)]
pub enum Generator {
    /// Uniform integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// Uniform choice from the list.
    Choice(Vec<String>),
    /// 1, 2, 3, … shared by every worker, so each value is used exactly once per run.
    Sequence(Arc<AtomicI64>),
    /// Always the same value.
    Literal(Value),
    /// A random alphanumeric string of this many characters.
    Chars(usize),
    /// Not generated: extracted from a response into the worker's session (`extract = …`);
    /// the worker puts the session's value in its place.
    Extracted,
}

impl Generator {
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Value {
        match self {
            Generator::Int { min, max } => Value::Int(rng.i64(*min..=*max)),
            Generator::Choice(options) => Value::Str(options[rng.usize(..options.len())].clone()),
            Generator::Sequence(next) => Value::Int(next.fetch_add(1, Ordering::Relaxed)),
            Generator::Literal(value) => value.clone(),
            Generator::Chars(n) => Value::Str((0..*n).map(|_| rng.alphanumeric()).collect()),
            Generator::Extracted => Value::Str(String::new()),
        }
    }
}

/// The named fields of a workload, in a fixed order; templates refer to them by index.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    names: Vec<String>,
    generators: Vec<Generator>,
}

impl Fields {
    pub fn push(&mut self, name: &str, generator: Generator) {
        match self.index(name) {
            Some(i) => self.generators[i] = generator,
            None => {
                self.names.push(name.to_string());
                self.generators.push(generator);
            }
        }
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// True when field `index` is extracted from responses rather than generated.
    pub fn is_extracted(&self, index: usize) -> bool {
        matches!(self.generators.get(index), Some(Generator::Extracted))
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// A fresh value for every field.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Vec<Value> {
        self.generators.iter().map(|g| g.draw(rng)).collect()
    }

    /// The same fields with some generators replaced (a phase's payload ranges).
    pub fn with_overrides(&self, overrides: &[(String, Generator)]) -> Fields {
        let mut fields = self.clone();
        for (name, generator) in overrides {
            fields.push(name, generator.clone());
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_stay_in_range() {
        let mut rng = fastrand::Rng::with_seed(7);
        let int = Generator::Int { min: 3, max: 5 };
        let choice = Generator::Choice(vec!["left".into(), "right".into()]);
        for _ in 0..200 {
            assert!(matches!(int.draw(&mut rng), Value::Int(3..=5)));
            let Value::Str(s) = choice.draw(&mut rng) else {
                panic!()
            };
            assert!(s == "left" || s == "right");
        }
        let Value::Str(s) = Generator::Chars(256).draw(&mut rng) else {
            panic!()
        };
        assert_eq!(s.len(), 256);
        assert!(s.chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn sequences_are_shared_and_never_repeat() {
        let seq = Generator::Sequence(Arc::new(AtomicI64::new(1)));
        let copy = seq.clone();
        let mut rng = fastrand::Rng::new();
        let drawn: Vec<Value> = (0..4)
            .map(|i| if i % 2 == 0 { &seq } else { &copy }.draw(&mut rng))
            .collect();
        assert_eq!(drawn, (1..=4).map(Value::Int).collect::<Vec<_>>());
    }
}

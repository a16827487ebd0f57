//! Property values in NEAT's model: a scalar, a list, a range, "any", or a negation.

use std::fmt;

/// How strongly a property is asked for (NEAT's `precedence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precedence {
    /// No preference (0).
    None,
    /// Requested: honoured when possible (1).
    Requested,
    /// Required: a candidate that cannot honour it is dropped (2).
    Required,
}

impl Precedence {
    /// From NEAT's number; anything above 2 counts as required.
    pub fn from_number(n: u64) -> Precedence {
        match n {
            0 => Precedence::None,
            1 => Precedence::Requested,
            _ => Precedence::Required,
        }
    }

    /// NEAT's number.
    pub fn as_number(self) -> u8 {
        self as u8
    }
}

/// A property value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// JSON `null`: anything matches.
    Any,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A real number.
    Float(f64),
    /// Text (protocol names, interface names, words).
    Str(String),
    /// Any one of these values; earlier ones are preferred.
    List(Vec<Value>),
    /// A closed numeric range `{"start": a, "end": b}`.
    Range(f64, f64),
    /// Anything but this value (how Avoid/Prohibit of a protocol or family is stored).
    Not(Box<Value>),
}

impl Value {
    /// The text, for `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The number, for `Int` and `Float`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The values this stands for, in order (a scalar is a one-element list).
    pub fn items(&self) -> &[Value] {
        match self {
            Value::List(v) => v,
            v => std::slice::from_ref(v),
        }
    }

    /// This value with `f` applied to every scalar inside lists and negations (input
    /// normalisation; runs once per parsed property).
    pub(crate) fn map_leaves(self, f: &dyn Fn(Value) -> Value) -> Value {
        match self {
            Value::List(v) => Value::List(v.into_iter().map(|x| x.map_leaves(f)).collect()),
            Value::Not(v) => Value::Not(Box::new(v.map_leaves(f))),
            v => f(v),
        }
    }

    /// Whether the scalar `x` is one of the values this stands for.
    pub fn admits(&self, x: &Value) -> bool {
        match self {
            Value::Any => true,
            Value::Not(v) => !v.admits(x),
            Value::List(v) => v.iter().any(|i| i.admits(x)),
            Value::Range(a, b) => x.as_f64().is_some_and(|f| *a <= f && f <= *b),
            v => scalar_eq(v, x),
        }
    }

    /// The values both admit, or `None` when they are disjoint. Order follows `self`.
    pub fn intersect(&self, other: &Value) -> Option<Value> {
        match (self, other) {
            (Value::Any, v) | (v, Value::Any) => Some(v.clone()),
            (Value::Not(a), Value::Not(b)) => {
                let mut items: Vec<Value> = a.items().to_vec();
                for i in b.items() {
                    if !items.iter().any(|x| scalar_eq(x, i)) {
                        items.push(i.clone());
                    }
                }
                Some(Value::Not(Box::new(Value::List(items))))
            }
            (Value::Range(a1, b1), Value::Range(a2, b2)) => {
                let (a, b) = (a1.max(*a2), b1.min(*b2));
                (a <= b).then_some(Value::Range(a, b))
            }
            (Value::Range(..), v) if !matches!(v, Value::List(_) | Value::Not(_)) => {
                self.admits(v).then(|| v.clone())
            }
            (a, b) => {
                let kept: Vec<Value> = a
                    .items()
                    .iter()
                    .filter(|x| b.admits(x) && !matches!(x, Value::Not(_)))
                    .cloned()
                    .collect();
                // `a` may itself be a negation: keep b's items that a admits.
                let kept = if matches!(a, Value::Not(_)) {
                    b.items().iter().filter(|x| a.admits(x)).cloned().collect()
                } else {
                    kept
                };
                match kept.len() {
                    0 => None,
                    1 => kept.into_iter().next(),
                    _ => Some(Value::List(kept)),
                }
            }
        }
    }
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x.eq_ignore_ascii_case(y),
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Any, _) | (_, Value::Any) => true,
        (x, y) => match (x.as_f64(), y.as_f64()) {
            (Some(p), Some(q)) => p == q,
            _ => false,
        },
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Any => f.write_str("any"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s}"),
            Value::List(v) => {
                f.write_str("[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
            Value::Range(a, b) => write!(f, "{a}..{b}"),
            Value::Not(v) => write!(f, "not {v}"),
        }
    }
}

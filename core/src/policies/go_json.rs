//! Go's `encoding/json` decoder reading the first value of a text, for its exact error texts,
//! and Kuma's way of loading an Envoy resource text (YAML first, then that decoder on the raw
//! text). Used where Kuma parses Envoy YAML: MeshProxyPatch and the old ProxyTemplate.

use serde_json::{Map, Value};

use crate::codec::{decode_documents, CodecError, Limits};

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

/// The JSON type of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonKind {
    /// `{...}`.
    Object,
    /// `[...]`.
    Array,
    /// `"..."`.
    String,
    /// `-1.5e3`.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

impl JsonKind {
    /// The type of a decoded value.
    pub(crate) fn of(v: &Value) -> Self {
        match v {
            Value::Object(_) => Self::Object,
            Value::Array(_) => Self::Array,
            Value::String(_) => Self::String,
            Value::Number(_) => Self::Number,
            Value::Bool(_) => Self::Bool,
            Value::Null => Self::Null,
        }
    }

    /// The name Go's `encoding/json` errors use (`cannot unmarshal array into ...`).
    pub(crate) fn go_name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Number => "number",
            Self::Bool => "bool",
            Self::Null => "null",
        }
    }
}

/// An Envoy text as Kuma's loader sees it.
pub(crate) enum Loaded {
    /// Empty text or `null`.
    Null,
    /// A mapping (`None` when it could only be scanned, not inspected).
    Object(Option<Map<String, Value>>),
    /// Anything else.
    Other(JsonKind),
}

/// Read `text` like Kuma's `yaml.YAMLToJSON` + `jsonpb`: the first YAML document, or, when the
/// text is not YAML, the first JSON value of the raw text (with Go's JSON errors).
pub(crate) fn load_like_kuma(text: &str) -> Result<Loaded, GoJsonError> {
    let (kind, object) = match decode_documents(text.as_bytes(), Limits::default()) {
        Ok(docs) => match docs.into_iter().next() {
            None => (JsonKind::Null, None),
            Some(Value::Object(o)) => (JsonKind::Object, Some(o)),
            Some(other) => (JsonKind::of(&other), None),
        },
        // Kuma's YAML-to-JSON step failed: it hands the raw text to the JSON decoder.
        Err(CodecError::Syntax(_) | CodecError::Unsupported(_)) => {
            let (kind, raw) = first_value(text)?;
            let object = match kind {
                JsonKind::Object => serde_json::from_str(raw).ok(),
                _ => None,
            };
            (kind, object)
        }
        Err(e) => return Err(GoJsonError::Codec(e.to_string())),
    };
    Ok(match kind {
        JsonKind::Null => Loaded::Null,
        JsonKind::Object => Loaded::Object(object),
        other => Loaded::Other(other),
    })
}

/// Where an open container is in Go's scanner (`parseObjectKey`, `parseObjectValue`,
/// `parseArrayValue`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// States of Go's scanner (`stateBeginValue`, `stateInString`, ...).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    One,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    Literal(&'static str, usize),
}

/// Go's JSON whitespace.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        b'\\' => "'\\\\'".to_owned(),
        0x07 => "'\\a'".to_owned(),
        0x08 => "'\\b'".to_owned(),
        0x0c => "'\\f'".to_owned(),
        b'\n' => "'\\n'".to_owned(),
        b'\r' => "'\\r'".to_owned(),
        b'\t' => "'\\t'".to_owned(),
        0x0b => "'\\v'".to_owned(),
        0x00..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        0x80..=0xa0 | 0xad => format!("'\\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

/// Go's JSON decoder errors, with Go's texts (they reach users inside Kuma's validation
/// messages, so they read as Kuma's do).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GoJsonError {
    /// No value at all (Go's `io.EOF`).
    #[error("EOF")]
    Eof,
    /// The text ends inside a value (`io.ErrUnexpectedEOF`).
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// Go's `SyntaxError`: byte `ch` where `context` says what was expected.
    #[error("invalid character {} {context}", quote_char(*ch))]
    Syntax {
        /// The offending byte.
        ch: u8,
        /// Go's context (`looking for beginning of value`).
        context: String,
    },
    /// The text could not be read at all (too large, too deep: the codec's limits).
    #[error("{0}")]
    Codec(String),
}

/// Go's `SyntaxError` for byte `c` in `context`.
fn syntax(c: u8, context: &str) -> GoJsonError {
    GoJsonError::Syntax {
        ch: c,
        context: context.to_owned(),
    }
}

/// The first JSON value in `text` as Go's `json.Decoder.Decode` finds it: its kind and its
/// text, or Go's decoder error (`unexpected EOF`, `invalid character 'a' looking for beginning
/// of value`, `EOF`). What follows the value is not looked at.
pub(crate) fn first_value(text: &str) -> Result<(JsonKind, &str), GoJsonError> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut state = State::BeginValue;
    let mut kind: Option<JsonKind> = None;
    let (mut start, mut end) = (0, text.len());
    for (i, &c) in text.as_bytes().iter().enumerate() {
        let in_number = is_number(state);
        let started = kind.is_some();
        state = step(&mut stack, state, c, &mut kind)?;
        if !started && kind.is_some() {
            start = i;
        }
        if state == State::EndValue && stack.is_empty() {
            // The top-level value is complete; a number ends before the byte that ended it.
            end = if in_number { i } else { i + 1 };
            break;
        }
    }
    match kind {
        Some(k) if stack.is_empty() && (state == State::EndValue || is_number_end(state)) => {
            Ok((k, text.get(start..end).unwrap_or_default()))
        }
        None => Err(GoJsonError::Eof),
        Some(_) => Err(GoJsonError::UnexpectedEof),
    }
}

/// States inside a number literal.
fn is_number(state: State) -> bool {
    matches!(
        state,
        State::Neg
            | State::Zero
            | State::One
            | State::Dot
            | State::Dot0
            | State::E
            | State::ESign
            | State::E0
    )
}

/// States where a number literal may end.
fn is_number_end(state: State) -> bool {
    matches!(state, State::Zero | State::One | State::Dot0 | State::E0)
}

fn push(stack: &mut Vec<Frame>, frame: Frame, c: u8) -> Result<(), GoJsonError> {
    stack.push(frame);
    if stack.len() > MAX_DEPTH {
        return Err(syntax(c, "exceeded max depth"));
    }
    Ok(())
}

fn begin_value(
    stack: &mut Vec<Frame>,
    c: u8,
    kind: &mut Option<JsonKind>,
) -> Result<State, GoJsonError> {
    let (next, k) = match c {
        b'{' => {
            push(stack, Frame::ObjectKey, c)?;
            (State::BeginStringOrEmpty, JsonKind::Object)
        }
        b'[' => {
            push(stack, Frame::ArrayValue, c)?;
            (State::BeginValueOrEmpty, JsonKind::Array)
        }
        b'"' => (State::InString, JsonKind::String),
        b'-' => (State::Neg, JsonKind::Number),
        b'0' => (State::Zero, JsonKind::Number),
        b'1'..=b'9' => (State::One, JsonKind::Number),
        b't' => (State::Literal("true", 1), JsonKind::Bool),
        b'f' => (State::Literal("false", 1), JsonKind::Bool),
        b'n' => (State::Literal("null", 1), JsonKind::Null),
        _ => return Err(syntax(c, "looking for beginning of value")),
    };
    kind.get_or_insert(k);
    Ok(next)
}

fn end_value(stack: &mut Vec<Frame>, c: u8) -> Result<State, GoJsonError> {
    let Some(top) = stack.last_mut() else {
        return Ok(State::EndValue);
    };
    if is_space(c) {
        return Ok(State::EndValue);
    }
    match (*top, c) {
        (Frame::ObjectKey, b':') => {
            *top = Frame::ObjectValue;
            Ok(State::BeginValue)
        }
        (Frame::ObjectKey, _) => Err(syntax(c, "after object key")),
        (Frame::ObjectValue, b',') => {
            *top = Frame::ObjectKey;
            Ok(State::BeginString)
        }
        (Frame::ObjectValue, b'}') | (Frame::ArrayValue, b']') => {
            stack.pop();
            Ok(State::EndValue)
        }
        (Frame::ObjectValue, _) => Err(syntax(c, "after object key:value pair")),
        (Frame::ArrayValue, b',') => Ok(State::BeginValue),
        (Frame::ArrayValue, _) => Err(syntax(c, "after array element")),
    }
}

fn step(
    stack: &mut Vec<Frame>,
    state: State,
    c: u8,
    kind: &mut Option<JsonKind>,
) -> Result<State, GoJsonError> {
    match state {
        State::BeginValue if is_space(c) => Ok(state),
        State::BeginValue => begin_value(stack, c, kind),
        State::BeginValueOrEmpty if is_space(c) => Ok(state),
        State::BeginValueOrEmpty if c == b']' => end_value(stack, c),
        State::BeginValueOrEmpty => begin_value(stack, c, kind),
        State::BeginStringOrEmpty if is_space(c) => Ok(state),
        State::BeginStringOrEmpty if c == b'}' => {
            if let Some(top) = stack.last_mut() {
                *top = Frame::ObjectValue;
            }
            end_value(stack, c)
        }
        State::BeginStringOrEmpty | State::BeginString => {
            if is_space(c) {
                Ok(State::BeginString)
            } else if c == b'"' {
                Ok(State::InString)
            } else {
                Err(syntax(c, "looking for beginning of object key string"))
            }
        }
        State::EndValue => end_value(stack, c),
        State::InString => match c {
            b'"' => Ok(State::EndValue),
            b'\\' => Ok(State::InStringEsc),
            0x00..=0x1f => Err(syntax(c, "in string literal")),
            _ => Ok(state),
        },
        State::InStringEsc => match c {
            b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Ok(State::InString),
            b'u' => Ok(State::InStringEscU(0)),
            _ => Err(syntax(c, "in string escape code")),
        },
        State::InStringEscU(n) => {
            if !c.is_ascii_hexdigit() {
                Err(syntax(c, "in \\u hexadecimal character escape"))
            } else if n == 3 {
                Ok(State::InString)
            } else {
                Ok(State::InStringEscU(n + 1))
            }
        }
        State::Neg => match c {
            b'0' => Ok(State::Zero),
            b'1'..=b'9' => Ok(State::One),
            _ => Err(syntax(c, "in numeric literal")),
        },
        State::One if c.is_ascii_digit() => Ok(State::One),
        State::One | State::Zero => match c {
            b'.' => Ok(State::Dot),
            b'e' | b'E' => Ok(State::E),
            _ => end_value(stack, c),
        },
        State::Dot if c.is_ascii_digit() => Ok(State::Dot0),
        State::Dot => Err(syntax(c, "after decimal point in numeric literal")),
        State::Dot0 => match c {
            b'0'..=b'9' => Ok(State::Dot0),
            b'e' | b'E' => Ok(State::E),
            _ => end_value(stack, c),
        },
        State::E if c == b'+' || c == b'-' => Ok(State::ESign),
        State::E | State::ESign if c.is_ascii_digit() => Ok(State::E0),
        State::E | State::ESign => Err(syntax(c, "in exponent of numeric literal")),
        State::E0 if c.is_ascii_digit() => Ok(State::E0),
        State::E0 => end_value(stack, c),
        State::Literal(word, i) => {
            let expected = word.as_bytes().get(i).copied().unwrap_or(b' ');
            if c != expected {
                return Err(syntax(
                    c,
                    &format!("in literal {word} (expecting '{}')", char::from(expected)),
                ));
            }
            if i + 1 == word.len() {
                Ok(State::EndValue)
            } else {
                Ok(State::Literal(word, i + 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind of the first value (the checks of MeshProxyPatch's `SyntaxChecker`).
    fn first_value(text: &str) -> Result<JsonKind, String> {
        super::first_value(text)
            .map(|(kind, _)| kind)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn go_decoder_messages() {
        assert_eq!(first_value("{"), Err("unexpected EOF".to_owned()));
        assert_eq!(
            first_value("{\"a\": [1, 2"),
            Err("unexpected EOF".to_owned())
        );
        assert_eq!(first_value("   "), Err("EOF".to_owned()));
        assert_eq!(first_value("-"), Err("unexpected EOF".to_owned()));
        assert_eq!(
            first_value("a: [1, 2"),
            Err("invalid character 'a' looking for beginning of value".to_owned())
        );
        assert_eq!(
            first_value("{a: 1}"),
            Err("invalid character 'a' looking for beginning of object key string".to_owned())
        );
        assert_eq!(
            first_value("{\"a\" 1}"),
            Err("invalid character '1' after object key".to_owned())
        );
        assert_eq!(
            first_value("{\"a\": 1 \"b\"}"),
            Err("invalid character '\"' after object key:value pair".to_owned())
        );
        assert_eq!(
            first_value("[1 2]"),
            Err("invalid character '2' after array element".to_owned())
        );
        assert_eq!(
            first_value("[tru]"),
            Err("invalid character ']' in literal true (expecting 'e')".to_owned())
        );
        assert_eq!(
            first_value("[01]"),
            Err("invalid character '1' after array element".to_owned())
        );
        assert_eq!(
            first_value("[1.]"),
            Err("invalid character ']' after decimal point in numeric literal".to_owned())
        );
        assert_eq!(
            first_value("[1e]"),
            Err("invalid character ']' in exponent of numeric literal".to_owned())
        );
        assert_eq!(
            first_value("\"a\tb\""),
            Err("invalid character '\\t' in string literal".to_owned())
        );
        assert_eq!(
            first_value("\"\\x\""),
            Err("invalid character 'x' in string escape code".to_owned())
        );
        assert_eq!(
            first_value("\"\\u12g4\""),
            Err("invalid character 'g' in \\u hexadecimal character escape".to_owned())
        );
        assert_eq!(
            first_value("'a'"),
            Err("invalid character '\\'' looking for beginning of value".to_owned())
        );
        assert_eq!(
            first_value("é"),
            Err("invalid character 'Ã' looking for beginning of value".to_owned())
        );
        assert_eq!(first_value("{}"), Ok(JsonKind::Object));
        assert_eq!(
            first_value(" {\"a\": {\"b\": [1, -2.5e3, true, null, \"\\u00e9\"]}} trailing"),
            Ok(JsonKind::Object)
        );
        assert_eq!(first_value("[] x"), Ok(JsonKind::Array));
        assert_eq!(first_value("\"s\" x"), Ok(JsonKind::String));
        assert_eq!(first_value("12"), Ok(JsonKind::Number));
        assert_eq!(first_value("12 x"), Ok(JsonKind::Number));
        assert_eq!(first_value("1.5e+3"), Ok(JsonKind::Number));
        assert_eq!(first_value("true"), Ok(JsonKind::Bool));
        assert_eq!(first_value("null x"), Ok(JsonKind::Null));
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(
            first_value(&deep),
            Err("invalid character '[' exceeded max depth".to_owned())
        );
    }

    #[test]
    fn go_json_scanner_errors() {
        use super::first_value as go_first_json_value;
        let err = |s: &str| go_first_json_value(s).err().map(|e| e.to_string());
        assert_eq!(err("{"), Some("unexpected EOF".to_owned()));
        assert_eq!(err("  "), Some("EOF".to_owned()));
        assert_eq!(err("[1, 2"), Some("unexpected EOF".to_owned()));
        assert_eq!(
            err("{a: 1}"),
            Some("invalid character 'a' looking for beginning of object key string".to_owned())
        );
        assert_eq!(
            err("{\"a\" 1}"),
            Some("invalid character '1' after object key".to_owned())
        );
        assert_eq!(
            err("{\"a\": 1 \"b\"}"),
            Some("invalid character '\"' after object key:value pair".to_owned())
        );
        assert_eq!(
            err("[1 2]"),
            Some("invalid character '2' after array element".to_owned())
        );
        assert_eq!(err("tru"), Some("unexpected EOF".to_owned()));
        assert_eq!(
            err("trUe"),
            Some("invalid character 'U' in literal true (expecting 'u')".to_owned())
        );
        assert_eq!(
            err("-x"),
            Some("invalid character 'x' in numeric literal".to_owned())
        );
        assert_eq!(
            err("1.x"),
            Some("invalid character 'x' after decimal point in numeric literal".to_owned())
        );
        assert_eq!(
            err("1ex"),
            Some("invalid character 'x' in exponent of numeric literal".to_owned())
        );
        assert_eq!(
            err("\"a\\q\""),
            Some("invalid character 'q' in string escape code".to_owned())
        );
        assert_eq!(
            err("\"\\u12g4\""),
            Some("invalid character 'g' in \\u hexadecimal character escape".to_owned())
        );
        assert_eq!(
            err("\"a\tb\""),
            Some("invalid character '\\t' in string literal".to_owned())
        );
        assert_eq!(
            err("'x'"),
            Some("invalid character '\\'' looking for beginning of value".to_owned())
        );
        assert_eq!(
            err("\u{e9}"),
            Some("invalid character '\u{c3}' looking for beginning of value".to_owned())
        );
        assert_eq!(
            err(&"[".repeat(10_001)),
            Some("invalid character '[' exceeded max depth".to_owned())
        );
        fn ok(s: &str) -> Option<(JsonKind, &str)> {
            go_first_json_value(s).ok()
        }
        assert_eq!(
            ok(" {\"a\": [1, {}]} trailing"),
            Some((JsonKind::Object, "{\"a\": [1, {}]}"))
        );
        assert_eq!(ok("-1.5e+3"), Some((JsonKind::Number, "-1.5e+3")));
        assert_eq!(ok("12abc"), Some((JsonKind::Number, "12")));
        assert_eq!(ok("null"), Some((JsonKind::Null, "null")));
        assert_eq!(
            ok("\"s\\u00e9\" x"),
            Some((JsonKind::String, "\"s\\u00e9\""))
        );
        assert_eq!(ok("[]"), Some((JsonKind::Array, "[]")));
    }
}

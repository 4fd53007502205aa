//! Text codecs: YAML (multi-document) and JSON bytes to [`serde_json::Value`] documents, with
//! hard limits so hostile input costs bounded work and never panics.
//!
//! Behaviour follows Kuma's universal-format loader where it matters to users:
//! - several resources in one file separated by `---`; empty documents (a leading `---`,
//!   comment-only headers) are dropped;
//! - duplicate mapping keys keep the *last* value, as Go's YAML library does (Kuma's fixture
//!   `matchers/torules/03.policies.yaml` depends on this);
//! - plain scalars resolve with the YAML 1.2 core schema (`null`, `true`, `42`, `1.5`);
//!   quoted scalars and `!!str` are strings.
//!
//! Limits ([`Limits`]): input size, nesting depth and total nodes, and a separate, small budget
//! for what aliases add (nodes and string bytes), checked before an alias is expanded, so a
//! "billion laughs" document is refused after a few hundred KiB instead of after tens of MiB.
//! Non-UTF-8 input is an error.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// Bounds on what one decode may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum input size in bytes (default 4 MiB).
    pub max_bytes: usize,
    /// Maximum nesting of mappings and sequences (default 64).
    pub max_depth: usize,
    /// Maximum number of nodes produced, aliases expanded (default 200,000: a Dataplane with
    /// a thousand outbounds has about 10,000).
    pub max_nodes: usize,
    /// Maximum nodes that alias expansion may add (default 10,000).
    pub max_alias_nodes: usize,
    /// Maximum string and key bytes that alias expansion may add (default 256 KiB).
    pub max_alias_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 20,
            max_depth: 64,
            max_nodes: 200_000,
            max_alias_nodes: 10_000,
            max_alias_bytes: 256 << 10,
        }
    }
}

impl Limits {
    /// Limits for a local file of many resources (`umbractl apply -f` of a whole mesh export):
    /// 64 MiB and 5,000,000 nodes; aliases as for one API body.
    pub fn local_file() -> Self {
        Self {
            max_bytes: 64 << 20,
            max_nodes: 5_000_000,
            ..Self::default()
        }
    }
}

/// Why bytes could not be decoded into documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Input larger than [`Limits::max_bytes`].
    #[error("document is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// Input size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Input is not UTF-8.
    #[error("document is not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// Nesting deeper than [`Limits::max_depth`].
    #[error("document nests deeper than {limit} levels")]
    TooDeep {
        /// The depth limit.
        limit: usize,
    },
    /// More nodes than [`Limits::max_nodes`] (after alias expansion).
    #[error("document has more than {limit} nodes (aliases expanded)")]
    TooManyNodes {
        /// The node limit.
        limit: usize,
    },
    /// Aliases would add more than [`Limits::max_alias_nodes`] nodes or
    /// [`Limits::max_alias_bytes`] bytes.
    #[error("aliases expand to more than {nodes} nodes or {bytes} bytes")]
    AliasExpansion {
        /// The alias node budget.
        nodes: usize,
        /// The alias byte budget.
        bytes: usize,
    },
    /// YAML or JSON syntax error, with the parser's position.
    #[error("invalid YAML/JSON: {0}")]
    Syntax(String),
    /// A construct JSON cannot represent (complex keys, `.nan`, unknown anchors).
    #[error("unsupported YAML: {0}")]
    Unsupported(String),
}

/// Decode YAML or JSON bytes into one [`Value`] per non-empty document, in order.
///
/// # Errors
/// [`CodecError`] for oversize, non-UTF-8, too deep or too large input and for syntax errors.
pub fn decode_documents(bytes: &[u8], limits: Limits) -> Result<Vec<Value>, CodecError> {
    if bytes.len() > limits.max_bytes {
        return Err(CodecError::TooLarge {
            size: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| CodecError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // JSON fast path; serde_json bounds its own recursion (128) and we bound ours after.
        match serde_json::from_str::<Value>(text) {
            Ok(v) => {
                check_shape(&v, limits)?;
                return Ok(vec![v]);
            }
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                return Err(CodecError::TooDeep {
                    limit: limits.max_depth,
                });
            }
            Err(_) => {}
        }
        // Not strict JSON: flow-style YAML, fall through to the YAML parser.
    }
    YamlBuilder::new(limits).run(text)
}

/// Decode exactly one document (an API body). Zero or several documents are an error.
///
/// # Errors
/// As [`decode_documents`], plus [`CodecError::Syntax`] when the count is not one.
pub fn decode_one(bytes: &[u8], limits: Limits) -> Result<Value, CodecError> {
    let mut docs = decode_documents(bytes, limits)?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        0 => Err(CodecError::Syntax("empty document".into())),
        n => Err(CodecError::Syntax(format!(
            "expected one document, found {n}"
        ))),
    }
}

fn check_shape(v: &Value, limits: Limits) -> Result<(), CodecError> {
    let mut stack = vec![(v, 1usize)];
    let mut nodes = 0usize;
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        if nodes > limits.max_nodes {
            return Err(CodecError::TooManyNodes {
                limit: limits.max_nodes,
            });
        }
        match v {
            Value::Array(a) => {
                if depth > limits.max_depth {
                    return Err(CodecError::TooDeep {
                        limit: limits.max_depth,
                    });
                }
                stack.extend(a.iter().map(|c| (c, depth + 1)));
            }
            Value::Object(o) => {
                if depth > limits.max_depth {
                    return Err(CodecError::TooDeep {
                        limit: limits.max_depth,
                    });
                }
                stack.extend(o.values().map(|c| (c, depth + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        map: Map<String, Value>,
        key: Option<String>,
        anchor: usize,
    },
}

struct YamlBuilder {
    limits: Limits,
    stack: Vec<Frame>,
    /// Anchored values with their node count and string bytes.
    anchors: std::collections::HashMap<usize, (Value, usize, usize)>,
    nodes: usize,
    bytes: usize,
    /// What aliases added so far (nodes, string bytes).
    alias_nodes: usize,
    alias_bytes: usize,
    docs: Vec<Value>,
    current: Option<Value>,
}

impl YamlBuilder {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            stack: Vec::new(),
            anchors: std::collections::HashMap::new(),
            nodes: 0,
            bytes: 0,
            alias_nodes: 0,
            alias_bytes: 0,
            docs: Vec::new(),
            current: None,
        }
    }

    fn run(mut self, text: &str) -> Result<Vec<Value>, CodecError> {
        let mut parser = Parser::new_from_str(text);
        loop {
            let (event, _mark) = parser
                .next_token()
                .map_err(|e| CodecError::Syntax(e.to_string()))?;
            match event {
                Event::StreamEnd => break,
                Event::Nothing | Event::StreamStart => {}
                Event::DocumentStart => {
                    self.current = None;
                    self.anchors.clear();
                }
                Event::DocumentEnd => {
                    if let Some(doc) = self.current.take() {
                        if !doc.is_null() {
                            self.docs.push(doc);
                        }
                    }
                }
                Event::Alias(id) => {
                    let (count, size) = self
                        .anchors
                        .get(&id)
                        .map(|(_, c, b)| (*c, *b))
                        .ok_or_else(|| CodecError::Unsupported("alias to unknown anchor".into()))?;
                    // Check the budgets before cloning anything.
                    self.alias_nodes = self.alias_nodes.saturating_add(count);
                    self.alias_bytes = self.alias_bytes.saturating_add(size);
                    if self.alias_nodes > self.limits.max_alias_nodes
                        || self.alias_bytes > self.limits.max_alias_bytes
                    {
                        return Err(CodecError::AliasExpansion {
                            nodes: self.limits.max_alias_nodes,
                            bytes: self.limits.max_alias_bytes,
                        });
                    }
                    self.count(count, size)?;
                    let value = self
                        .anchors
                        .get(&id)
                        .map(|(v, _, _)| v.clone())
                        .unwrap_or_default();
                    self.push_value(value, 0)?;
                }
                Event::Scalar(text, style, anchor, tag) => {
                    self.count(1, text.len())?;
                    let is_str_tag = tag.as_ref().is_some_and(|t| t.suffix == "str");
                    let value = if style == TScalarStyle::Plain && !is_str_tag {
                        resolve_plain(&text)?
                    } else {
                        Value::String(text)
                    };
                    self.push_value(value, anchor)?;
                }
                Event::SequenceStart(anchor, _) => {
                    self.count(1, 0)?;
                    self.enter()?;
                    self.stack.push(Frame::Seq {
                        items: Vec::new(),
                        anchor,
                    });
                }
                Event::MappingStart(anchor, _) => {
                    self.count(1, 0)?;
                    self.enter()?;
                    self.stack.push(Frame::Map {
                        map: Map::new(),
                        key: None,
                        anchor,
                    });
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let (value, anchor) = match self.stack.pop() {
                        Some(Frame::Seq { items, anchor }) => (Value::Array(items), anchor),
                        Some(Frame::Map {
                            map,
                            key: None,
                            anchor,
                        }) => (Value::Object(map), anchor),
                        Some(Frame::Map { key: Some(_), .. }) | None => {
                            return Err(CodecError::Syntax("unbalanced collection".into()))
                        }
                    };
                    self.push_value(value, anchor)?;
                }
            }
        }
        Ok(self.docs)
    }

    fn count(&mut self, nodes: usize, bytes: usize) -> Result<(), CodecError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > self.limits.max_nodes {
            return Err(CodecError::TooManyNodes {
                limit: self.limits.max_nodes,
            });
        }
        self.bytes = self.bytes.saturating_add(bytes);
        let max = self
            .limits
            .max_bytes
            .saturating_add(self.limits.max_alias_bytes);
        if self.bytes > max {
            return Err(CodecError::TooLarge {
                size: self.bytes,
                limit: max,
            });
        }
        Ok(())
    }

    fn enter(&self) -> Result<(), CodecError> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(CodecError::TooDeep {
                limit: self.limits.max_depth,
            });
        }
        Ok(())
    }

    fn push_value(&mut self, value: Value, anchor: usize) -> Result<(), CodecError> {
        if anchor != 0 {
            let (nodes, bytes) = node_count(&value);
            self.anchors.insert(anchor, (value.clone(), nodes, bytes));
        }
        match self.stack.last_mut() {
            None => self.current = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                None => {
                    let k = match value {
                        Value::String(s) => s,
                        Value::Null => "null".to_owned(),
                        Value::Bool(b) => b.to_string(),
                        Value::Number(n) => n.to_string(),
                        Value::Array(_) | Value::Object(_) => {
                            return Err(CodecError::Unsupported(
                                "mapping keys must be scalars".into(),
                            ))
                        }
                    };
                    *key = Some(k);
                }
                Some(k) => {
                    // Duplicate keys: the last value wins, like Go's YAML library.
                    map.insert(k, value);
                }
            },
        }
        Ok(())
    }
}

/// Nodes and string/key bytes of a value.
fn node_count(v: &Value) -> (usize, usize) {
    let mut stack = vec![v];
    let (mut n, mut bytes) = (0usize, 0usize);
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(o) => {
                bytes = bytes.saturating_add(o.keys().map(String::len).sum());
                stack.extend(o.values());
            }
            Value::String(s) => bytes = bytes.saturating_add(s.len()),
            _ => {}
        }
    }
    (n, bytes)
}

fn resolve_plain(s: &str) -> Result<Value, CodecError> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "-.inf" | ".nan" | ".NaN" | ".NAN" => {
            return Err(CodecError::Unsupported(format!("{s:?} has no JSON form")))
        }
        _ => {}
    }
    let (sign, digits) = match s.as_bytes()[0] {
        b'-' => (-1i128, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let int = if let Some(h) = digits.strip_prefix("0x") {
        parse_radix(h, 16)
    } else if let Some(o) = digits.strip_prefix("0o") {
        parse_radix(o, 8)
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        parse_radix(digits, 10)
    } else {
        None
    };
    if let Some(i) = int {
        let i = sign * i;
        if let Ok(v) = i64::try_from(i) {
            return Ok(Value::Number(v.into()));
        }
        if let Ok(v) = u64::try_from(i) {
            return Ok(Value::Number(v.into()));
        }
        // Too big for 64 bits: keep it as a float, as JSON parsers do.
        #[allow(clippy::cast_precision_loss)]
        return Ok(
            Number::from_f64(i as f64).map_or_else(|| Value::String(s.into()), Value::Number)
        );
    }
    if is_yaml_float(digits) {
        if let Ok(f) = s.parse::<f64>() {
            if let Some(n) = Number::from_f64(f) {
                return Ok(Value::Number(n));
            }
        }
    }
    Ok(Value::String(s.to_owned()))
}

fn parse_radix(digits: &str, radix: u32) -> Option<i128> {
    if digits.is_empty() || digits.len() > 40 {
        return None;
    }
    i128::from_str_radix(digits, radix).ok()
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` without the sign.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let exp = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

/// Render a JSON value as one YAML document (for `Accept: application/yaml` responses). Key
/// order is kept; strings that would read back as another type are quoted by the emitter.
pub fn encode_yaml(value: &Value) -> String {
    fn to_yaml(v: &Value) -> yaml_rust2::Yaml {
        use yaml_rust2::Yaml;
        match v {
            Value::Null => Yaml::Null,
            Value::Bool(b) => Yaml::Boolean(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Yaml::Integer(i),
                None => Yaml::Real(n.to_string()),
            },
            Value::String(s) => Yaml::String(s.clone()),
            Value::Array(items) => Yaml::Array(items.iter().map(to_yaml).collect()),
            Value::Object(map) => Yaml::Hash(
                map.iter()
                    .map(|(k, v)| (Yaml::String(k.clone()), to_yaml(v)))
                    .collect(),
            ),
        }
    }
    let mut out = String::new();
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut out);
    // Writing into a String cannot fail.
    let _ = emitter.dump(&to_yaml(value));
    let body = out.strip_prefix("---\n").unwrap_or(&out).to_owned();
    body + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn docs(s: &str) -> Vec<Value> {
        decode_documents(s.as_bytes(), Limits::default()).unwrap()
    }

    #[test]
    fn multi_document_with_leading_separator_and_comments() {
        let d =
            docs("# header only\n---\ntype: A\nname: a\n---\n---\ntype: B\nname: '1'\nport: 80\n");
        assert_eq!(
            d,
            vec![
                json!({"type":"A","name":"a"}),
                json!({"type":"B","name":"1","port":80})
            ]
        );
    }

    #[test]
    fn duplicate_keys_last_wins() {
        assert_eq!(docs("name: a\nname: b\n"), vec![json!({"name":"b"})]);
    }

    #[test]
    fn scalars_resolve_with_core_schema() {
        let d = docs("a: 1\nb: -2.5\nc: true\nd: ~\ne: '3'\nf: 0x10\ng: 1e3\nh: 10s\ni: !!str 5\nj: 18446744073709551615\n");
        assert_eq!(
            d[0],
            json!({"a":1,"b":-2.5,"c":true,"d":null,"e":"3","f":16,"g":1000.0,"h":"10s","i":"5","j":18446744073709551615u64})
        );
    }

    #[test]
    fn json_input_is_accepted() {
        assert_eq!(
            docs(r#"{"type":"Mesh","name":"x"}"#),
            vec![json!({"type":"Mesh","name":"x"})]
        );
        // flow-style YAML that is not strict JSON
        assert_eq!(
            docs("{type: Mesh, name: x}"),
            vec![json!({"type":"Mesh","name":"x"})]
        );
    }

    #[test]
    fn hostile_inputs_are_errors_not_panics() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(matches!(
            decode_documents(deep.as_bytes(), Limits::default()),
            Err(CodecError::TooDeep { .. })
        ));
        let deep_yaml: String = (0..200)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        assert!(matches!(
            decode_documents(deep_yaml.as_bytes(), Limits::default()),
            Err(CodecError::TooDeep { .. })
        ));
        let big = vec![b'a'; 10 << 20];
        assert!(matches!(
            decode_documents(&big, Limits::default()),
            Err(CodecError::TooLarge { .. })
        ));
        assert!(matches!(
            decode_documents(b"a: \xff\xfe", Limits::default()),
            Err(CodecError::NotUtf8 { .. })
        ));
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
        assert!(matches!(
            decode_documents(bomb.as_bytes(), Limits::default()),
            Err(CodecError::AliasExpansion { .. })
        ));
        // Without aliases, the node limit holds.
        let many = format!("[{}]", vec!["1"; 200_001].join(","));
        assert!(matches!(
            decode_documents(many.as_bytes(), Limits::default()),
            Err(CodecError::TooManyNodes { .. })
        ));
        assert!(matches!(
            decode_documents(b"a: [1, 2", Limits::default()),
            Err(CodecError::Syntax(_))
        ));
        assert!(decode_documents(b"? [a]\n: b\n", Limits::default()).is_err());
    }

    #[test]
    fn aliases_of_large_strings_are_bounded_by_bytes() {
        let big = "x".repeat(1 << 20);
        let mut doc = format!("a: &a {big}\nb:\n");
        for _ in 0..2000 {
            doc.push_str("- *a\n");
        }
        assert!(matches!(
            decode_documents(doc.as_bytes(), Limits::default()),
            Err(CodecError::AliasExpansion { .. })
        ));
    }

    #[test]
    fn aliases_expand() {
        assert_eq!(
            docs("a: &x {k: v}\nb: *x\n"),
            vec![json!({"a":{"k":"v"},"b":{"k":"v"}})]
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "(?s).{0,200}") {
            let _ = decode_documents(s.as_bytes(), Limits::default());
        }

        #[test]
        fn json_values_round_trip(v in arb_json()) {
            let text = serde_json::to_string(&v).unwrap();
            let back = decode_documents(text.as_bytes(), Limits::default()).unwrap();
            if v.is_null() { proptest::prop_assert!(back.len() <= 1); } else { proptest::prop_assert_eq!(back, vec![v]); }
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| Value::Number(i.into())),
            "[a-z0-9 :-]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn yaml_output_reads_back_as_the_same_value() {
        let v: Value = serde_json::from_str(
            r#"{"type":"MeshTimeout","name":"t","labels":{"a":"true","b":"1"},"spec":{"n":3,"f":1.5,"x":null,"l":[{"k":"v"}],"e":{}}}"#,
        )
        .unwrap();
        let y = encode_yaml(&v);
        assert!(y.starts_with("type: MeshTimeout\n"), "{y}");
        assert_eq!(decode_one(y.as_bytes(), Limits::default()).unwrap(), v);
    }
}

//! A YAML document as the Go service's `gopkg.in/yaml.v2` sees it: a tree of mappings, lists
//! and scalars, the scalars resolved by yaml.v2's YAML 1.1 rules (`yes` and `on` are booleans,
//! `0x1F` and `1_000` integers, `1.5` a float), aliases expanded and `<<` merge keys applied.
//! Only the first document of a file is read, as `yaml.Unmarshal` does.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// The most nodes alias expansion may produce, against "billion laughs" documents.
const MAX_EXPANDED_NODES: usize = 1_000_000;
/// The deepest nesting accepted, so that the recursive walks stay within the stack.
const MAX_DEPTH: usize = 256;

/// A scalar's value under yaml.v2's rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    /// An integer that fits Go's `int` (64 bits).
    Int(i64),
    /// An integer beyond `i64` that fits `u64` (Go decodes it as `uint64`).
    Uint(u64),
    Float(f64),
    Str,
}

/// One node with where it starts (line and column from 1).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// The text as written (without quotes) and its resolved value.
    Scalar(String, Scalar),
    List(Vec<Node>),
    /// Keys in first-seen order; a repeated key replaces the earlier value (yaml.v2).
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The YAML tag yaml.v2 names in its type errors.
    pub(crate) fn tag(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar(_, Scalar::Null) => "!!null",
            Kind::Scalar(_, Scalar::Bool(_)) => "!!bool",
            Kind::Scalar(_, Scalar::Int(_) | Scalar::Uint(_)) => "!!int",
            Kind::Scalar(_, Scalar::Float(_)) => "!!float",
            Kind::Scalar(_, Scalar::Str) => "!!str",
            Kind::List(_) => "!!seq",
            Kind::Map(_) => "!!map",
        }
    }

    /// The scalar's text, empty for a list or mapping.
    pub(crate) fn text(&self) -> &str {
        match &self.kind {
            Kind::Scalar(text, _) => text,
            _ => "",
        }
    }
}

/// Why a document could not be read: a message and where (line, column from 1).
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
}

/// The first document of `text`, or `None` when there is none (an empty file, only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        nodes: 0,
        last: (1, 1),
    };
    loop {
        match builder.next()? {
            (Event::StreamStart, _) => {}
            (Event::DocumentStart(_), _) => {
                let (event, span) = builder.next()?;
                if matches!(event, Event::DocumentEnd) {
                    return Ok(None);
                }
                return builder.node(event, span, 0).map(Some);
            }
            _ => return Ok(None),
        }
    }
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    last: (usize, usize),
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), SyntaxError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => {
                self.last = (span.start.line(), span.start.col() + 1);
                Ok((event, span))
            }
            Some(Err(e)) => Err(SyntaxError {
                line: e.marker().line(),
                column: e.marker().col() + 1,
                message: e.info().to_owned(),
            }),
            None => Err(self.error("found unexpected end of stream")),
        }
    }

    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            line: self.last.0,
            column: self.last.1,
            message: message.into(),
        }
    }

    fn count(&mut self, n: usize) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_EXPANDED_NODES {
            return Err(self.error("document contains excessive aliasing"));
        }
        Ok(())
    }

    fn node(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("exceeded max depth"));
        }
        let (line, column) = (span.start.line(), span.start.col() + 1);
        self.count(1)?;
        let (kind, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| t.suffix.clone());
                let value = if tag.as_deref() == Some("str") || style != ScalarStyle::Plain {
                    Scalar::Str
                } else {
                    resolve(&text)
                };
                (Kind::Scalar(text.into_owned(), value), anchor)
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| self.error("unknown anchor referenced"))?;
                self.count(size(&node))?;
                return Ok(node);
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, span, depth + 1)?);
                }
                (Kind::List(items), anchor)
            }
            Event::MappingStart(anchor, _) => (Kind::Map(self.mapping(depth)?), anchor),
            _ => return Err(self.error("did not find expected node content")),
        };
        let node = Node { kind, line, column };
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    fn mapping(&mut self, depth: usize) -> Result<Vec<(Node, Node)>, SyntaxError> {
        let mut entries: Vec<(Node, Node)> = Vec::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                return Ok(entries);
            }
            let is_merge =
                matches!(&event, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
            let key = self.node(event, span, depth + 1)?;
            if matches!(key.kind, Kind::List(_) | Kind::Map(_)) {
                return Err(self.error("invalid map key"));
            }
            let (event, span) = self.next()?;
            let value = self.node(event, span, depth + 1)?;
            if is_merge {
                let sources = match value.kind {
                    Kind::Map(_) => vec![value],
                    Kind::List(items) => items,
                    _ => {
                        return Err(
                            self.error("map merge requires map or sequence of maps as the value")
                        );
                    }
                };
                for source in sources {
                    let Kind::Map(pairs) = source.kind else {
                        return Err(
                            self.error("map merge requires map or sequence of maps as the value")
                        );
                    };
                    for (k, v) in pairs {
                        insert(&mut entries, k, v);
                    }
                }
            } else {
                insert(&mut entries, key, value);
            }
        }
    }
}

fn insert(entries: &mut Vec<(Node, Node)>, key: Node, value: Node) {
    match entries.iter_mut().find(|(k, _)| same_key(k, &key)) {
        Some(slot) => slot.1 = value,
        None => entries.push((key, value)),
    }
}

/// Whether two scalar keys are one key of a Go `map[interface{}]interface{}`.
fn same_key(a: &Node, b: &Node) -> bool {
    match (&a.kind, &b.kind) {
        (Kind::Scalar(ta, Scalar::Str), Kind::Scalar(tb, Scalar::Str)) => ta == tb,
        (Kind::Scalar(_, va), Kind::Scalar(_, vb)) => va == vb && !matches!(va, Scalar::Str),
        _ => false,
    }
}

fn size(node: &Node) -> usize {
    match &node.kind {
        Kind::Scalar(..) => 1,
        Kind::List(items) => 1 + items.iter().map(size).sum::<usize>(),
        Kind::Map(pairs) => 1 + pairs.iter().map(|(k, v)| size(k) + size(v)).sum::<usize>(),
    }
}

/// yaml.v2's `resolve` for a plain scalar.
pub(crate) fn resolve(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Scalar::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes()[0] {
        b'.' => match text.parse::<f64>() {
            Ok(f) if go_float_syntax(&text[1..]) => Scalar::Float(f),
            _ => Scalar::Str,
        },
        b'0'..=b'9' | b'+' | b'-' => {
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            if let Some(v) = go_parse_int(&plain) {
                if let Ok(i) = i64::try_from(v) {
                    return Scalar::Int(i);
                }
                if let (Ok(u), false) = (u64::try_from(v), plain.starts_with(['+', '-'])) {
                    return Scalar::Uint(u);
                }
            }
            if yaml_style_float(&plain)
                && let Ok(f) = plain.parse::<f64>()
            {
                return Scalar::Float(f);
            }
            let (negative, digits) = match plain.strip_prefix("-0b") {
                Some(d) => (true, Some(d)),
                None => (false, plain.strip_prefix("0b")),
            };
            match digits.and_then(|d| i64::from_str_radix(d, 2).ok()) {
                Some(v) if negative => Scalar::Int(-v),
                Some(v) => Scalar::Int(v),
                None => Scalar::Str,
            }
        }
        _ => Scalar::Str,
    }
}

/// `.5`, `.5e3`: digits, then an optional exponent (what Go's `ParseFloat` takes after a dot).
fn go_float_syntax(rest: &str) -> bool {
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(mantissa) && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

/// Go's `strconv.ParseInt(s, 0, 64)` syntax (sign, then `0x`, `0o`, `0b`, a leading `0` for
/// octal, or decimal), without its range check.
fn go_parse_int(s: &str) -> Option<i128> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || digits.len() > 40 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -v } else { v })
}

/// yaml.v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac),
        Some((int, frac)) => digits(int) && digits(frac),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_resolve_as_yaml_v2() {
        assert_eq!(resolve("yes"), Scalar::Bool(true));
        assert_eq!(resolve("Off"), Scalar::Bool(false));
        assert_eq!(resolve("~"), Scalar::Null);
        assert_eq!(resolve("0x1F"), Scalar::Int(31));
        assert_eq!(resolve("1_000"), Scalar::Int(1000));
        assert_eq!(resolve("017"), Scalar::Int(15));
        assert_eq!(resolve("-5"), Scalar::Int(-5));
        assert_eq!(resolve("18446744073709551615"), Scalar::Uint(u64::MAX));
        assert_eq!(resolve("1.5"), Scalar::Float(1.5));
        assert_eq!(resolve("08"), Scalar::Float(8.0));
        assert_eq!(resolve(".5"), Scalar::Float(0.5));
        assert_eq!(resolve("1e3"), Scalar::Float(1000.0));
        assert_eq!(resolve("1.2.3"), Scalar::Str);
        assert_eq!(resolve("-"), Scalar::Str);
        assert_eq!(resolve("second"), Scalar::Str);
        assert_eq!(resolve("2001-12-14"), Scalar::Str);
    }

    #[test]
    fn only_the_first_document_is_read() {
        let node = parse("a: 1\n---\n: : [\n").unwrap().unwrap();
        assert!(matches!(node.kind, Kind::Map(ref m) if m.len() == 1));
        assert!(parse("# nothing\n").unwrap().is_none());
        assert!(parse("").unwrap().is_none());
    }

    #[test]
    fn aliases_merges_and_repeated_keys() {
        let node = parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\nm2: *b\nk: 1\nk: 2\n")
            .unwrap()
            .unwrap();
        let Kind::Map(top) = node.kind else { panic!() };
        assert_eq!(top.len(), 4);
        let Kind::Map(ref m) = top[1].1.kind else {
            panic!()
        };
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].1.text(), "3");
        assert_eq!(top[3].1.text(), "2");
    }

    #[test]
    fn unterminated_quote_is_a_syntax_error() {
        assert!(parse("'''\n").is_err());
    }

    #[test]
    fn aliasing_is_bounded() {
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            doc.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse(&doc).is_err());
    }
}

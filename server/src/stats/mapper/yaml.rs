//! The mapping file as a tree of mappings, lists and scalars, each node with its line, so that
//! every error can name the line it is about. Anchors and aliases are expanded (bounded);
//! merge keys (`<<`) and repeated keys are refused rather than guessed at.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// The most nodes alias expansion may produce, against "billion laughs" documents.
const MAX_NODES: usize = 100_000;
/// The deepest nesting accepted, so that the recursive walk stays within the stack.
const MAX_DEPTH: usize = 64;

/// One node and the line it starts on (from 1).
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) kind: Kind,
    pub(super) line: usize,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// The text as written (without quotes), and whether it was plain (unquoted, untagged):
    /// only a plain scalar can be a number, a boolean or null.
    Scalar {
        text: String,
        plain: bool,
    },
    List(Vec<Node>),
    /// Keys in the order written, each with the line it is on.
    Map(Vec<(String, usize, Node)>),
}

impl Node {
    /// Whether this is yaml.v2's null: an empty plain scalar, `~` or `null`.
    pub(super) fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { text, plain: true }
            if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }
}

/// The first document of `text`, or `None` when it has none (an empty file, only comments).
/// The error is a sentence naming its line.
pub(super) fn parse(text: &str) -> Result<Option<Node>, String> {
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        nodes: 0,
        line: 1,
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
    line: usize,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), String> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => {
                self.line = span.start.line();
                Ok((event, span))
            }
            Some(Err(e)) => Err(format!("line {}: {}", e.marker().line(), e.info())),
            None => Err(self.error("unexpected end of the document")),
        }
    }

    fn error(&self, message: &str) -> String {
        format!("line {}: {message}", self.line)
    }

    fn count(&mut self, n: usize) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(self.error("too many nodes once aliases are expanded"));
        }
        Ok(())
    }

    fn node(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deep"));
        }
        let line = span.start.line();
        self.count(1)?;
        let (kind, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == ScalarStyle::Plain && tag.is_none();
                let text = text.into_owned();
                (Kind::Scalar { text, plain }, anchor)
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| self.error("unknown anchor"))?;
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
            _ => return Err(self.error("expected a value")),
        };
        let node = Node { kind, line };
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    fn mapping(&mut self, depth: usize) -> Result<Vec<(String, usize, Node)>, String> {
        let mut entries: Vec<(String, usize, Node)> = Vec::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                return Ok(entries);
            }
            let key = self.node(event, span, depth + 1)?;
            let Kind::Scalar { text: key, plain } = key.kind else {
                return Err(format!("line {}: a key must be a scalar", key.line));
            };
            let line = span.start.line();
            if plain && key == "<<" {
                return Err(format!(
                    "line {line}: merge keys (`<<`) are not supported in a mapping file"
                ));
            }
            if entries.iter().any(|(k, _, _)| *k == key) {
                return Err(format!("line {line}: `{key}` is given twice"));
            }
            let (event, span) = self.next()?;
            let value = self.node(event, span, depth + 1)?;
            entries.push((key, line, value));
        }
    }
}

fn size(node: &Node) -> usize {
    match &node.kind {
        Kind::Scalar { .. } => 1,
        Kind::List(items) => 1 + items.iter().map(size).sum::<usize>(),
        Kind::Map(pairs) => 1 + pairs.iter().map(|(_, _, v)| 1 + size(v)).sum::<usize>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_aliases_and_refusals() {
        let doc = "a: &x [1, 2]\nb:\n  c: 'q'\nd: *x\n";
        let node = parse(doc).unwrap().unwrap();
        let Kind::Map(top) = node.kind else { panic!() };
        assert_eq!(top[1].1, 2);
        let Kind::Map(ref b) = top[1].2.kind else {
            panic!()
        };
        assert_eq!(b[0].2.line, 3);
        assert!(matches!(&b[0].2.kind, Kind::Scalar { text, plain: false } if text == "q"));
        assert!(matches!(&top[2].2.kind, Kind::List(items) if items.len() == 2));
        assert!(parse("# nothing\n").unwrap().is_none());
        let merge = parse("a: &x {b: 1}\nc:\n  <<: *x\n").unwrap_err();
        assert!(merge.starts_with("line 3:"), "{merge}");
        let twice = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(twice.starts_with("line 3:"), "{twice}");
        assert!(parse("a: 'open\n").is_err());
    }
}

//! A YAML document as a tree in which every node keeps its line and column.
//!
//! serde-based readers stop at the first error and lose positions after deserialising; the
//! config checker needs to report *every* mistake at its exact place, so it walks this tree by
//! hand. The tree is built from `saphyr-parser` events (pure Rust, YAML 1.2).

use saphyr_parser::{Event, Parser, ScalarStyle};
use std::collections::HashMap;

/// How many nodes all the aliases of one document may produce together (a map entry's key
/// counts as a node). Aliases are copied, so without a bound ten nested lists of ten aliases
/// (a "billion laughs" file of 500 bytes) would expand to 10^10 nodes and exhaust memory.
/// Real configs reuse a few headers or checks and stay far below it.
pub const MAX_ALIAS_NODES: usize = 10_000;

/// How many keys one mapping may hold. The largest mappings of a real config are its named
/// sections (`targets`, `profiles`, `slos`, `journeys`); the daemon is measured at 1,000
/// profiles (a 21 MB scrape), and this leaves ten times that. It also stays under the 32,768
/// entries `http::HeaderMap` holds (a target's `headers`). The 4 MiB file bound alone would let
/// one mapping hold about 800,000 keys; past this one the parse stops with the position of the
/// first key too many, so the time to that error does not grow with the file.
pub const MAX_MAP_KEYS: usize = 10_000;

/// 1-based line and column of a node's first character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    /// A scalar's text. `quoted` is true for quoted and block scalars, which are always strings.
    Scalar {
        text: String,
        quoted: bool,
    },
    Seq(Vec<Node>),
    /// Keys in document order, each with its own position.
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl Node {
    /// The scalar text, when this node is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        match &self.value {
            Value::Null => true,
            Value::Scalar { text, quoted } => {
                !quoted && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL")
            }
            _ => false,
        }
    }

    /// A short description of the node's kind for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        if self.is_null() {
            return "nothing";
        }
        match &self.value {
            Value::Null => "nothing",
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// Parses one YAML document. An empty input yields a null node at 1:1.
pub fn parse(src: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder::default();
    run(&mut builder, src)?;
    Ok(builder.root.unwrap_or(Node {
        value: Value::Null,
        pos: Pos { line: 1, col: 1 },
    }))
}

/// Parses every document of a stream (`---` separated, as OpenSLO files are); anchors are
/// scoped to their document, the alias bound to the whole file.
pub fn parse_documents(src: &str) -> Result<Vec<Node>, SyntaxError> {
    let mut builder = Builder {
        multi: true,
        ..Builder::default()
    };
    run(&mut builder, src)?;
    Ok(builder.roots)
}

fn run(builder: &mut Builder, src: &str) -> Result<(), SyntaxError> {
    for item in Parser::new_from_str(src) {
        let (event, span) = item.map_err(|e| SyntaxError {
            pos: Pos {
                line: e.marker().line(),
                col: e.marker().col() + 1,
            },
            message: e.info().to_string(),
        })?;
        let pos = Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        };
        builder.event(event, pos)?;
        if builder.done {
            break;
        }
    }
    Ok(())
}

enum Frame {
    Seq(Node),
    /// An open mapping, the key waiting for its value, and the keys seen so far with their
    /// positions (hashed, so a duplicate is found in constant time: a linear search made
    /// 100,000 keys take 23 s).
    Map(Node, Option<(Key, Pos)>, HashMap<String, Pos>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    /// Anchored nodes by anchor id, for aliases.
    anchors: Vec<(usize, Node)>,
    /// Anchor ids of the open collections, parallel to `stack`.
    open_anchors: Vec<usize>,
    /// Nodes produced by aliases so far, bounded by [`MAX_ALIAS_NODES`].
    alias_nodes: usize,
    done: bool,
    documents: usize,
    /// Several documents allowed: each root goes to `roots`.
    multi: bool,
    roots: Vec<Node>,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, pos: Pos) -> Result<(), SyntaxError> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.multi {
                    self.anchors.clear();
                } else if self.documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a config file holds one YAML document; found a second `---`"
                            .into(),
                    });
                }
            }
            Event::StreamEnd => self.done = true,
            Event::Scalar(text, style, anchor, _) => {
                let node = Node {
                    value: Value::Scalar {
                        text: text.into_owned(),
                        quoted: !matches!(style, ScalarStyle::Plain),
                    },
                    pos,
                };
                if anchor > 0 {
                    self.anchors.push((anchor, node.clone()));
                }
                self.push(node, pos)?;
            }
            Event::Alias(id) => {
                let anchored = self
                    .anchors
                    .iter()
                    .rev()
                    .find(|(a, _)| *a == id)
                    .map(|(_, n)| n)
                    .ok_or_else(|| SyntaxError {
                        pos,
                        message: "alias to an unknown anchor".into(),
                    })?;
                // Counted before the copy is made, so a bomb is refused before it allocates.
                let left = MAX_ALIAS_NODES - self.alias_nodes;
                let Some(size) = size_within(anchored, left) else {
                    return Err(SyntaxError {
                        pos,
                        message: format!(
                            "aliases expand to more than {MAX_ALIAS_NODES} nodes in this file, \
                             the limit; write the repeated part out or nest fewer aliases"
                        ),
                    });
                };
                self.alias_nodes += size;
                let node = Node {
                    value: anchored.value.clone(),
                    pos,
                };
                self.push(node, pos)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq(Node {
                    value: Value::Seq(Vec::new()),
                    pos,
                }));
                self.open_anchors.push(anchor);
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(
                    Node {
                        value: Value::Map(Vec::new()),
                        pos,
                    },
                    None,
                    HashMap::new(),
                ));
                self.open_anchors.push(anchor);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.stack.pop() {
                    Some(Frame::Seq(n)) | Some(Frame::Map(n, _, _)) => n,
                    None => {
                        return Err(SyntaxError {
                            pos,
                            message: "unbalanced collection end".into(),
                        });
                    }
                };
                let anchor = self.open_anchors.pop().unwrap_or(0);
                if anchor > 0 {
                    self.anchors.push((anchor, node.clone()));
                }
                let at = node.pos;
                self.push(node, at)?;
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
        }
        Ok(())
    }

    fn push(&mut self, node: Node, pos: Pos) -> Result<(), SyntaxError> {
        match self.stack.last_mut() {
            None if self.multi => self.roots.push(node),
            None => self.root = Some(node),
            Some(Frame::Seq(seq)) => {
                if let Value::Seq(items) = &mut seq.value {
                    items.push(node);
                }
            }
            Some(Frame::Map(map, pending, seen)) => match pending.take() {
                None => {
                    let name = match &node.value {
                        Value::Scalar { text, .. } => text.clone(),
                        _ => {
                            return Err(SyntaxError {
                                pos,
                                message: "mapping keys must be plain strings".into(),
                            });
                        }
                    };
                    if seen.len() >= MAX_MAP_KEYS {
                        return Err(SyntaxError {
                            pos,
                            message: format!(
                                "the mapping that starts at line {} has more than {MAX_MAP_KEYS} \
                                 keys, the limit; split it or shorten it",
                                map.pos.line
                            ),
                        });
                    }
                    if let Some(first) = seen.insert(name.clone(), pos) {
                        return Err(SyntaxError {
                            pos,
                            message: format!(
                                "duplicate key `{name}` (first at line {})",
                                first.line
                            ),
                        });
                    }
                    *pending = Some((Key { name, pos }, pos));
                }
                Some((key, _)) => {
                    if let Value::Map(entries) = &mut map.value {
                        entries.push((key, node));
                    }
                }
            },
        }
        Ok(())
    }
}

/// The number of nodes in `node` (map keys included), or `None` when it is over `limit`.
/// Stops counting as soon as the limit is passed, so its cost is bounded by the limit too.
fn size_within(node: &Node, limit: usize) -> Option<usize> {
    let mut count = 0;
    let mut todo = vec![node];
    while let Some(n) = todo.pop() {
        count += 1;
        match &n.value {
            Value::Seq(items) => todo.extend(items),
            Value::Map(entries) => {
                count += entries.len();
                todo.extend(entries.iter().map(|(_, v)| v));
            }
            Value::Null | Value::Scalar { .. } => {}
        }
        if count > limit {
            return None;
        }
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_point_at_values() {
        let doc = parse("a: 1\nb:\n  c: [x, \"y\"]\n").unwrap();
        let Value::Map(entries) = &doc.value else {
            panic!("map")
        };
        assert_eq!(entries[0].0.pos, Pos { line: 1, col: 1 });
        assert_eq!(entries[0].1.pos, Pos { line: 1, col: 4 });
        let Value::Map(inner) = &entries[1].1.value else {
            panic!("map")
        };
        assert_eq!(inner[0].0.pos, Pos { line: 3, col: 3 });
        let Value::Seq(items) = &inner[0].1.value else {
            panic!("seq")
        };
        assert_eq!(items[1].pos, Pos { line: 3, col: 10 });
        assert!(matches!(
            &items[1].value,
            Value::Scalar { quoted: true, .. }
        ));
    }

    #[test]
    fn duplicate_keys_and_syntax_errors_have_positions() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.pos, Pos { line: 2, col: 1 });
        assert!(err.message.contains("duplicate key"));
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.pos.line >= 1, "{err:?}");
    }

    #[test]
    fn aliases_copy_the_anchored_value() {
        let doc = parse("base: &b {x: 1}\nother: *b\n").unwrap();
        let Value::Map(entries) = &doc.value else {
            panic!("map")
        };
        assert_eq!(entries[0].1.value, entries[1].1.value);
        assert_eq!(entries[1].1.pos.line, 2);
    }

    #[test]
    fn alias_expansion_is_bounded_and_the_error_points_at_the_alias() {
        // Within the limit: 100 aliases of a ten-item list.
        let mut ok = String::from("a: &a [x, x, x, x, x, x, x, x, x]\nb: [");
        ok.push_str(&vec!["*a"; 100].join(", "));
        ok.push_str("]\n");
        assert!(parse(&ok).is_ok());
        // Nested aliases: each level copies the one before ten times.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
        }
        let err = parse(&bomb).unwrap_err();
        assert!(
            err.message
                .contains("aliases expand to more than 10000 nodes")
        );
        // a3 is the first level whose copies pass 10,000 nodes (10 × 1,111 from line 4).
        assert_eq!(err.pos.line, 4, "{err:?}");
        assert_eq!(err.pos.col, 45, "the eighth `*a2`: {err:?}");
    }
}

//! Typed reads of a checked document's nodes: each read refuses a node of the wrong type
//! with the error and place the Go service gives (its `yaml.Unmarshal` into typed fields).

use super::error::{Place, RlsConfigError};
use super::yaml::{Kind, Node, Scalar};

/// The file being read, for errors.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn at(&self, node: &Node, path: &str) -> Place {
        Place::new(node.line, node.column, path)
    }

    fn wrong(&self, node: &Node, path: &str, expected: &'static str) -> RlsConfigError {
        RlsConfigError::WrongType {
            file: self.file.to_owned(),
            at: self.at(node, path),
            expected,
            found: node.tag(),
            value: node.text().to_owned(),
        }
    }

    pub(crate) fn extension(
        &self,
        node: &Node,
        path: &str,
        reason: impl Into<String>,
    ) -> RlsConfigError {
        RlsConfigError::InvalidExtension {
            file: self.file.to_owned(),
            at: self.at(node, path),
            reason: reason.into(),
        }
    }

    /// A Go `string` field: any scalar's text, empty for null.
    pub(crate) fn string(&self, node: Option<&Node>, path: &str) -> Result<String, RlsConfigError> {
        match node.map(|n| (n, &n.kind)) {
            None | Some((_, Kind::Scalar(_, Scalar::Null))) => Ok(String::new()),
            Some((_, Kind::Scalar(text, _))) => Ok(text.clone()),
            Some((n, _)) => Err(self.wrong(n, path, "string")),
        }
    }

    pub(crate) fn boolean(&self, node: Option<&Node>, path: &str) -> Result<bool, RlsConfigError> {
        match node.map(|n| (n, &n.kind)) {
            None | Some((_, Kind::Scalar(_, Scalar::Null))) => Ok(false),
            Some((_, Kind::Scalar(_, Scalar::Bool(b)))) => Ok(*b),
            Some((n, _)) => Err(self.wrong(n, path, "bool")),
        }
    }

    pub(crate) fn uint32(&self, node: Option<&Node>, path: &str) -> Result<u32, RlsConfigError> {
        match node.map(|n| (n, &n.kind)) {
            None | Some((_, Kind::Scalar(_, Scalar::Null))) => Ok(0),
            Some((n, Kind::Scalar(_, Scalar::Int(i)))) => {
                u32::try_from(*i).map_err(|_| self.wrong(n, path, "uint32"))
            }
            Some((n, _)) => Err(self.wrong(n, path, "uint32")),
        }
    }

    /// A Go slice: a list, or nothing for null.
    pub(crate) fn list<'n>(
        &self,
        node: Option<&'n Node>,
        path: &str,
    ) -> Result<&'n [Node], RlsConfigError> {
        match node.map(|n| (n, &n.kind)) {
            None | Some((_, Kind::Scalar(_, Scalar::Null))) => Ok(&[]),
            Some((_, Kind::List(items))) => Ok(items),
            Some((n, _)) => Err(self.wrong(n, path, "list")),
        }
    }

    /// A Go struct pointer or map: a mapping, or nothing for null.
    pub(crate) fn map<'n>(
        &self,
        node: Option<&'n Node>,
        path: &str,
    ) -> Result<Option<&'n [(Node, Node)]>, RlsConfigError> {
        match node.map(|n| (n, &n.kind)) {
            None | Some((_, Kind::Scalar(_, Scalar::Null))) => Ok(None),
            Some((_, Kind::Map(pairs))) => Ok(Some(pairs)),
            Some((n, _)) => Err(self.wrong(n, path, "mapping")),
        }
    }
}

/// The value of `key` in a checked mapping.
pub(crate) fn get<'n>(pairs: &'n [(Node, Node)], key: &str) -> Option<&'n Node> {
    pairs
        .iter()
        .find(|(k, _)| matches!(&k.kind, Kind::Scalar(t, Scalar::Str) if t == key))
        .map(|(_, v)| v)
}

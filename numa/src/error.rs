//! [`TopologyError`]: why a topology spec, split or `NUMA_RT_TOPOLOGY` was refused.

use std::error::Error;
use std::fmt;
use std::io;

/// What kind of problem a [`TopologyError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologyErrorKind {
    /// The spec is empty or blank.
    EmptySpec,
    /// A node's cpulist (or the spec's structure) does not parse.
    Malformed,
    /// A node names no CPU (`"0-1;"`).
    EmptyNode,
    /// A node names a CPU outside the process's affinity mask.
    CpuNotAllowed,
    /// A CPU is in two nodes (`"0;0"`).
    DuplicateCpu,
    /// On a kernel with several NUMA nodes, a node of `NUMA_RT_TOPOLOGY`
    /// names CPUs of two of them (`"0,2;1,3"` where 0-1 and 2-3 are the
    /// kernel's nodes).
    SpansNodes,
    /// The distances are missing for some nodes, of the wrong length, or
    /// out of range.
    BadDistances,
    /// `split(n)` with `n` = 0 or more nodes than allowed CPUs.
    BadNodeCount,
    /// The allowed CPUs (or the environment) could not be read.
    Io,
}

/// A topology that cannot be built: a malformed spec, an empty node, a CPU
/// outside the allowed set, a CPU in two nodes, bad distances, or an
/// impossible [`split`](crate::Topology::split).
///
/// The message names the spec (or `NUMA_RT_TOPOLOGY` and its value) and the
/// problem, e.g. `invalid topology spec "0;0": CPU 0 is in both node0 and
/// node1`. It converts into an [`io::Error`] of kind `InvalidInput`, so a
/// runtime builder returning `io::Result` can use `?`.
#[derive(Debug)]
pub struct TopologyError {
    /// The kind, for callers and tests that match on it.
    kind: TopologyErrorKind,
    /// What was being built, quoted in the message: `topology spec "0;0"`,
    /// `NUMA_RT_TOPOLOGY="0;0"` or `Topology::split(3)`.
    what: String,
    /// The problem, naming the node or CPUs at fault.
    detail: String,
    /// The underlying OS error for [`TopologyErrorKind::Io`].
    source: Option<io::Error>,
}

impl TopologyError {
    /// An error of `kind` about `what`.
    pub(crate) fn new(kind: TopologyErrorKind, what: String, detail: String) -> TopologyError {
        TopologyError {
            kind,
            what,
            detail,
            source: None,
        }
    }

    /// An OS error met while building `what`.
    pub(crate) fn io(what: String, detail: &str, source: io::Error) -> TopologyError {
        TopologyError {
            kind: TopologyErrorKind::Io,
            what,
            detail: format!("{detail}: {source}"),
            source: Some(source),
        }
    }

    /// The same problem, reported about `what` instead (for `from_env`).
    pub(crate) fn about(mut self, what: String) -> TopologyError {
        self.what = what;
        self
    }

    /// The kind of problem.
    pub fn kind(&self) -> TopologyErrorKind {
        self.kind
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match self.kind {
            TopologyErrorKind::Io => "cannot use",
            _ => "invalid",
        };
        write!(f, "{verb} {}: {}", self.what, self.detail)
    }
}

impl Error for TopologyError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn Error + 'static))
    }
}

impl From<TopologyError> for io::Error {
    /// `InvalidInput` carrying the message, or the OS error's own kind for
    /// [`TopologyErrorKind::Io`].
    fn from(err: TopologyError) -> io::Error {
        let kind = match &err.source {
            Some(source) => source.kind(),
            None => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_into_io_error() {
        let err = TopologyError::new(
            TopologyErrorKind::EmptyNode,
            "topology spec \"0;\"".into(),
            "node1 is empty".into(),
        );
        let io: io::Error = err.into();
        assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            io.to_string(),
            "invalid topology spec \"0;\": node1 is empty"
        );

        let err = TopologyError::io(
            "Topology::split(2)".into(),
            "cannot read the CPU affinity",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(err.source().is_some());
        assert!(err
            .to_string()
            .starts_with("cannot use Topology::split(2): cannot read"));
        assert_eq!(io::Error::from(err).kind(), io::ErrorKind::PermissionDenied);
    }
}

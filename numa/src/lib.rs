//! numa_rt's NUMA layer (placeholder with the final interface; see issue 4).

use std::fmt;
use std::io;

/// A NUMA node's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(usize);

impl NodeId {
    /// The node's index.
    pub fn index(self) -> usize {
        self.0
    }
}
impl From<usize> for NodeId {
    fn from(v: usize) -> Self {
        NodeId(v)
    }
}
impl From<NodeId> for usize {
    fn from(v: NodeId) -> usize {
        v.0
    }
}
impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// A set of CPU numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);
impl CpuSet {
    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }
    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// No CPUs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One node.
#[derive(Clone, Debug)]
pub struct Node {
    id: NodeId,
    cpus: CpuSet,
}
impl Node {
    /// Its id.
    pub fn id(&self) -> NodeId {
        self.id
    }
    /// Its CPUs.
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }
}

/// A machine's topology.
#[derive(Clone, Debug)]
pub struct Topology {
    nodes: Vec<Node>,
}

/// A bad topology spec.
#[derive(Debug)]
pub struct TopologyError(String);
impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for TopologyError {}

impl Topology {
    /// Reads the machine's topology.
    pub fn discover() -> io::Result<Topology> {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Topology { nodes: vec![Node { id: NodeId(0), cpus: CpuSet((0..n).collect()) }] })
    }
    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// Reads `NUMA_RT_TOPOLOGY`.
    pub fn from_env() -> Result<Option<Topology>, TopologyError> {
        Ok(None)
    }
}

/// System calls.
pub mod sys {
    use super::*;
    /// The default number of P's.
    pub fn default_max_procs() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    /// Binds the calling thread to `cpus`.
    pub fn set_thread_affinity(_cpus: &CpuSet) -> io::Result<()> {
        Ok(())
    }
    /// Prefers `node` for the calling thread's allocations.
    pub fn set_preferred_node(_node: NodeId) -> io::Result<()> {
        Ok(())
    }
}

/// Node of each P: `max_procs` P's spread over the nodes in proportion to their CPUs.
pub fn partition_procs(topology: &Topology, max_procs: usize) -> Vec<NodeId> {
    let _ = topology;
    vec![NodeId(0); max_procs]
}

//! numa_rt's NUMA layer: the machine's nodes, simulated topologies, thread
//! binding and memory policy.
//!
//! Vyukov's NUMA-aware scheduler for Go (2014, never implemented in Go)
//! partitions the P's strictly between the NUMA nodes, binds each node's
//! threads (M's) to the node's CPUs and gives every node its own run queue
//! and idle-thread pool. This crate supplies what that design needs from the
//! machine; the executor builds the scheduling on top:
//!
//! * [`Topology`]: the nodes, each with its CPUs and distances, discovered
//!   from sysfs or simulated from a spec so every NUMA behaviour can be tried
//!   on a one-node machine.
//! * [`partition_procs`]: which node each P belongs to.
//! * [`random_start_node`]: a per-process random node, so several processes
//!   do not all start on node 0.
//! * [`sys`]: the system calls (affinity, memory policy, CPU quota), each
//!   behind a small safe function. Linux only; no C library is needed.
//!
//! # Discovering the machine
//!
//! [`Topology::discover`] reads `/sys/devices/system/node/node*/cpulist` and
//! `distance`, keeping only the CPUs the process may use (its affinity mask,
//! which reflects `taskset`, `numactl --cpunodebind` and cgroup cpusets).
//! Nodes left without CPUs are dropped and the rest numbered densely
//! `0..n` ([`NodeId`]); [`Node::os_id`] keeps the kernel's number for memory
//! policy calls. A machine without NUMA support is a single node.
//!
//! ```
//! use numa_rt_numa::{sys, Topology};
//!
//! let topology = Topology::discover()?;
//! assert!(topology.num_nodes() >= 1);
//! assert!(topology.cpus().is_subset(&sys::allowed_cpus()?));
//! for node in topology.nodes() {
//!     println!("{}: CPUs {} (OS node {}), distances {:?}",
//!              node.id(), node.cpus(), node.os_id(), node.distances());
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Simulating a topology
//!
//! [`Topology::from_spec`] takes the nodes as text, [`Topology::split`] cuts
//! the allowed CPUs into `n` nodes, and [`Topology::from_env`] reads a spec
//! from the `NUMA_RT_TOPOLOGY` environment variable, so that an unchanged
//! program can be run as if on a NUMA machine:
//!
//! ```text
//! NUMA_RT_TOPOLOGY='0;1' cargo run --release --example tour
//! ```
//!
//! A spec's CPUs must be ones the process may use; the `_within` variants
//! check against a given set instead, which keeps this example independent of
//! the machine it runs on:
//!
//! ```
//! use numa_rt_numa::{CpuSet, NodeId, Topology};
//!
//! let allowed = CpuSet::parse("0-7")?;
//! let topology = Topology::from_spec_within("0-3;4-7", &allowed)?;
//! assert_eq!(topology.num_nodes(), 2);
//! assert_eq!(topology.nodes()[1].cpus().to_string(), "4-7");
//! assert_eq!(topology.nodes()[1].distances(), [20, 10]);
//! assert_eq!(topology.node_of_cpu(5), Some(NodeId::from(1)));
//! assert!(topology.is_simulated());
//!
//! // The same with explicit distances: node i's row after '@'.
//! let far = Topology::from_spec_within("0-3@10,32;4-7@32,10", &allowed)?;
//! assert_eq!(far.nodes()[0].distances(), [10, 32]);
//!
//! // A spec may leave CPUs unused ...
//! assert_eq!(Topology::from_spec_within("0", &allowed)?.cpus().len(), 1);
//! // ... but not repeat them, name no CPU, or name one it may not use.
//! let err = Topology::from_spec_within("0-3;3-7", &allowed).unwrap_err();
//! assert_eq!(err.to_string(), r#"invalid topology spec "0-3;3-7": CPU 3 is in both node0 and node1"#);
//! assert!(Topology::from_spec_within("0-3;", &allowed).is_err());
//! assert!(Topology::from_spec_within("0-3;8", &allowed).is_err());
//!
//! // `split` cuts the CPUs into contiguous runs of (nearly) equal size.
//! let halves = Topology::split_within(&allowed, 3)?;
//! assert_eq!(halves.to_string(), "0-2;3-5;6-7");
//! assert!(Topology::split_within(&allowed, 9).is_err());
//!
//! // On the real machine: one node per allowed CPU.
//! let cpus = numa_rt_numa::sys::allowed_cpus()?;
//! let per_cpu = Topology::split(cpus.len())?;
//! assert_eq!(per_cpu.num_nodes(), cpus.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The spec syntax
//!
//! ```text
//! spec      = node *( ";" node )
//! node      = cpulist [ "@" distances ]
//! distances = number *( "," number )
//! ```
//!
//! * Nodes are separated by `;` and numbered from 0 in order.
//! * Each node is a Linux cpulist: CPU numbers and inclusive ranges separated
//!   by commas, `0-3,8` (strided ranges `0-15:2/4` work as in the kernel).
//! * Optionally `@` and the node's distance to every node, in node order:
//!   10 to itself (Linux's convention for local), 11 to 255 to the others.
//!   Either every node has a row or none does; without rows the distances
//!   are 10 locally and 20 remotely. Rows need not be symmetric.
//! * Whitespace around items is ignored. An empty or blank spec is an error
//!   (`NUMA_RT_TOPOLOGY` unset or blank means "discover").
//!
//! Errors name the spec and the problem: a malformed cpulist, an empty node,
//! an empty spec, a CPU outside the process's affinity mask, a CPU in two
//! nodes, a bad distance row. [`TopologyError`] converts into an
//! [`io::Error`](std::io::Error) of kind `InvalidInput`. A topology's
//! [`Display`](std::fmt::Display) writes this syntax back.
//!
//! # Placing P's and threads
//!
//! ```
//! use numa_rt_numa::{partition_procs, random_start_node, CpuSet, Topology};
//!
//! let topology = Topology::from_spec_within("0-5;6-7", &CpuSet::parse("0-7")?)?;
//! // 8 P's over nodes of 6 and 2 CPUs: 6 and 2, node 0's first.
//! let procs = partition_procs(&topology, 8);
//! assert_eq!(procs.iter().filter(|n| n.index() == 0).count(), 6);
//! // Where this process starts (e.g. its first root task): random per process.
//! assert!(random_start_node(topology.num_nodes()).index() < 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Each M (worker thread) of a node then calls
//! [`sys::set_thread_affinity`] with the node's CPUs (the whole node, so the
//! OS can still balance inside it) and [`sys::set_preferred_node`] with its
//! [`Node::os_id`], so that what the thread allocates lands on local memory.
//! The memory-policy calls may be refused (e.g. `EPERM` in a container);
//! they are hints, and a runtime reports the failure once and carries on.
//!
//! # On a one-node machine
//!
//! Everything works: discovery yields one node; a simulated topology
//! partitions P's and binds threads exactly as on a real NUMA machine, and
//! all its nodes have [`os_id`](Node::os_id) 0, so memory-policy calls still
//! succeed (where permitted) and cost nothing.

#![warn(missing_docs)]

use std::fmt;

mod cpuset;
mod error;
mod partition;
mod spec;
pub mod sys;
mod topology;

pub use cpuset::{CpuListError, CpuSet};
pub use error::{TopologyError, TopologyErrorKind};
pub use partition::{partition_procs, partition_procs_from, random_start_node};
pub use spec::{LOCAL_DISTANCE, REMOTE_DISTANCE};
pub use topology::{Node, Topology, ENV_VAR};

/// A node's dense id in a [`Topology`]: `0..topology.num_nodes()`.
///
/// It is an index, not the kernel's node number (that is [`Node::os_id`]);
/// the two differ when nodes are numbered sparsely, dropped for lack of
/// allowed CPUs, or simulated. Displays as `node{N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(usize);

impl NodeId {
    /// The id as an index into [`Topology::nodes`] and per-node arrays.
    pub const fn index(self) -> usize {
        self.0
    }
}

impl From<usize> for NodeId {
    fn from(index: usize) -> Self {
        NodeId(index)
    }
}

impl From<NodeId> for usize {
    fn from(id: NodeId) -> usize {
        id.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_conversions() {
        let id = NodeId::from(3);
        assert_eq!(id.index(), 3);
        assert_eq!(usize::from(id), 3);
        assert_eq!(id.to_string(), "node3");
        assert!(NodeId::from(1) < NodeId::from(2));
    }
}

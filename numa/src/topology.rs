//! [`Topology`] and [`Node`]: the machine's NUMA nodes, discovered from sysfs
//! or simulated from a spec.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::path::Path;
use std::str::FromStr;

use crate::error::{TopologyError, TopologyErrorKind as Kind};
use crate::spec::{self, LOCAL_DISTANCE, REMOTE_DISTANCE};
use crate::{sys, CpuSet, NodeId};

/// The environment variable [`Topology::from_env`] reads.
pub const ENV_VAR: &str = "NUMA_RT_TOPOLOGY";

/// Where Linux describes the NUMA nodes.
const SYSFS_NODES: &str = "/sys/devices/system/node";

/// One NUMA node of a [`Topology`]: some CPUs that share local memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Dense index in the topology (0..n), what the executor indexes its
    /// per-node queues and pools by.
    id: NodeId,
    /// The kernel's node number, for memory-policy calls. It differs from
    /// `id` when the kernel numbers nodes sparsely or when nodes without
    /// allowed CPUs were dropped; for a simulated node it is the real node
    /// holding most of its CPUs.
    os_id: usize,
    /// The CPUs of the node the process may use; never empty.
    cpus: CpuSet,
    /// Distance to every node of the topology, indexed by dense id.
    distances: Vec<u32>,
}

impl Node {
    /// The node's dense id in its topology.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The operating system's number for the node's memory, the number
    /// [`sys::set_preferred_node`] and [`sys::set_buffer_node`] take.
    ///
    /// For a discovered node, its `/sys/devices/system/node/nodeN` number. For
    /// a simulated node, the real node holding most of its CPUs, so that
    /// preferring it still allocates near those CPUs (on a one-node machine,
    /// every simulated node has `os_id() == 0`).
    pub fn os_id(&self) -> usize {
        self.os_id
    }

    /// The node's CPUs (only those the process may use).
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// The distance to each node of the topology, indexed by dense id: 10 for
    /// itself by Linux convention, larger for nodes farther away (relative
    /// memory latency ×10, from the firmware's SLIT).
    pub fn distances(&self) -> &[u32] {
        &self.distances
    }

    /// The distance to `other`, if it is a node of the topology.
    pub fn distance_to(&self, other: NodeId) -> Option<u32> {
        self.distances.get(other.index()).copied()
    }
}

/// The NUMA nodes the runtime spreads its P's and threads over.
///
/// Node ids are dense (`0..num_nodes()`), in the order of the OS node numbers
/// or of the spec; every node has at least one CPU, and no CPU is in two
/// nodes. See the [crate documentation](crate) for the ways to build one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// The nodes, `nodes[i].id == NodeId(i)`.
    nodes: Vec<Node>,
    /// The union of the nodes' CPUs, kept so `cpus()` needs no allocation.
    cpus: CpuSet,
    /// Whether the topology came from a spec or `split` rather than from the
    /// machine; logs and metrics say so, since its "remote" memory is not.
    simulated: bool,
}

impl Topology {
    /// Reads the machine's topology from sysfs, restricted to the CPUs the
    /// process may use ([`sys::allowed_cpus`], which reflects `taskset`,
    /// `numactl` and cgroup cpusets).
    ///
    /// Nodes left without allowed CPUs are dropped and the rest numbered
    /// densely (each keeps its OS number in [`Node::os_id`]). Distances come
    /// from each node's `distance` file (10/20 if it is missing). A machine
    /// without `/sys/devices/system/node` (a kernel without NUMA support) is
    /// one node with all allowed CPUs; so is one whose nodes list none of
    /// them. Allowed CPUs that no node lists are given to the first node.
    ///
    /// Fails if the affinity mask cannot be read, or if sysfs has node
    /// directories whose `cpulist` is unreadable or malformed (the error names
    /// the file): a broken sysfs is reported rather than guessed around.
    pub fn discover() -> io::Result<Topology> {
        let allowed = sys::allowed_cpus()?;
        discover_in(Path::new(SYSFS_NODES), &allowed)
    }

    /// A simulated topology from a spec such as `"0-3;4-7"` or
    /// `"0-1@10,21;2-3@21,10"`: nodes separated by `;`, each a Linux cpulist,
    /// optionally followed by `@` and its distance to every node (see the
    /// [crate documentation](crate#the-spec-syntax)).
    ///
    /// Every CPU must be one the process may use; CPUs the spec does not name
    /// are left unused. Errors name the spec and the problem.
    pub fn from_spec(spec: &str) -> Result<Topology, TopologyError> {
        let what = || format!("topology spec {spec:?}");
        let allowed = sys::allowed_cpus().map_err(|e| {
            TopologyError::io(what(), "cannot read the CPUs this process may use", e)
        })?;
        Topology::from_spec_within(spec, &allowed)
    }

    /// [`from_spec`](Topology::from_spec), checking the CPUs against
    /// `allowed` instead of the process's affinity mask.
    pub fn from_spec_within(spec: &str, allowed: &CpuSet) -> Result<Topology, TopologyError> {
        let parsed = spec::parse(spec, allowed).map_err(|(kind, detail)| {
            TopologyError::new(kind, format!("topology spec {spec:?}"), detail)
        })?;
        Ok(Topology::simulated(parsed.nodes, parsed.distances))
    }

    /// A simulated topology of `n` nodes: the allowed CPUs, in ascending order,
    /// cut into `n` contiguous runs whose sizes differ by at most one (the
    /// first nodes get the extra CPUs). `split(1)` is a flat, one-node
    /// topology. Zero nodes, or more nodes than CPUs, is an error.
    pub fn split(n: usize) -> Result<Topology, TopologyError> {
        let allowed = sys::allowed_cpus().map_err(|e| {
            TopologyError::io(
                format!("Topology::split({n})"),
                "cannot read the CPUs this process may use",
                e,
            )
        })?;
        Topology::split_within(&allowed, n)
    }

    /// [`split`](Topology::split) over `cpus` instead of the process's
    /// affinity mask.
    pub fn split_within(cpus: &CpuSet, n: usize) -> Result<Topology, TopologyError> {
        let err = |detail: String| {
            TopologyError::new(Kind::BadNodeCount, format!("Topology::split({n})"), detail)
        };
        if n == 0 {
            return Err(err("a topology needs at least one node".to_owned()));
        }
        if n > cpus.len() {
            return Err(err(format!(
                "{} CPUs ({cpus}) cannot make {n} nodes of at least one CPU each",
                cpus.len()
            )));
        }
        let (base, extra) = (cpus.len() / n, cpus.len() % n);
        let mut all = cpus.iter();
        let nodes = (0..n)
            .map(|i| all.by_ref().take(base + usize::from(i < extra)).collect())
            .collect();
        Ok(Topology::simulated(nodes, spec::default_distances(n)))
    }

    /// Checks that every CPU of every node is one the process may use (its
    /// affinity mask): the check [`from_spec`](Topology::from_spec) and
    /// `NUMA_RT_TOPOLOGY` make, for a topology built some other way (e.g.
    /// [`from_spec_within`](Topology::from_spec_within)) before a runtime
    /// binds its threads to it. The error (kind
    /// [`CpuNotAllowed`](Kind::CpuNotAllowed)) is about `what` and names
    /// the node and the CPUs.
    pub fn check_allowed(&self, what: &str) -> Result<(), TopologyError> {
        let allowed = sys::allowed_cpus().map_err(|e| {
            TopologyError::io(
                what.to_owned(),
                "cannot read the CPUs this process may use",
                e,
            )
        })?;
        self.check_within(what, &allowed)
    }

    /// [`check_allowed`](Topology::check_allowed) against `allowed`.
    pub fn check_within(&self, what: &str, allowed: &CpuSet) -> Result<(), TopologyError> {
        for (i, node) in self.nodes.iter().enumerate() {
            let outside = node.cpus().difference(allowed);
            if !outside.is_empty() {
                return Err(TopologyError::new(
                    Kind::CpuNotAllowed,
                    what.to_owned(),
                    spec::not_allowed_detail(i, &outside, allowed),
                ));
            }
        }
        Ok(())
    }

    /// The topology `NUMA_RT_TOPOLOGY` asks for, in the spec syntax of
    /// [`from_spec`](Topology::from_spec): `Ok(None)` when the variable is
    /// unset or blank, an error naming the variable and its value when the
    /// spec is invalid.
    pub fn from_env() -> Result<Option<Topology>, TopologyError> {
        from_env_value(std::env::var_os(ENV_VAR))
    }

    /// `NUMA_RT_TOPOLOGY` if it is set, otherwise [`discover`](Topology::discover):
    /// what a runtime builder without an explicit topology uses.
    pub fn from_env_or_discover() -> io::Result<Topology> {
        match Topology::from_env()? {
            Some(topology) => Ok(topology),
            None => Topology::discover(),
        }
    }

    /// The nodes; `nodes()[i].id() == NodeId::from(i)`.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node with dense id `id`, if there is one.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The number of nodes (at least 1).
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The node `cpu` belongs to, or `None` if it is in none (e.g. not
    /// allowed, or left out by a spec).
    pub fn node_of_cpu(&self, cpu: usize) -> Option<NodeId> {
        self.nodes
            .iter()
            .find(|n| n.cpus.contains(cpu))
            .map(|n| n.id)
    }

    /// Every CPU of every node.
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// Whether the topology was given (spec, `split`, environment) rather
    /// than discovered.
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    /// The nodes other than `from`, nearest first: the order in which a P of
    /// `from` should look at remote nodes when its own has no work. Nodes at
    /// the same distance are listed starting after `from` and wrapping around,
    /// so the nodes of a symmetric machine do not all pick the same victim
    /// first. Empty if `from` is not a node.
    pub fn remote_nodes_by_distance(&self, from: NodeId) -> Vec<NodeId> {
        let n = self.nodes.len();
        let Some(node) = self.node(from) else {
            return Vec::new();
        };
        let mut others: Vec<NodeId> = (1..n)
            .map(|k| NodeId::from((from.index() + k) % n))
            .collect();
        // A stable sort keeps the rotated order among equal distances.
        others.sort_by_key(|other| node.distances[other.index()]);
        others
    }

    /// Builds a simulated topology from checked node CPU sets and distances.
    fn simulated(node_cpus: Vec<CpuSet>, distances: Vec<Vec<u32>>) -> Topology {
        let host = read_host(Path::new(SYSFS_NODES))
            .map(|h| h.nodes)
            .unwrap_or_default();
        let nodes = node_cpus
            .into_iter()
            .zip(distances)
            .enumerate()
            .map(|(i, (cpus, distances))| Node {
                id: NodeId::from(i),
                os_id: os_node_of(&cpus, &host),
                cpus,
                distances,
            })
            .collect();
        Topology::from_nodes(nodes, true)
    }

    /// Assembles a topology from finished nodes.
    fn from_nodes(nodes: Vec<Node>, simulated: bool) -> Topology {
        let cpus = nodes
            .iter()
            .fold(CpuSet::new(), |all, n| all.union(&n.cpus));
        Topology {
            nodes,
            cpus,
            simulated,
        }
    }
}

impl fmt::Display for Topology {
    /// Writes the topology in the spec syntax (`0-1;2-3`), with `@` distance
    /// rows only when they differ from the 10/20 default. For a simulated
    /// topology, and a discovered one whose firmware distances are sane,
    /// [`Topology::from_spec`] reads the text back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = spec::default_distances(self.nodes.len());
        let plain = self
            .nodes
            .iter()
            .zip(&default)
            .all(|(n, d)| &n.distances == d);
        for (i, node) in self.nodes.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{}", node.cpus)?;
            if !plain {
                f.write_str("@")?;
                for (j, d) in node.distances.iter().enumerate() {
                    let sep = if j > 0 { "," } else { "" };
                    write!(f, "{sep}{d}")?;
                }
            }
        }
        Ok(())
    }
}

impl FromStr for Topology {
    type Err = TopologyError;

    /// Same as [`Topology::from_spec`].
    fn from_str(spec: &str) -> Result<Topology, TopologyError> {
        Topology::from_spec(spec)
    }
}

/// [`Topology::from_env`] for a given value of the variable.
fn from_env_value(value: Option<OsString>) -> Result<Option<Topology>, TopologyError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let Some(text) = value.to_str() else {
        return Err(TopologyError::new(
            Kind::Malformed,
            format!("{ENV_VAR}={value:?}"),
            "the value is not valid UTF-8".to_owned(),
        ));
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let what = || format!("{ENV_VAR}={text:?}");
    let t = Topology::from_spec(text).map_err(|e| e.about(what()))?;
    // On a kernel with NUMA nodes, a simulated node that takes CPUs of two
    // real ones would bind its M's across both and prefer the memory of one:
    // refused, naming the CPUs and their nodes (a one-node kernel has
    // nothing to cross). Read failures leave the spec as it is.
    if let Ok(host) = read_host(Path::new(SYSFS_NODES)) {
        check_within_host_nodes(&t, &host.nodes)
            .map_err(|detail| TopologyError::new(Kind::SpansNodes, what(), detail))?;
    }
    Ok(Some(t))
}

/// Whether every node of `t` lies within one of the kernel's `host` nodes
/// (trivially so with fewer than two); otherwise the reason, naming the
/// first node that crosses, its CPUs on each side and the kernel's nodes.
fn check_within_host_nodes(t: &Topology, host: &[HostNode]) -> Result<(), String> {
    if host.len() < 2 {
        return Ok(());
    }
    for (i, node) in t.nodes.iter().enumerate() {
        let parts: Vec<(usize, CpuSet)> = host
            .iter()
            .map(|h| (h.os_id, h.cpus.intersection(node.cpus())))
            .filter(|(_, c)| !c.is_empty())
            .collect();
        if parts.len() < 2 {
            continue;
        }
        let named: Vec<String> = parts
            .iter()
            .map(|(id, cpus)| format!("{} of the kernel's node {id}", spec::cpus_phrase(cpus)))
            .collect();
        let kernel: Vec<String> = host
            .iter()
            .map(|h| format!("node{} {}", h.os_id, h.cpus))
            .collect();
        return Err(format!(
            "node{i} names {}; on a kernel with NUMA nodes each node of the spec must lie \
             within one of them (the kernel's: {})",
            named.join(" and "),
            kernel.join(", ")
        ));
    }
    Ok(())
}

/// One node as sysfs describes it, before restriction to the allowed CPUs.
struct HostNode {
    /// The `N` of `nodeN`.
    os_id: usize,
    /// All of its CPUs, from `nodeN/cpulist`.
    cpus: CpuSet,
    /// `nodeN/distance`, one entry per online node, if it was readable.
    row: Option<Vec<u32>>,
}

/// The nodes sysfs lists, and the order of the columns of their rows.
struct Host {
    /// The nodes in ascending OS number.
    nodes: Vec<HostNode>,
    /// The online nodes, in the order of the `distance` columns.
    online: Vec<usize>,
}

impl Host {
    /// The distance from `from` to OS node `to`, from `from`'s row.
    fn distance(&self, from: &HostNode, to: usize) -> u32 {
        let fallback = if from.os_id == to {
            LOCAL_DISTANCE
        } else {
            REMOTE_DISTANCE
        };
        let Some(row) = &from.row else {
            return fallback;
        };
        let column = if row.len() == self.online.len() {
            self.online.iter().position(|&id| id == to)
        } else {
            Some(to)
        };
        column.and_then(|c| row.get(c)).copied().unwrap_or(fallback)
    }
}

/// Reads the `nodeN` directories under `root`; no nodes at all if `root`
/// does not exist (a kernel built without NUMA support).
fn read_host(root: &Path) -> io::Result<Host> {
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Host {
                nodes: Vec::new(),
                online: Vec::new(),
            })
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("reading {}: {e}", root.display()),
            ))
        }
    };
    let mut ids = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let id: Option<usize> = name
            .to_str()
            .and_then(|s| s.strip_prefix("node"))
            .and_then(|d| d.parse().ok());
        ids.extend(id);
    }
    ids.sort_unstable();
    let online = fs::read_to_string(root.join("online"))
        .ok()
        .and_then(|text| CpuSet::parse(&text).ok())
        .map_or_else(|| ids.clone(), |set| set.iter().collect());
    let mut nodes = Vec::with_capacity(ids.len());
    for os_id in ids {
        let dir = root.join(format!("node{os_id}"));
        let path = dir.join("cpulist");
        let text = fs::read_to_string(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
        let cpus = CpuSet::parse(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?;
        let row = fs::read_to_string(dir.join("distance"))
            .ok()
            .and_then(|text| text.split_whitespace().map(|d| d.parse().ok()).collect());
        nodes.push(HostNode { os_id, cpus, row });
    }
    Ok(Host { nodes, online })
}

/// [`Topology::discover`] with the sysfs node directory at `root`.
fn discover_in(root: &Path, allowed: &CpuSet) -> io::Result<Topology> {
    if allowed.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the process's CPU affinity mask is empty",
        ));
    }
    let host = read_host(root)?;
    let kept: Vec<(&HostNode, CpuSet)> = host
        .nodes
        .iter()
        .map(|h| (h, h.cpus.intersection(allowed)))
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    if kept.is_empty() {
        let node = Node {
            id: NodeId::from(0),
            os_id: host.nodes.first().map_or(0, |h| h.os_id),
            cpus: allowed.clone(),
            distances: vec![LOCAL_DISTANCE],
        };
        return Ok(Topology::from_nodes(vec![node], false));
    }
    let listed = kept
        .iter()
        .fold(CpuSet::new(), |all, (_, cpus)| all.union(cpus));
    let unlisted = allowed.difference(&listed);
    let nodes = kept
        .iter()
        .enumerate()
        .map(|(i, (h, cpus))| Node {
            id: NodeId::from(i),
            os_id: h.os_id,
            cpus: if i == 0 {
                cpus.union(&unlisted)
            } else {
                cpus.clone()
            },
            distances: kept
                .iter()
                .map(|(to, _)| host.distance(h, to.os_id))
                .collect(),
        })
        .collect();
    Ok(Topology::from_nodes(nodes, false))
}

/// The OS node holding most of `cpus` (the lowest on a tie; the first node,
/// or 0, if none holds any).
fn os_node_of(cpus: &CpuSet, host: &[HostNode]) -> usize {
    host.iter()
        .map(|h| (h.cpus.intersection(cpus).len(), std::cmp::Reverse(h.os_id)))
        .max()
        .filter(|&(overlap, _)| overlap > 0)
        .map(|(_, std::cmp::Reverse(id))| id)
        .or(host.first().map(|h| h.os_id))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;

//! Strict partitioning of the P's between nodes, and the per-process random
//! starting node.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{NodeId, Topology};

/// The node of each of `max_procs` P's: `result[p]` is P `p`'s node.
///
/// The P's are strictly partitioned between the nodes in proportion to their
/// CPU counts (largest-remainder rounding), and every node gets at least one
/// P when `max_procs >= topology.num_nodes()`. The P's of a node are
/// contiguous and the nodes come in ascending order, so node `i`'s P's are a
/// range of P indices. Ties go to the node with more CPUs, then to the
/// lower id; see [`partition_procs_from`] to break them from another node.
///
/// ```
/// use numa_rt_numa::{partition_procs, CpuSet, NodeId, Topology};
///
/// let allowed = CpuSet::parse("0-3").unwrap();
/// let topology = Topology::from_spec_within("0-2;3", &allowed).unwrap();
/// let nodes: Vec<usize> = partition_procs(&topology, 4).into_iter().map(NodeId::index).collect();
/// assert_eq!(nodes, [0, 0, 0, 1]);
/// // Each node keeps a P as long as there are enough of them.
/// let nodes: Vec<usize> = partition_procs(&topology, 2).into_iter().map(NodeId::index).collect();
/// assert_eq!(nodes, [0, 1]);
/// ```
pub fn partition_procs(topology: &Topology, max_procs: usize) -> Vec<NodeId> {
    partition_procs_from(topology, max_procs, NodeId::from(0))
}

/// [`partition_procs`], breaking ties between equally entitled nodes in favour
/// of `first`, then the nodes after it (wrapping around).
///
/// With `first = random_start_node(n)`, processes that share a machine do
/// not all put their odd P (or, with fewer P's than nodes, all their P's) on
/// node 0, which is the crowding Vyukov warns about.
pub fn partition_procs_from(topology: &Topology, max_procs: usize, first: NodeId) -> Vec<NodeId> {
    let weights: Vec<usize> = topology.nodes().iter().map(|n| n.cpus().len()).collect();
    proportional_counts(&weights, max_procs, first.index())
        .into_iter()
        .enumerate()
        .flat_map(|(node, count)| std::iter::repeat_n(NodeId::from(node), count))
        .collect()
}

/// Splits `total` into integer shares proportional to `weights`
/// (largest-remainder), at least one per weight when `total` allows; ties go
/// to the larger weight, then in rotation order from index `first`.
fn proportional_counts(weights: &[usize], total: usize, first: usize) -> Vec<usize> {
    let n = weights.len();
    let mut counts = vec![0; n];
    if n == 0 || total == 0 {
        return counts;
    }
    // Nodes always have CPUs, but stay sane if every weight is zero.
    let weights: Vec<u128> = if weights.iter().all(|&w| w == 0) {
        vec![1; n]
    } else {
        weights.iter().map(|&w| w as u128).collect()
    };
    let sum: u128 = weights.iter().sum();
    let total_w = total as u128;
    let rotation = |i: usize| (i + n - first % n) % n;
    let mut remainders = Vec::with_capacity(n);
    for (i, &w) in weights.iter().enumerate() {
        counts[i] = (total_w * w / sum) as usize;
        remainders.push(total_w * w % sum);
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(remainders[i]),
            std::cmp::Reverse(weights[i]),
            rotation(i),
        )
    });
    let left = total - counts.iter().sum::<usize>();
    for &i in order.iter().take(left) {
        counts[i] += 1;
    }
    if total >= n {
        // Give each node without a P one, taken from the node furthest above
        // its exact share (count * sum - total * weight, scaled by `sum`).
        let mut starved: Vec<usize> = (0..n).filter(|&i| counts[i] == 0).collect();
        starved.sort_by_key(|&i| rotation(i));
        for i in starved {
            let donor = (0..n)
                .filter(|&j| counts[j] > 1)
                .max_by_key(|&j| {
                    let excess = counts[j] as i128 * sum as i128 - (total_w * weights[j]) as i128;
                    (excess, std::cmp::Reverse(rotation(j)))
                })
                .expect("total >= n with a starved node leaves a node with two P's");
            counts[donor] -= 1;
            counts[i] = 1;
        }
    }
    counts
}

/// A per-process random node in `0..num_nodes` (node 0 if `num_nodes` is 0).
///
/// Vyukov: "several processes must not all start on node 0". The choice is
/// made once per process from the time, the process id and the address-space
/// layout, so it differs between processes but is the same for every call
/// with the same `num_nodes` within a process.
pub fn random_start_node(num_nodes: usize) -> NodeId {
    if num_nodes == 0 {
        return NodeId::from(0);
    }
    NodeId::from((process_seed() % num_nodes as u64) as usize)
}

/// A random 64-bit number fixed for the life of the process.
fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // ASLR moves the stack and this static from one run to the next.
        let local = 0u8;
        let addresses = (&local as *const u8 as u64) ^ (&SEED as *const _ as u64).rotate_left(32);
        splitmix64(nanos ^ (u64::from(std::process::id()) << 32) ^ addresses)
    })
}

/// SplitMix64's finaliser: spreads every input bit over the whole output.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuSet;

    /// A simulated topology with nodes of the given CPU counts.
    fn topology(sizes: &[usize]) -> Topology {
        let total: usize = sizes.iter().sum();
        let spec: Vec<String> = sizes
            .iter()
            .scan(0, |next, &size| {
                let list = format!("{}-{}", *next, *next + size - 1);
                *next += size;
                Some(list)
            })
            .collect();
        Topology::from_spec_within(&spec.join(";"), &(0..total).collect::<CpuSet>()).unwrap()
    }

    fn nodes(sizes: &[usize], procs: usize) -> Vec<usize> {
        partition_procs(&topology(sizes), procs)
            .into_iter()
            .map(NodeId::index)
            .collect()
    }

    #[test]
    fn proportional_to_cpus() {
        assert_eq!(nodes(&[3, 1], 4), [0, 0, 0, 1]);
        assert_eq!(nodes(&[2, 2, 2, 2], 8), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(nodes(&[6, 1], 7), [0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(nodes(&[4, 4], 2), [0, 1]);
        assert_eq!(nodes(&[1], 3), [0, 0, 0]);
        // More P's than CPUs (oversubscription) stays proportional.
        assert_eq!(nodes(&[1, 1], 6), [0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn every_node_gets_a_p_when_possible() {
        assert_eq!(nodes(&[3, 1], 2), [0, 1]);
        assert_eq!(nodes(&[13, 1, 1, 1], 4), [0, 1, 2, 3]);
        assert_eq!(nodes(&[13, 1, 1, 1], 5), [0, 0, 1, 2, 3]);
        assert_eq!(nodes(&[1, 1], 2), [0, 1]);
    }

    #[test]
    fn fewer_ps_than_nodes() {
        assert_eq!(nodes(&[1, 1], 1), [0]);
        assert_eq!(nodes(&[1, 3], 1), [1]);
        assert_eq!(nodes(&[1, 1, 1, 1], 3), [0, 1, 2]);
        assert!(nodes(&[1, 1], 0).is_empty());
    }

    #[test]
    fn ties_start_from_the_given_node() {
        let t = topology(&[1, 1, 1]);
        let from = |first: usize, procs: usize| -> Vec<usize> {
            partition_procs_from(&t, procs, NodeId::from(first))
                .into_iter()
                .map(NodeId::index)
                .collect()
        };
        assert_eq!(from(1, 1), [1]);
        assert_eq!(from(2, 2), [0, 2]);
        assert_eq!(from(2, 4), [0, 1, 2, 2]);
        assert_eq!(from(7, 1), [1]); // out-of-range start wraps
    }

    #[test]
    fn always_sums_up_and_stays_contiguous() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = |bound: usize| {
            state = splitmix64(state);
            (state % bound as u64) as usize
        };
        for _ in 0..2000 {
            let n = 1 + next(6);
            let weights: Vec<usize> = (0..n).map(|_| 1 + next(16)).collect();
            let total = next(40);
            let counts = proportional_counts(&weights, total, next(n));
            assert_eq!(counts.iter().sum::<usize>(), total, "{weights:?} {total}");
            if total >= n {
                assert!(
                    counts.iter().all(|&c| c >= 1),
                    "{weights:?} {total} {counts:?}"
                );
            }
            let sum: usize = weights.iter().sum();
            for (c, w) in counts.iter().zip(&weights) {
                // Within one P of the exact share, plus the P's moved to
                // starved nodes.
                let exact = (total * w) as f64 / sum as f64;
                assert!(
                    (*c as f64 - exact).abs() < 1.0 + n as f64,
                    "{weights:?} {total} {counts:?}"
                );
            }
        }
        let result = nodes(&[2, 3, 1], 9);
        assert!(result.windows(2).all(|w| w[0] <= w[1]), "{result:?}");
    }

    #[test]
    fn start_node_is_stable_and_in_range() {
        assert_eq!(random_start_node(0), NodeId::from(0));
        assert_eq!(random_start_node(1), NodeId::from(0));
        for n in 1..10 {
            let node = random_start_node(n);
            assert!(node.index() < n);
            assert_eq!(random_start_node(n), node);
        }
    }

    #[test]
    fn splitmix_spreads_bits() {
        assert_ne!(splitmix64(1), splitmix64(2));
        assert_ne!(splitmix64(0), 0);
    }
}

//! [`CpuSet`]: a set of CPU numbers, and the Linux cpulist text format.

use std::error::Error;
use std::fmt;
use std::str::FromStr;

/// Bits per word of [`CpuSet`]'s bitmap.
const WORD_BITS: usize = u64::BITS as usize;

/// A set of CPU numbers, as in an affinity mask or a NUMA node's `cpulist`.
///
/// Iteration is in ascending order. [`Display`](fmt::Display) writes the
/// Linux cpulist format (`0-3,8`) that [`CpuSet::parse`] reads back.
///
/// ```
/// use numa_rt_numa::CpuSet;
///
/// let set = CpuSet::parse("0-3,8").unwrap();
/// assert_eq!(set.len(), 5);
/// assert!(set.contains(8) && !set.contains(4));
/// assert_eq!(set.to_string(), "0-3,8");
/// assert_eq!(set.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8]);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    /// Bit `c % 64` of word `c / 64` is set when CPU `c` is in the set. A bitmap
    /// makes `contains` O(1) (the executor asks it on hot paths) and maps
    /// directly onto the kernel's affinity masks. Trailing zero words are always
    /// trimmed, so the derived `Eq` and `Hash` compare sets, not capacities.
    words: Vec<u64>,
}

impl CpuSet {
    /// The largest CPU number (exclusive) that [`CpuSet::parse`] accepts.
    ///
    /// Linux supports at most 8192 CPUs today (`CONFIG_NR_CPUS`); the limit is
    /// far above that and only stops a typo like `0-4000000000` from
    /// allocating gigabytes.
    pub const MAX_CPUS: usize = 1 << 16;

    /// An empty set.
    pub const fn new() -> CpuSet {
        CpuSet { words: Vec::new() }
    }

    /// Parses a Linux cpulist such as `0-3,8`, as found in
    /// `/sys/devices/system/node/node0/cpulist` or given to `taskset -c`.
    ///
    /// Items are separated by `,`; each is a CPU number `N`, a range `N-M`
    /// (inclusive), or a strided range `N-M:U/G` (of every group of `G` CPUs
    /// starting at `N`, the first `U`), as the kernel's `bitmap_parselist`
    /// accepts. Whitespace around items is ignored, and an empty (or blank)
    /// string is the empty set.
    pub fn parse(list: &str) -> Result<CpuSet, CpuListError> {
        let err = |detail: String| CpuListError {
            input: list.to_owned(),
            detail,
        };
        let mut set = CpuSet::new();
        if list.trim().is_empty() {
            return Ok(set);
        }
        for item in list.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(err("empty item between commas".to_owned()));
            }
            let (range, stride) = match item.split_once(':') {
                Some((range, stride)) => (range, Some(stride)),
                None => (item, None),
            };
            let (first, last) = match range.split_once('-') {
                Some((a, b)) => (parse_cpu(a).map_err(&err)?, parse_cpu(b).map_err(&err)?),
                None => {
                    let cpu = parse_cpu(range).map_err(&err)?;
                    (cpu, cpu)
                }
            };
            if first > last {
                return Err(err(format!("range `{item}` runs backwards")));
            }
            let (used, group) = match stride {
                None => (1, 1),
                Some(stride) => {
                    let bad = || {
                        err(format!(
                            "`{item}`: expected a stride `used/group` after `:`"
                        ))
                    };
                    let (u, g) = stride.split_once('/').ok_or_else(bad)?;
                    let u: usize = u.trim().parse().map_err(|_| bad())?;
                    let g: usize = g.trim().parse().map_err(|_| bad())?;
                    if u == 0 || g == 0 || u > g {
                        return Err(err(format!(
                            "`{item}`: stride needs 0 < used <= group, got {u}/{g}"
                        )));
                    }
                    (u, g)
                }
            };
            for cpu in first..=last {
                if (cpu - first) % group < used {
                    set.insert(cpu);
                }
            }
        }
        Ok(set)
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.words
            .get(cpu / WORD_BITS)
            .is_some_and(|w| w & (1 << (cpu % WORD_BITS)) != 0)
    }

    /// Adds `cpu`; returns whether it was new.
    pub fn insert(&mut self, cpu: usize) -> bool {
        let word = cpu / WORD_BITS;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1 << (cpu % WORD_BITS);
        let new = self.words[word] & bit == 0;
        self.words[word] |= bit;
        new
    }

    /// Removes `cpu`; returns whether it was there.
    pub fn remove(&mut self, cpu: usize) -> bool {
        let present = self.contains(cpu);
        if present {
            self.words[cpu / WORD_BITS] &= !(1 << (cpu % WORD_BITS));
            self.trim();
        }
        present
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(i * WORD_BITS + bit)
            })
        })
    }

    /// The number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no CPUs.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest CPU, if any.
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }

    /// The highest CPU, if any.
    pub fn last(&self) -> Option<usize> {
        let (i, w) = self.words.iter().enumerate().next_back()?;
        Some(i * WORD_BITS + (WORD_BITS - 1 - w.leading_zeros() as usize))
    }

    /// The CPUs in both `self` and `other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut set = CpuSet {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(a, b)| a & b)
                .collect(),
        };
        set.trim();
        set
    }

    /// The CPUs in `self`, `other` or both.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let (long, short) = if self.words.len() >= other.words.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut set = long.clone();
        for (a, b) in set.words.iter_mut().zip(&short.words) {
            *a |= b;
        }
        set
    }

    /// The CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut set = self.clone();
        for (a, b) in set.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
        set.trim();
        set
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Whether `self` and `other` share no CPU.
    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.intersection(other).is_empty()
    }

    /// Drops trailing zero words (the invariant `Eq` and `Hash` rely on).
    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

/// Parses one CPU number of a cpulist, bounded by [`CpuSet::MAX_CPUS`].
fn parse_cpu(text: &str) -> Result<usize, String> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{text}` is not a CPU number"));
    }
    match text.parse::<usize>() {
        Ok(cpu) if cpu < CpuSet::MAX_CPUS => Ok(cpu),
        _ => Err(format!(
            "CPU {text} is too large (the limit is {})",
            CpuSet::MAX_CPUS - 1
        )),
    }
}

impl fmt::Display for CpuSet {
    /// Writes the set as a Linux cpulist: ascending, consecutive CPUs folded
    /// into ranges (`0-3,8`); the empty set writes nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cpus = self.iter().peekable();
        let mut first = true;
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromStr for CpuSet {
    type Err = CpuListError;

    fn from_str(list: &str) -> Result<CpuSet, CpuListError> {
        CpuSet::parse(list)
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> CpuSet {
        let mut set = CpuSet::new();
        set.extend(iter);
        set
    }
}

impl Extend<usize> for CpuSet {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, iter: I) {
        for cpu in iter {
            self.insert(cpu);
        }
    }
}

/// A malformed cpulist given to [`CpuSet::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuListError {
    /// The whole text that failed to parse, so the message can quote it.
    input: String,
    /// What is wrong with it, naming the offending item.
    detail: String,
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid cpulist {:?}: {}", self.input, self.detail)
    }
}

impl Error for CpuListError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        cpus.iter().copied().collect()
    }

    #[test]
    fn parses_cpulists() {
        assert_eq!(CpuSet::parse("0-3,8").unwrap(), set(&[0, 1, 2, 3, 8]));
        assert_eq!(CpuSet::parse("5").unwrap(), set(&[5]));
        assert_eq!(CpuSet::parse("0-1\n").unwrap(), set(&[0, 1]));
        assert_eq!(CpuSet::parse(" 1 , 3 ").unwrap(), set(&[1, 3]));
        assert_eq!(CpuSet::parse("").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::parse("\n").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::parse("3,1,2-2").unwrap(), set(&[1, 2, 3]));
        assert_eq!(CpuSet::parse("64-65,127").unwrap(), set(&[64, 65, 127]));
        // Strided ranges as the kernel reads them: 2 of every 4, from 0.
        assert_eq!(CpuSet::parse("0-9:2/4").unwrap(), set(&[0, 1, 4, 5, 8, 9]));
        assert_eq!("2-3".parse::<CpuSet>().unwrap(), set(&[2, 3]));
    }

    #[test]
    fn rejects_malformed_cpulists() {
        for bad in [
            "x", "1,,2", "1,", "-1", "1-", "3-1", "1-2-3", "0x1", "+1", "0-3:0/2", "0-3:3/2",
            "0-3:1", "99999999",
        ] {
            let err = CpuSet::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        let err = CpuSet::parse("0,x").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid cpulist "0,x": `x` is not a CPU number"#
        );
    }

    #[test]
    fn displays_as_cpulist() {
        for text in ["", "0", "0-3,8", "0,2,4", "1-2,63-65,200"] {
            assert_eq!(CpuSet::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(format!("{:?}", set(&[0, 1])), "CpuSet(0-1)");
    }

    #[test]
    fn set_operations() {
        let a = set(&[0, 1, 2, 70]);
        let b = set(&[2, 3, 70]);
        assert_eq!(a.intersection(&b), set(&[2, 70]));
        assert_eq!(a.union(&b), set(&[0, 1, 2, 3, 70]));
        assert_eq!(a.difference(&b), set(&[0, 1]));
        // Trimmed: equal to a set that never had CPU 70.
        assert_eq!(a.difference(&set(&[70])), set(&[0, 1, 2]));
        assert!(set(&[2]).is_subset(&a) && !b.is_subset(&a));
        assert!(set(&[5]).is_disjoint(&a) && !a.is_disjoint(&b));
        assert_eq!((a.first(), a.last()), (Some(0), Some(70)));
        assert_eq!((CpuSet::new().first(), CpuSet::new().last()), (None, None));
    }

    #[test]
    fn insert_remove_len() {
        let mut s = CpuSet::new();
        assert!(s.is_empty());
        assert_eq!(s.len(), 0);
        assert!(s.insert(130));
        assert!(!s.insert(130));
        assert!(s.insert(1));
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), [1, 130]);
        assert!(s.remove(130) && !s.remove(130));
        assert_eq!(s, set(&[1]));
        assert!(s.remove(1));
        assert!(s.is_empty());
        assert_eq!(s, CpuSet::default());
    }
}

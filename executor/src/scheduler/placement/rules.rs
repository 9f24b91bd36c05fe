//! The placement rules and their selection: [`Placement`] (a set of
//! [`Rule`]s), parsed from `NUMA_RT_PLACEMENT` or given to
//! `Builder::placement`.

use std::fmt;

/// The environment variable that selects the placement
/// ([`Placement`]'s `FromStr` syntax).
pub const PLACEMENT_ENV: &str = "NUMA_RT_PLACEMENT";

/// One placement rule (see [`Placement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Root tasks (spawned right after an accept) go round-robin over the
    /// P's (Vyukov). Name: `roots`.
    Roots,
    /// A running P reserves for its own M the tasks it reaches within
    /// ~20 µs: an idle P is not woken for them (sysmon lifts the reserve of
    /// a P whose polls run long). Name: `keep`.
    Keep,
    /// Tasks that wake each other form batches; a cheap fan-in's members
    /// run beside their consumer, other batches spread. Name: `batches`.
    Batches,
    /// A kept batch's consumer polled elsewhere goes back to its batch's P.
    /// Name: `hub_home`.
    HubHome,
}

impl Rule {
    /// Every rule, in the order of [`Rule::name`]'s table.
    pub const ALL: [Rule; 4] = [Rule::Roots, Rule::Keep, Rule::Batches, Rule::HubHome];

    /// The rule's name in `NUMA_RT_PLACEMENT`.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Roots => "roots",
            Rule::Keep => "keep",
            Rule::Batches => "batches",
            Rule::HubHome => "hub_home",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// Which placement rules the scheduler applies on top of Go's mechanism
/// (`runnext`, the ring, steal half, the node queues).
///
/// [`Placement::numa`] (the default) applies every [`Rule`];
/// [`Placement::go`] none: plain Go placement. Set with
/// [`Builder::placement`](crate::Builder::placement) or
/// `NUMA_RT_PLACEMENT`: `numa`, `go`, either followed by `,+rule` or
/// `,-rule` items (`numa,-hub_home`; `go,+roots`), rule names as in
/// [`Rule::name`].
///
/// ```
/// use numa_rt_executor::{Placement, Rule};
/// let p: Placement = "numa,-batches".parse().unwrap();
/// assert!(!p.has(Rule::Batches) && p.has(Rule::Keep));
/// assert_eq!(p, Placement::numa().without(Rule::Batches));
/// assert!("numa,-bogus".parse::<Placement>().unwrap_err().contains("bogus"));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placement(u8);

impl Placement {
    /// Plain Go placement: no rule.
    pub const fn go() -> Placement {
        Placement(0)
    }

    /// Every rule (the default).
    pub fn numa() -> Placement {
        Rule::ALL.iter().fold(Placement(0), |p, &r| p.with(r))
    }

    /// This placement with `rule` on.
    pub fn with(self, rule: Rule) -> Placement {
        Placement(self.0 | rule.bit())
    }

    /// This placement with `rule` off.
    pub fn without(self, rule: Rule) -> Placement {
        Placement(self.0 & !rule.bit())
    }

    /// Whether `rule` is on.
    #[inline]
    pub fn has(self, rule: Rule) -> bool {
        self.0 & rule.bit() != 0
    }
}

impl Default for Placement {
    fn default() -> Self {
        Placement::numa()
    }
}

impl fmt::Debug for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Placement {
    /// `numa`, `go`, or `go,+rule,...`: what `FromStr` reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Placement::numa() {
            return f.write_str("numa");
        }
        f.write_str("go")?;
        for r in Rule::ALL.iter().filter(|r| self.has(**r)) {
            write!(f, ",+{}", r.name())?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Placement {
    type Err = String;

    /// Errors name the variable, the value and what was expected.
    fn from_str(s: &str) -> Result<Placement, String> {
        let bad = |why: String| format!("{PLACEMENT_ENV}={s:?}: {why}");
        let mut items = s.split(',').map(str::trim);
        let mut p = match items.next() {
            Some("numa") => Placement::numa(),
            Some("go") => Placement::go(),
            other => {
                return Err(bad(format!(
                    "expected `numa` or `go` first, got {:?}",
                    other.unwrap_or("")
                )))
            }
        };
        for item in items {
            let (on, name) = match (item.strip_prefix('+'), item.strip_prefix('-')) {
                (Some(n), _) => (true, n),
                (_, Some(n)) => (false, n),
                _ => return Err(bad(format!("{item:?} is not `+rule` or `-rule`"))),
            };
            let Some(rule) = Rule::ALL.into_iter().find(|r| r.name() == name) else {
                let names: Vec<_> = Rule::ALL.iter().map(|r| r.name()).collect();
                return Err(bad(format!(
                    "no rule {name:?} (rules: {})",
                    names.join(", ")
                )));
            };
            p = if on { p.with(rule) } else { p.without(rule) };
        }
        Ok(p)
    }
}

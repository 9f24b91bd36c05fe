//! The CPU quota of the process's cgroup (v1 or v2), as Go 1.25 reads it.
//!
//! The parsing is separate from the file reading, so the unit tests can feed
//! it the files of hosts this machine is not (v1, v2, hybrid, containers).

use std::fs;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the `cpu` controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    /// Legacy hierarchy: `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    V1,
    /// Unified hierarchy: `cpu.max`.
    V2,
}

/// The process's CPU quota in whole CPUs (see [`super::cgroup_cpu_quota`]).
pub(super) fn cpu_quota() -> Option<usize> {
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    quota_from(&cgroup, &mountinfo, |path| fs::read_to_string(path).ok())
}

/// Finds the process's cpu cgroup directory from the contents of
/// `/proc/self/cgroup` and `/proc/self/mountinfo`, then reads the limit of
/// every level up to the mount point through `read`, keeping the smallest.
fn quota_from(
    proc_cgroup: &str,
    mountinfo: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<usize> {
    let (version, mount, leaf) = cpu_cgroup_dir(proc_cgroup, mountinfo)?;
    let mut dir = leaf.as_path();
    let mut quota: Option<usize> = None;
    loop {
        let limit = match version {
            Version::V2 => read(&dir.join("cpu.max")).and_then(|t| parse_cpu_max(&t)),
            Version::V1 => {
                let q = read(&dir.join("cpu.cfs_quota_us"));
                let p = read(&dir.join("cpu.cfs_period_us"));
                q.zip(p).and_then(|(q, p)| parse_v1(&q, &p))
            }
        };
        quota = match (quota, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if dir == mount {
            return quota;
        }
        dir = dir.parent().filter(|p| p.starts_with(&mount))?;
    }
}

/// The hierarchy with the cpu controller, its mount point and the process's
/// directory in it. cgroup v1's `cpu` controller wins when it is mounted (on
/// a hybrid host the unified hierarchy has no cpu controller).
fn cpu_cgroup_dir(proc_cgroup: &str, mountinfo: &str) -> Option<(Version, PathBuf, PathBuf)> {
    let mut v1_path = None;
    let mut v2_path = None;
    for line in proc_cgroup.lines() {
        // "hierarchy-id:controller,list:/path"
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path);
        } else if controllers.split(',').any(|c| c == "cpu") {
            v1_path = Some(path);
        }
    }
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let find = |version: Version, path: &str| {
        mounts
            .iter()
            .filter(|m| match version {
                Version::V1 => m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpu"),
                Version::V2 => m.fstype == "cgroup2",
            })
            .find_map(|m| m.dir_of(path))
            .map(|(point, dir)| (version, point, dir))
    };
    v1_path
        .and_then(|p| find(Version::V1, p))
        .or_else(|| v2_path.and_then(|p| find(Version::V2, p)))
}

/// The fields of one `/proc/self/mountinfo` line this module needs.
struct Mount {
    /// The directory of the filesystem that is mounted (for cgroups, the
    /// cgroup the mount shows; `/` unless a container sees a sub-tree).
    root: String,
    /// Where it is mounted.
    point: String,
    /// Filesystem type: `cgroup` (v1) or `cgroup2`.
    fstype: String,
    /// Super-block options; for cgroup v1 these name the controllers.
    options: String,
}

impl Mount {
    /// Parses `36 35 98:0 /root /point rw,... [optional...] - fstype source options`.
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let mut left = left.split(' ');
        let root = left.nth(3)?;
        let point = left.next()?;
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let options = right.nth(1).unwrap_or("");
        Some(Mount {
            root: unescape(root),
            point: unescape(point),
            fstype: fstype.to_owned(),
            options: options.to_owned(),
        })
    }

    /// The mount point and the directory, below it, of the cgroup `path`, if
    /// this mount shows it.
    fn dir_of(&self, path: &str) -> Option<(PathBuf, PathBuf)> {
        let rel = if self.root == "/" {
            path
        } else if path == self.root {
            ""
        } else {
            path.strip_prefix(self.root.as_str())
                .filter(|rest| rest.starts_with('/'))?
        };
        let point = PathBuf::from(&self.point);
        let dir = point.join(rel.trim_start_matches('/'));
        Some((point, dir))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `ceil(quota / period)`, or `None` for no limit.
fn ceil_quota(quota: i64, period: i64) -> Option<usize> {
    if quota <= 0 || period <= 0 {
        return None;
    }
    usize::try_from((quota + period - 1) / period).ok()
}

/// Parses cgroup v2 `cpu.max`: `"max 100000"` (no limit) or `"150000 100000"`.
fn parse_cpu_max(text: &str) -> Option<usize> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?.parse().ok()?;
    let period = fields.next().map_or(Some(100_000), |p| p.parse().ok())?;
    ceil_quota(quota, period)
}

/// Parses cgroup v1 `cpu.cfs_quota_us` (`-1` is no limit) and `cpu.cfs_period_us`.
fn parse_v1(quota: &str, period: &str) -> Option<usize> {
    ceil_quota(quota.trim().parse().ok()?, period.trim().parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A `read` function over an in-memory file system.
    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        move |p| map.get(p).cloned()
    }

    const V2_MOUNT: &str =
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    const V1_MOUNTS: &str = "\
30 23 0:26 / /sys/fs/cgroup/unified rw,relatime shared:4 - cgroup2 cgroup2 rw
31 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:5 - cgroup cgroup rw,cpu,cpuacct
32 23 0:28 / /sys/fs/cgroup/cpuset rw,relatime shared:6 - cgroup cgroup rw,cpuset
";

    #[test]
    fn v2_takes_the_smallest_limit_up_the_tree() {
        let read = files(&[
            ("/sys/fs/cgroup/a/b/cpu.max", "max 100000\n"),
            ("/sys/fs/cgroup/a/cpu.max", "250000 100000\n"),
            ("/sys/fs/cgroup/cpu.max", "800000 100000\n"),
        ]);
        assert_eq!(quota_from("0::/a/b\n", V2_MOUNT, read), Some(3));
    }

    #[test]
    fn v2_without_limits_is_none() {
        let read = files(&[("/sys/fs/cgroup/a/cpu.max", "max 100000\n")]);
        assert_eq!(quota_from("0::/a\n", V2_MOUNT, read), None);
    }

    #[test]
    fn v1_cpu_controller_wins_on_hybrid_hosts() {
        let cgroup = "12:cpuset:/\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us",
                "50000\n",
            ),
            (
                "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us",
                "100000\n",
            ),
            ("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n"),
            (
                "/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us",
                "100000\n",
            ),
            ("/sys/fs/cgroup/unified/docker/abc/cpu.max", "400000 100000"),
        ]);
        assert_eq!(quota_from(cgroup, V1_MOUNTS, read), Some(1));
    }

    #[test]
    fn container_sees_its_cgroup_as_the_mount_root() {
        // Without a cgroup namespace, the mount's root is the container's cgroup.
        let mountinfo = "40 35 0:27 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n";
        let read = files(&[
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000"),
        ]);
        assert_eq!(quota_from("3:cpu:/docker/abc\n", mountinfo, read), Some(2));
        // A cgroup outside the mounted sub-tree cannot be read.
        assert_eq!(quota_from("3:cpu:/other\n", mountinfo, files(&[])), None);
    }

    #[test]
    fn no_cgroup_mount_is_none() {
        assert_eq!(quota_from("0::/\n", "", files(&[])), None);
        assert_eq!(quota_from("", V2_MOUNT, files(&[])), None);
    }

    #[test]
    fn parses_limit_files() {
        assert_eq!(parse_cpu_max("max 100000"), None);
        assert_eq!(parse_cpu_max("100000 100000"), Some(1));
        assert_eq!(parse_cpu_max("100001 100000"), Some(2));
        assert_eq!(parse_cpu_max("50000"), Some(1));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(parse_v1("-1", "100000"), None);
        assert_eq!(parse_v1("350000\n", "100000\n"), Some(4));
        assert_eq!(parse_v1("1000", "0"), None);
    }

    #[test]
    fn unescapes_mount_points() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape(r"/bad\09"), r"/bad\09");
        let m = Mount::parse(r"1 2 0:3 / /sys/fs/my\040cg rw - cgroup2 none rw").unwrap();
        assert_eq!(m.point, "/sys/fs/my cg");
    }
}

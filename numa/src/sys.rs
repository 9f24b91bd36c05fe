//! The operating system interface: CPU affinity, memory policy, CPU quota,
//! and what the scheduler says about a thread (its CPU-time clock, its state,
//! its `schedstat`).
//!
//! Every system call of the crate lives here, behind a small safe API; the
//! rest of the crate (and the executor) never writes `unsafe`. The calls come
//! from the `libc` crate (`sched_getaffinity`, `sched_setaffinity`,
//! `sched_getcpu`, and the raw `set_mempolicy`, `get_mempolicy`, `mbind` and
//! `membarrier` system calls), so no C library such as libnuma is needed to build.
//!
//! Affinity masks are sized dynamically, so machines with more than the 1024
//! CPUs of glibc's fixed `cpu_set_t` work.
//!
//! Memory-policy calls fail with `EPERM` in some containers (Docker's default
//! seccomp profile blocks them without `CAP_SYS_NICE`) and with `EINVAL` for a
//! node that does not exist (on a one-node machine only node 0 does). Callers
//! should treat them as hints: report the first failure and carry on.

use std::io;
use std::mem::size_of;

use libc::{c_int, c_long, c_ulong};

use crate::CpuSet;

mod cgroup;

/// Bits per word of the kernel's CPU and node masks (an `unsigned long`).
const MASK_WORD_BITS: usize = c_ulong::BITS as usize;

/// `get_mempolicy` flag: return the node of the page at `addr` (`MPOL_F_NODE`
/// in `<linux/mempolicy.h>`; not in the libc crate).
const MPOL_F_NODE: c_ulong = 1 << 0;
/// `get_mempolicy` flag: look up the policy of the page at `addr`.
const MPOL_F_ADDR: c_ulong = 1 << 1;
/// `mbind` flag: migrate pages already placed against the new policy.
const MPOL_MF_MOVE: c_ulong = 1 << 1;
/// Mode flags the kernel may OR into the mode `get_mempolicy` reports.
const MPOL_MODE_FLAGS: c_int =
    libc::MPOL_F_STATIC_NODES | libc::MPOL_F_RELATIVE_NODES | libc::MPOL_F_NUMA_BALANCING;
/// Node masks are sized for this many nodes at first: the kernel's largest
/// `MAX_NUMNODES` (`NODES_SHIFT` = 10), which `get_mempolicy` requires.
const DEFAULT_MAX_NODES: usize = 1024;

/// Converts a kernel mask of `unsigned long` words into a [`CpuSet`].
fn set_from_mask(mask: &[c_ulong]) -> CpuSet {
    let mut set = CpuSet::new();
    for (i, &word) in mask.iter().enumerate() {
        for bit in 0..MASK_WORD_BITS {
            if word & (1 << bit) != 0 {
                set.insert(i * MASK_WORD_BITS + bit);
            }
        }
    }
    set
}

/// Converts bit numbers (CPUs or nodes) into a kernel mask of at least
/// `min_bits` bits.
fn mask_from_bits(bits: impl IntoIterator<Item = usize>, min_bits: usize) -> Vec<c_ulong> {
    let mut mask = vec![0; min_bits.div_ceil(MASK_WORD_BITS).max(1)];
    for bit in bits {
        let word = bit / MASK_WORD_BITS;
        if word >= mask.len() {
            mask.resize(word + 1, 0);
        }
        mask[word] |= 1 << (bit % MASK_WORD_BITS);
    }
    mask
}

/// `sched_getaffinity(pid)`, growing the mask until the kernel accepts its
/// size (it rejects masks shorter than its `nr_cpu_ids` with `EINVAL`).
fn get_affinity(pid: libc::pid_t) -> io::Result<CpuSet> {
    let mut words = 1024 / MASK_WORD_BITS;
    loop {
        let mut mask: Vec<c_ulong> = vec![0; words];
        // SAFETY: `mask` is a live, writable buffer of exactly
        // `words * size_of::<c_ulong>()` bytes, aligned for `c_ulong` like
        // `cpu_set_t`; the kernel writes at most that many bytes into it.
        let rc = unsafe {
            libc::sched_getaffinity(
                pid,
                words * size_of::<c_ulong>(),
                mask.as_mut_ptr().cast::<libc::cpu_set_t>(),
            )
        };
        if rc == 0 {
            return Ok(set_from_mask(&mask));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) && words * MASK_WORD_BITS < CpuSet::MAX_CPUS {
            words *= 2;
            continue;
        }
        return Err(err);
    }
}

/// The CPUs this process may run on: the affinity mask set by `taskset`,
/// `numactl --cpunodebind`, a container runtime or a cgroup cpuset.
///
/// It is the mask of the process's main thread, so a worker thread that is
/// already bound to one node still sees all of the process's CPUs. If the
/// main thread is gone (it called `pthread_exit`), it is the calling thread's.
pub fn allowed_cpus() -> io::Result<CpuSet> {
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() };
    get_affinity(pid).or_else(|_| thread_affinity())
}

/// The calling thread's affinity mask.
pub fn thread_affinity() -> io::Result<CpuSet> {
    get_affinity(0)
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity`).
///
/// The OS still balances the thread among those CPUs; binding an M to its
/// node's whole CPU set, not to one core, is what Vyukov's design wants.
/// An empty set is an `InvalidInput` error; a set with no CPU the process may
/// use is the kernel's `EINVAL`.
pub fn set_thread_affinity(cpus: &CpuSet) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot bind a thread to an empty CPU set",
        ));
    }
    let mask = mask_from_bits(cpus.iter(), 0);
    // SAFETY: `mask` is a live buffer of exactly `mask.len() * size_of::<c_ulong>()`
    // bytes, aligned for `c_ulong` like `cpu_set_t`; the kernel only reads it.
    let rc = unsafe {
        libc::sched_setaffinity(
            0,
            mask.len() * size_of::<c_ulong>(),
            mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPU the calling thread is running on right now (`sched_getcpu`), or
/// `None` if the kernel cannot tell. The answer may be stale by the time it
/// is used; it is a hint.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Pins the calling thread to the single core `cpu` (through `core_affinity`),
/// returning whether it worked. For `Builder::pin_cores(true)`; a node-bound
/// thread uses [`set_thread_affinity`] instead.
pub fn pin_to_core(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// `set_mempolicy(mode, nodes)` for the calling thread.
fn set_mempolicy(mode: c_int, nodes: Option<usize>) -> io::Result<()> {
    let mask = nodes.map(|node| mask_from_bits([node], DEFAULT_MAX_NODES));
    let (ptr, maxnode) = match &mask {
        // The kernel reads `maxnode - 1` bits (a historical off-by-one), so
        // one more than the mask holds makes it read the whole mask.
        Some(mask) => (mask.as_ptr(), (mask.len() * MASK_WORD_BITS + 1) as c_ulong),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: `ptr` is null with `maxnode` 0, or points to `mask`, which is
    // alive until the call returns and holds the `maxnode - 1` bits the
    // kernel reads. The call only changes the thread's allocation policy.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode as c_long, ptr, maxnode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Checks that a node number fits the masks the kernel accepts.
fn check_node(node: usize) -> io::Result<usize> {
    if node < CpuSet::MAX_CPUS {
        Ok(node)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NUMA node {node} is out of range"),
        ))
    }
}

/// Makes the calling thread allocate memory on `node` when it can
/// (`set_mempolicy(MPOL_PREFERRED)`), falling back to other nodes when it is
/// full.
///
/// `node` is the **operating system's** node number, [`Node::os_id`], not
/// the dense [`NodeId`](crate::NodeId) of a topology (the two are equal
/// unless nodes are numbered sparsely, dropped or simulated). Fails with
/// `EINVAL` for a node the machine does not have (on a one-node machine,
/// anything but 0) and with `EPERM` where the call is not permitted.
///
/// [`Node::os_id`]: crate::Node::os_id
pub fn set_preferred_node(node: impl Into<usize>) -> io::Result<()> {
    let node = check_node(node.into())?;
    set_mempolicy(libc::MPOL_PREFERRED, Some(node))
}

/// Makes the calling thread allocate on the node of the CPU it runs on
/// (`MPOL_LOCAL`, Linux 3.8+), which for a node-bound thread is its node.
pub fn set_local_alloc() -> io::Result<()> {
    set_mempolicy(libc::MPOL_LOCAL, None)
}

/// Restores the calling thread's default memory policy (`MPOL_DEFAULT`: the
/// process's policy, normally first-touch local allocation).
pub fn reset_memory_policy() -> io::Result<()> {
    set_mempolicy(libc::MPOL_DEFAULT, None)
}

/// A thread's memory policy, as [`memory_policy`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryPolicy {
    /// `MPOL_DEFAULT`: the process's policy (normally local allocation).
    Default,
    /// `MPOL_PREFERRED`: this OS node first, others when it is full.
    Preferred(usize),
    /// `MPOL_LOCAL`: the node of the CPU the thread runs on.
    Local,
    /// `MPOL_BIND`: only these OS nodes.
    Bind(Vec<usize>),
    /// `MPOL_INTERLEAVE`: round-robin over these OS nodes.
    Interleave(Vec<usize>),
    /// A mode this crate does not name (e.g. `MPOL_WEIGHTED_INTERLEAVE`).
    Other {
        /// The raw `MPOL_*` mode.
        mode: i32,
        /// Its OS nodes.
        nodes: Vec<usize>,
    },
}

/// The calling thread's memory policy (`get_mempolicy`).
pub fn memory_policy() -> io::Result<MemoryPolicy> {
    let mut bits = DEFAULT_MAX_NODES;
    loop {
        let mut mask: Vec<c_ulong> = vec![0; bits / MASK_WORD_BITS];
        let mut mode: c_int = 0;
        // SAFETY: `mode` and `mask` are live and writable; the kernel writes
        // one int to `mode` and at most `maxnode - 1` = `bits` bits to `mask`,
        // which is exactly its size. A null address with no flags asks for the
        // thread's policy, so no user memory is inspected.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut c_int,
                mask.as_mut_ptr(),
                (bits + 1) as c_ulong,
                std::ptr::null::<libc::c_void>(),
                0 as c_ulong,
            )
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            // EINVAL: fewer bits than the kernel's node count; retry larger.
            if err.raw_os_error() == Some(libc::EINVAL) && bits < CpuSet::MAX_CPUS {
                bits *= 2;
                continue;
            }
            return Err(err);
        }
        let nodes: Vec<usize> = set_from_mask(&mask).iter().collect();
        return Ok(match mode & !MPOL_MODE_FLAGS {
            libc::MPOL_DEFAULT => MemoryPolicy::Default,
            // Kernels before 5.x report MPOL_LOCAL as "preferred, no node".
            libc::MPOL_PREFERRED if nodes.is_empty() => MemoryPolicy::Local,
            libc::MPOL_PREFERRED => MemoryPolicy::Preferred(nodes[0]),
            libc::MPOL_LOCAL => MemoryPolicy::Local,
            libc::MPOL_BIND => MemoryPolicy::Bind(nodes),
            libc::MPOL_INTERLEAVE => MemoryPolicy::Interleave(nodes),
            mode => MemoryPolicy::Other { mode, nodes },
        });
    }
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// Places the memory of `buf` on OS node `node` (`mbind(MPOL_PREFERRED,
/// MPOL_MF_MOVE)`): pages not yet touched are allocated there when first
/// written, pages already elsewhere are migrated (when only this process maps
/// them). `node` is an OS node number, as for [`set_preferred_node`].
///
/// Policies apply to whole pages, so only the pages lying entirely inside
/// `buf` are affected: memory shared with neighbouring allocations is left
/// alone, and a buffer smaller than a page is not moved at all. Allocate
/// large buffers (or page-aligned ones) to place them precisely.
pub fn set_buffer_node<T>(buf: &[T], node: impl Into<usize>) -> io::Result<()> {
    let node = check_node(node.into())?;
    let page = page_size();
    let addr = buf.as_ptr() as usize;
    let start = addr.next_multiple_of(page);
    let end = (addr + std::mem::size_of_val(buf)) / page * page;
    if end <= start {
        return Ok(());
    }
    let mask = mask_from_bits([node], DEFAULT_MAX_NODES);
    // SAFETY: [start, end) is a page-aligned range inside `buf`, which is
    // mapped and borrowed for the whole call. mbind only changes where those
    // pages live; migration preserves their contents, so no Rust-visible
    // memory changes. `mask` is alive and holds the `maxnode - 1` bits read.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            start as c_ulong,
            (end - start) as c_ulong,
            libc::MPOL_PREFERRED as c_long,
            mask.as_ptr(),
            (mask.len() * MASK_WORD_BITS + 1) as c_ulong,
            MPOL_MF_MOVE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The OS node holding the page of `value` (`get_mempolicy(MPOL_F_NODE |
/// MPOL_F_ADDR)`).
///
/// The page should have been written: a page that was only ever read (say,
/// of a freshly zero-allocated buffer) may still be the shared zero page,
/// whose node says nothing about where the data will go.
pub fn memory_node_of<T>(value: &T) -> io::Result<usize> {
    let mut node: c_int = -1;
    // SAFETY: `node` is a live, writable int; with a null mask and maxnode 0
    // nothing else is written. `value` is a valid reference, so its address
    // lies in a mapped area; the kernel only looks that page up.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut c_int,
            std::ptr::null_mut::<c_ulong>(),
            0 as c_ulong,
            value as *const T,
            MPOL_F_NODE | MPOL_F_ADDR,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    usize::try_from(node).map_err(|_| io::Error::other("get_mempolicy returned no node"))
}

/// `membarrier` commands (`<linux/membarrier.h>`; not in the libc crate).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: c_int = 1 << 4;

/// Registers the process for [`membarrier`] (Linux 4.14+):
/// `membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)`. Idempotent.
///
/// Fails with `ENOSYS` on kernels without the call, `EINVAL` on kernels
/// without the private expedited command, and `EPERM` where a seccomp
/// filter refuses it: callers fall back to doing without.
pub fn membarrier_register() -> io::Result<()> {
    membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
}

/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: when it returns, every
/// thread of this process that was running has executed a full memory
/// barrier, and every thread that was not will execute one (the context
/// switch) before it runs again. It makes a compiler fence on another
/// thread as strong as a full fence for the pairs it closes (the
/// asymmetric fences of liburcu's `urcu-memb` and folly's
/// `asymmetricHeavyBarrier`). Needs [`membarrier_register`] first (else
/// `EPERM`). Costs an IPI to each CPU running a thread of the process.
pub fn membarrier() -> io::Result<()> {
    membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
}

fn membarrier_cmd(cmd: c_int) -> io::Result<()> {
    // SAFETY: membarrier takes two integers (command, flags; plus a CPU id
    // that only MEMBARRIER_CMD_FLAG_CPU reads) and touches no memory of
    // ours; an unknown command or kernel fails with an errno.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as c_int, 0 as c_int) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The calling thread's kernel id (`gettid`), as `/proc/self/task/<tid>`
/// names it.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The CPU time thread `tid` of this process has used, from its CPU-time
/// clock (glibc's `pthread_getcpuclockid` builds the same clock id from the
/// thread id). Exact for a thread on a CPU right now, unlike
/// `/proc/<pid>/task/<tid>/stat` (clock ticks) or `schedstat` (both
/// updated at scheduler events). Fails (`EINVAL`) when the thread is gone.
pub fn thread_cpu_time(tid: i32) -> io::Result<std::time::Duration> {
    // The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the inverted
    // tid above three bits, CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2).
    let clock = ((!tid) << 3) | 4 | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; a bad clock id is an error.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::time::Duration::new(
        ts.tv_sec as u64,
        ts.tv_nsec as u32,
    ))
}

/// Thread `tid`'s scheduling state, the third field of
/// `/proc/self/task/<tid>/stat`: `R` running or waiting for a CPU, `S`
/// sleeping, `D` in uninterruptible sleep (disk I/O), ...
pub fn thread_state(tid: i32) -> io::Result<char> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))?;
    parse_state(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/self/task/{tid}/stat: no state in {text:?}"),
        )
    })
}

/// One reading of a thread's scheduler statistics,
/// `/proc/self/task/<tid>/schedstat` (kernels built with `CONFIG_SCHED_INFO`;
/// the `kernel.sched_schedstats` switch is not needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedStat {
    /// CPU time used, as of the scheduler's last update of it: while the
    /// thread runs it lags [`thread_cpu_time`], which adds the time since.
    pub on_cpu: std::time::Duration,
    /// Time spent runnable on a run queue waiting for a CPU (a CFS quota
    /// throttle included). The kernel adds a wait when it ends, as the
    /// thread gets a CPU: a wait in progress is not in it yet (see
    /// [`SchedStatFile::look`]).
    pub waiting: std::time::Duration,
    /// How many times the thread got a CPU.
    pub slices: u64,
}

/// Thread `tid`'s `/proc/self/task/<tid>/schedstat`, kept open: each
/// [`read`](SchedStatFile::read) is one `pread` at offset 0 (the kernel
/// writes the file afresh for a read from the start), with no path lookup.
/// The open file stays with the thread it was opened for: once that thread
/// is gone reads fail (`ESRCH`), even if its id is reused.
#[derive(Debug)]
pub struct SchedStatFile {
    tid: i32,
    file: std::fs::File,
}

impl SchedStatFile {
    /// Opens thread `tid`'s schedstat and reads it once: fails
    /// (`Unsupported`) where the kernel does not keep the statistics (the
    /// file is missing, or reads `0 0 0`), or when the thread is gone.
    pub fn open(tid: i32) -> io::Result<SchedStatFile> {
        let file = std::fs::File::open(format!("/proc/self/task/{tid}/schedstat"))?;
        let f = SchedStatFile { tid, file };
        f.read()?;
        Ok(f)
    }

    /// The thread this file describes.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Reads the statistics now.
    pub fn read(&self) -> io::Result<SchedStat> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.file.read_at(&mut buf, 0)?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("");
        parse_schedstat(text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "/proc/self/task/{}/schedstat: no scheduler statistics in {text:?}",
                    self.tid
                ),
            )
        })
    }

    /// Reads the statistics and says whether they are settled: read at a
    /// moment when no wait for a CPU was in progress, so that
    /// [`SchedStat::waiting`] is complete. Not settled when the thread may
    /// be waiting for a CPU right now (runnable and not on one), the one
    /// case where the wait it is in is missing; its CPU-time clock is exact
    /// either way.
    ///
    /// How: a first read, then the thread's CPU-time clock. The clock adds
    /// the time since the scheduler's last update only for a thread on a
    /// CPU, so a clock ahead of `on_cpu` means the thread ran at some moment
    /// after the first read; otherwise its state (`/proc/.../stat`) must
    /// say asleep (`S`, `D`, ...): a sleeping thread waits for no CPU. A
    /// second read then has every wait that ended before that moment; one
    /// begun after it is at most the microseconds these reads took.
    pub fn look(&self) -> io::Result<SchedLook> {
        let first = self.read()?;
        let cpu_time = thread_cpu_time(self.tid)?;
        if cpu_time <= first.on_cpu && thread_state(self.tid)? == 'R' {
            return Ok(SchedLook {
                stat: first,
                cpu_time,
                settled: false,
            });
        }
        Ok(SchedLook {
            stat: self.read()?,
            cpu_time,
            settled: true,
        })
    }
}

/// What [`SchedStatFile::look`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedLook {
    /// The statistics: `waiting` is complete when `settled`.
    pub stat: SchedStat,
    /// The thread's CPU-time clock ([`thread_cpu_time`]), read between.
    pub cpu_time: std::time::Duration,
    /// No wait for a CPU was in progress (the thread ran, or slept).
    pub settled: bool,
}

/// `<on-CPU ns> <run-queue wait ns> <slices>`; `None` for anything else,
/// and for `0 0 0`, what kernels print when they keep no statistics (a
/// thread that is asked about has run, so its CPU time is not zero).
fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    let (on_cpu, waiting, slices) = (fields.next()??, fields.next()??, fields.next()??);
    if on_cpu == 0 && waiting == 0 && slices == 0 {
        return None;
    }
    Some(SchedStat {
        on_cpu: std::time::Duration::from_nanos(on_cpu),
        waiting: std::time::Duration::from_nanos(waiting),
        slices,
    })
}

/// The state follows the command name, which is in parentheses and may
/// itself hold spaces and parentheses: the last `)` ends it.
fn parse_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The process's CPU quota in whole CPUs, `ceil(quota / period)`, from
/// cgroup v2 `cpu.max` or cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
///
/// The process's cgroup is found through `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, and every level from it up to the root of the
/// mount is read, keeping the smallest limit (a parent's quota binds its
/// children too). `None` when there is no quota or it cannot be read.
pub fn cgroup_cpu_quota() -> Option<usize> {
    cgroup::cpu_quota()
}

/// The default number of P's (Go's `GOMAXPROCS` rule as of Go 1.25): the CPUs
/// in the affinity mask, capped by the cgroup CPU quota, where a quota counts
/// as at least 2 (a quota of 0.5 CPU still gets 2 P's, so one blocked P does
/// not stall the process); never more than the mask, never less than 1.
///
/// The quota may change while the process runs; callers that care re-read it.
pub fn default_max_procs() -> usize {
    let mask = allowed_cpus().map(|cpus| cpus.len()).unwrap_or(0);
    let mask = if mask == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        mask
    };
    max_procs_for(mask, cgroup_cpu_quota())
}

/// [`default_max_procs`]'s rule, given the mask size and the quota.
fn max_procs_for(mask_cpus: usize, quota: Option<usize>) -> usize {
    let procs = match quota {
        Some(quota) => mask_cpus.min(quota.max(2)),
        None => mask_cpus,
    };
    procs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_clock_and_state_of_this_thread() {
        assert_eq!(parse_state("42 (a (b) c) S 1 2 3"), Some('S'));
        assert_eq!(parse_state("42 (x) R 1"), Some('R'));
        assert_eq!(parse_state("garbage"), None);
        let tid = gettid();
        assert!(tid > 0);
        assert_eq!(thread_state(tid).unwrap(), 'R', "this thread runs");
        let a = thread_cpu_time(tid).unwrap();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(5) {
            std::hint::spin_loop();
        }
        let b = thread_cpu_time(tid).unwrap();
        assert!(b > a, "{a:?} then {b:?}");
        // A thread that is gone: an error, never another thread's clock.
        // Its tid can be handed at once to a thread another test of this
        // process starts (pid_max is 32,768 in CI's containers; a CI run
        // failed so once), which then answers as itself: of 20 gone
        // threads, one must fail. `join` returns when the kernel clears the
        // tid, before it releases the task, so a gone tid may still answer
        // for a moment (all 20 did, once, in the 2-node guest under TCG):
        // each gets a bounded wait for its release.
        let failed = (0..20).any(|_| {
            let gone = std::thread::spawn(gettid).join().unwrap();
            let t0 = std::time::Instant::now();
            loop {
                if thread_cpu_time(gone).is_err() && thread_state(gone).is_err() {
                    return true;
                }
                if t0.elapsed() > std::time::Duration::from_millis(500) {
                    return false;
                }
                std::thread::yield_now();
            }
        });
        assert!(failed, "20 threads gone, and each tid still had a clock");
    }

    #[test]
    fn schedstat_of_this_thread_and_a_sleeping_one() {
        assert_eq!(
            parse_schedstat("82714 3113664 2\n"),
            Some(SchedStat {
                on_cpu: std::time::Duration::from_nanos(82714),
                waiting: std::time::Duration::from_nanos(3113664),
                slices: 2,
            })
        );
        assert_eq!(parse_schedstat("0 0 0\n"), None, "statistics off");
        assert_eq!(parse_schedstat("12 x 3"), None);
        assert_eq!(parse_schedstat(""), None);
        let f = match SchedStatFile::open(gettid()) {
            Ok(f) => f,
            // A kernel without CONFIG_SCHED_INFO: nothing more to check.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return,
            Err(e) => panic!("schedstat: {e}"),
        };
        assert_eq!(f.tid(), gettid());
        let a = f.read().unwrap();
        // (`on_cpu` may still be 0 for a new thread: no update yet.)
        assert!(a.slices > 0, "{a:?}");
        // This thread is on a CPU while it asks: settled.
        let look = f.look().unwrap();
        assert!(look.settled, "a running thread is settled: {look:?}");
        let b = look.stat;
        assert!(
            b.on_cpu >= a.on_cpu && b.waiting >= a.waiting,
            "{a:?} {b:?}"
        );
        // The clock is read between the look's two reads of the file, so
        // it bounds the earlier figure only: the second read may add a
        // slice that ended after the clock was read (seen in the 2-node
        // guest: 3.20 ms in the file, 2.71 ms on the clock).
        assert!(look.cpu_time >= a.on_cpu, "{a:?} {look:?}");
        // A thread asleep on a channel: settled too (bounded wait for its
        // state to read `S`).
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let f = SchedStatFile::open(tid).unwrap();
        let mut settled = false;
        for _ in 0..10_000 {
            if thread_state(tid).unwrap() == 'S' {
                settled = f.look().unwrap().settled;
                if settled {
                    break;
                }
            }
            std::thread::yield_now();
        }
        assert!(settled, "a sleeping thread is settled");
        done_tx.send(()).unwrap();
        sleeper.join().unwrap();
        // Gone: an error, never another thread's statistics. `join` returns
        // when the kernel clears the thread's tid, which comes before it
        // releases the task: on a busy machine the file still reads for a
        // moment (1 run of 2 beside two busy loops), so wait, bounded, for
        // the release.
        let t0 = std::time::Instant::now();
        while f.read().is_ok() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::yield_now();
        }
        assert!(f.read().is_err(), "a thread 10 s gone still reads");
        assert!(f.look().is_err());
    }

    #[test]
    fn masks_round_trip() {
        let cpus: CpuSet = [0, 3, 63, 64, 1500].into_iter().collect();
        let mask = mask_from_bits(cpus.iter(), 0);
        assert_eq!(mask.len(), 1500 / MASK_WORD_BITS + 1);
        assert_eq!(set_from_mask(&mask), cpus);
        assert_eq!(
            mask_from_bits([1], DEFAULT_MAX_NODES).len(),
            1024 / MASK_WORD_BITS
        );
        assert_eq!(mask_from_bits([], 0), vec![0]);
    }

    #[test]
    fn max_procs_rule() {
        assert_eq!(max_procs_for(8, None), 8);
        assert_eq!(max_procs_for(8, Some(3)), 3);
        // A quota counts as at least 2 ...
        assert_eq!(max_procs_for(8, Some(1)), 2);
        // ... but never more than the mask.
        assert_eq!(max_procs_for(1, Some(1)), 1);
        assert_eq!(max_procs_for(2, Some(16)), 2);
        assert_eq!(max_procs_for(0, None), 1);
    }

    #[test]
    fn empty_affinity_is_rejected() {
        let err = set_thread_affinity(&CpuSet::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn absurd_node_is_rejected() {
        let err = set_preferred_node(usize::MAX).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}

//! [`Interest`] (what a task waits for) and [`Ready`] (what the poller saw),
//! the vocabulary of the readiness API on sockets and [`AsyncFd`](super::AsyncFd).

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign, Sub};

use crate::driver::io::{ERROR, PRIORITY, READABLE, READ_CLOSED, WRITABLE, WRITE_CLOSED};

// Interest bits (their own; `Interest::mask` maps them to readiness bits).
const I_READABLE: u8 = 0b0001;
const I_WRITABLE: u8 = 0b0010;
const I_PRIORITY: u8 = 0b0100;
const I_ERROR: u8 = 0b1000;

/// The readiness a task waits on: [`Interest::READABLE`],
/// [`Interest::WRITABLE`], [`Interest::PRIORITY`], [`Interest::ERROR`], or
/// several of them together (`READABLE | WRITABLE`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    /// Waiting to read (or accept, or receive).
    pub const READABLE: Interest = Interest(I_READABLE);
    /// Waiting to write (or send).
    pub const WRITABLE: Interest = Interest(I_WRITABLE);
    /// Waiting for urgent data (`EPOLLPRI`: TCP out-of-band data, a
    /// `/proc/self/mounts` change, a pseudo-terminal's packet mode).
    pub const PRIORITY: Interest = Interest(I_PRIORITY);
    /// Waiting for an error condition (`EPOLLERR`: for example a UDP
    /// socket's error queue after `IP_RECVERR` or send timestamping). The
    /// poller always reports errors; registering `ERROR` alone registers
    /// for reading too, whose readiness such a wait does not see.
    pub const ERROR: Interest = Interest(I_ERROR);

    /// Whether this includes reading.
    pub const fn is_readable(self) -> bool {
        self.0 & I_READABLE != 0
    }

    /// Whether this includes writing.
    pub const fn is_writable(self) -> bool {
        self.0 & I_WRITABLE != 0
    }

    /// Whether this includes priority (urgent) data.
    pub const fn is_priority(self) -> bool {
        self.0 & I_PRIORITY != 0
    }

    /// Whether this includes error conditions.
    pub const fn is_error(self) -> bool {
        self.0 & I_ERROR != 0
    }

    /// Both interests together (the `|` operator, usable in `const`).
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub const fn add(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }

    /// This interest without `other`'s; `None` when nothing is left.
    #[must_use = "this returns the result of the operation, without modifying the original"]
    pub fn remove(self, other: Interest) -> Option<Interest> {
        let left = self.0 & !other.0;
        (left != 0).then_some(Interest(left))
    }

    /// The same interest in mio's terms, for registration.
    pub(crate) fn to_mio(self) -> mio::Interest {
        let mut mio: Option<mio::Interest> = None;
        let mut add = |i: mio::Interest| {
            mio = Some(match mio {
                Some(m) => m | i,
                None => i,
            })
        };
        if self.is_readable() {
            add(mio::Interest::READABLE);
        }
        if self.is_writable() {
            add(mio::Interest::WRITABLE);
        }
        if self.is_priority() {
            add(mio::Interest::PRIORITY);
        }
        // mio has no error interest (errors are always reported) and no
        // empty one: an error-only registration registers for reading.
        mio.unwrap_or(mio::Interest::READABLE)
    }

    /// The readiness bits that satisfy this interest (tokio's
    /// `Ready::from_interest`): a closed direction counts as ready.
    pub(crate) fn mask(self) -> usize {
        let mut m = 0;
        if self.is_readable() {
            m |= READABLE | READ_CLOSED;
        }
        if self.is_writable() {
            m |= WRITABLE | WRITE_CLOSED;
        }
        if self.is_priority() {
            m |= PRIORITY | READ_CLOSED;
        }
        if self.is_error() {
            m |= ERROR;
        }
        m
    }
}

impl BitOr for Interest {
    type Output = Interest;
    fn bitor(self, other: Interest) -> Interest {
        self.add(other)
    }
}

impl BitOrAssign for Interest {
    fn bitor_assign(&mut self, other: Interest) {
        *self = self.add(other);
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (I_READABLE, "READABLE"),
            (I_WRITABLE, "WRITABLE"),
            (I_PRIORITY, "PRIORITY"),
            (I_ERROR, "ERROR"),
        ];
        let mut sep = "";
        for (bit, name) in names {
            if self.0 & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = " | ";
            }
        }
        Ok(())
    }
}

/// Readiness the poller reported for a source. A readiness check can be
/// spurious (an operation may still return `WouldBlock`); the `try_*`
/// operations and the guards' `try_io` clear it when it is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Ready(usize);

impl Ready {
    /// No readiness.
    pub const EMPTY: Ready = Ready(0);
    /// Data (or a connection) to read.
    pub const READABLE: Ready = Ready(READABLE);
    /// Room to write.
    pub const WRITABLE: Ready = Ready(WRITABLE);
    /// The peer shut its write direction down (reads reach end of file).
    pub const READ_CLOSED: Ready = Ready(READ_CLOSED);
    /// Our write direction is shut down (writes fail).
    pub const WRITE_CLOSED: Ready = Ready(WRITE_CLOSED);
    /// An error is pending on the source (`SO_ERROR`, `EPOLLERR`).
    pub const ERROR: Ready = Ready(ERROR);
    /// Urgent data to read (`EPOLLPRI`).
    pub const PRIORITY: Ready = Ready(PRIORITY);
    /// Every readiness.
    pub const ALL: Ready =
        Ready(READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED | ERROR | PRIORITY);

    /// The public readiness among the driver's bits.
    pub(crate) fn from_bits(bits: usize) -> Ready {
        Ready(bits & Ready::ALL.0)
    }

    /// The driver's bits.
    pub(crate) fn bits(self) -> usize {
        self.0
    }

    /// Whether nothing is ready.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether a read would not wait: readable or read-closed.
    pub fn is_readable(self) -> bool {
        self.0 & (READABLE | READ_CLOSED) != 0
    }

    /// Whether a write would not wait: writable or write-closed.
    pub fn is_writable(self) -> bool {
        self.0 & (WRITABLE | WRITE_CLOSED) != 0
    }

    /// Whether the read direction is closed.
    pub fn is_read_closed(self) -> bool {
        self.0 & READ_CLOSED != 0
    }

    /// Whether the write direction is closed.
    pub fn is_write_closed(self) -> bool {
        self.0 & WRITE_CLOSED != 0
    }

    /// Whether an error is pending.
    pub fn is_error(self) -> bool {
        self.0 & ERROR != 0
    }

    /// Whether urgent (priority) data is pending.
    pub fn is_priority(self) -> bool {
        self.0 & PRIORITY != 0
    }
}

impl BitAnd for Ready {
    type Output = Ready;
    fn bitand(self, other: Ready) -> Ready {
        Ready(self.0 & other.0)
    }
}

impl Sub for Ready {
    type Output = Ready;
    /// The readiness in `self` that is not in `other`.
    fn sub(self, other: Ready) -> Ready {
        Ready(self.0 & !other.0)
    }
}

impl BitOr for Ready {
    type Output = Ready;
    fn bitor(self, other: Ready) -> Ready {
        Ready(self.0 | other.0)
    }
}

impl BitOrAssign for Ready {
    fn bitor_assign(&mut self, other: Ready) {
        self.0 |= other.0;
    }
}

impl fmt::Debug for Ready {
    /// tokio's shape: one flag per kind of readiness.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready")
            .field("is_readable", &self.is_readable())
            .field("is_writable", &self.is_writable())
            .field("is_read_closed", &self.is_read_closed())
            .field("is_write_closed", &self.is_write_closed())
            .field("is_error", &self.is_error())
            .field("is_priority", &self.is_priority())
            .finish()
    }
}

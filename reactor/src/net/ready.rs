//! [`Interest`] (what a task waits for) and [`Ready`] (what the poller saw),
//! the vocabulary of the readiness API on sockets and [`AsyncFd`](super::AsyncFd).

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

use crate::driver::io::{ReadyEvent, ERROR, READABLE, READ_CLOSED, WRITABLE, WRITE_CLOSED};

/// The directions a task waits on: [`Interest::READABLE`],
/// [`Interest::WRITABLE`], or both (`READABLE | WRITABLE`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    read: bool,
    write: bool,
}

impl Interest {
    /// Waiting to read (or accept, or receive).
    pub const READABLE: Interest = Interest {
        read: true,
        write: false,
    };
    /// Waiting to write (or send).
    pub const WRITABLE: Interest = Interest {
        read: false,
        write: true,
    };

    /// Whether this includes reading.
    pub const fn is_readable(self) -> bool {
        self.read
    }

    /// Whether this includes writing.
    pub const fn is_writable(self) -> bool {
        self.write
    }

    /// Both interests together (the `|` operator, usable in `const`).
    pub const fn add(self, other: Interest) -> Interest {
        Interest {
            read: self.read || other.read,
            write: self.write || other.write,
        }
    }

    /// The same interest in mio's terms, for registration.
    pub(crate) fn to_mio(self) -> mio::Interest {
        match (self.read, self.write) {
            (true, true) => mio::Interest::READABLE | mio::Interest::WRITABLE,
            (false, true) => mio::Interest::WRITABLE,
            // An `Interest` cannot be empty: every value is built from the
            // two constants, and at least one of them says read.
            _ => mio::Interest::READABLE,
        }
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
        match (self.read, self.write) {
            (true, true) => f.write_str("READABLE | WRITABLE"),
            (false, true) => f.write_str("WRITABLE"),
            _ => f.write_str("READABLE"),
        }
    }
}

/// Readiness the poller reported for a source. A readiness check can be
/// spurious (an operation may still return `WouldBlock`); the `try_*`
/// operations and the guards' `try_io` clear it when it is.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
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

    pub(crate) fn from_events(evs: &[Option<ReadyEvent>]) -> Ready {
        let bits = evs.iter().flatten().fold(0, |b, ev| b | ev.bits());
        Ready(bits & (READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED | ERROR))
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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (READABLE, "READABLE"),
            (WRITABLE, "WRITABLE"),
            (READ_CLOSED, "READ_CLOSED"),
            (WRITE_CLOSED, "WRITE_CLOSED"),
            (ERROR, "ERROR"),
        ];
        let mut set = f.debug_set();
        for (bit, name) in names {
            if self.0 & bit != 0 {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

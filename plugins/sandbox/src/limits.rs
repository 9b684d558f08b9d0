//! Resource limits of a confined command ([`Limits`]): how many processes it may run, how large
//! a file it may write, and how much address space each of its processes may take.
//!
//! In a container the process count is counted per user namespace, so the limit holds the
//! command's own processes, not the user's others; outside one it counts all of the user's, so
//! the shell plugin leaves it unset there. A limit of `0` leaves that resource as it was.

use std::ffi::OsString;

use rustix::process::{Resource, Rlimit, setrlimit};

use crate::error::SandboxError;

/// The flag before the three limits on a command line.
pub const LIMITS_FLAG: &str = "--limits";

/// Limits of one command; see [`Limits::DEFAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_NPROC`: processes (and threads) at once.
    pub processes: u64,
    /// `RLIMIT_FSIZE`: bytes of the largest file it may write.
    pub file_size: u64,
    /// `RLIMIT_AS`: bytes of address space of each process.
    pub address_space: u64,
}

const MIB: u64 = 1024 * 1024;

impl Limits {
    /// 1,024 processes, files of 4 GiB, 8 GiB of address space per process: a fork bomb, a
    /// runaway log or a memory leak stops there, while compilers and test suites run.
    pub const DEFAULT: Limits = Limits { processes: 1024, file_size: 4096 * MIB, address_space: 8192 * MIB };

    /// Sets the limits (soft and hard) of the calling process; children inherit them.
    pub fn apply(&self) -> Result<(), SandboxError> {
        for (resource, value) in
            [(Resource::Nproc, self.processes), (Resource::Fsize, self.file_size), (Resource::As, self.address_space)]
        {
            if value == 0 {
                continue;
            }
            let limit = Rlimit { current: Some(value), maximum: Some(value) };
            setrlimit(resource, limit).map_err(|error| SandboxError::Limits(format!("{resource:?}: {error}")))?;
        }
        Ok(())
    }

    /// The limits as command-line arguments, starting with [`LIMITS_FLAG`].
    pub fn to_args(&self) -> Vec<OsString> {
        [LIMITS_FLAG.to_owned(), self.processes.to_string(), self.file_size.to_string(), self.address_space.to_string()]
            .into_iter()
            .map(OsString::from)
            .collect()
    }

    /// Reads limits from the start of `args`, as written by [`Limits::to_args`]; `None` and all
    /// of `args` when they do not start with [`LIMITS_FLAG`].
    pub fn from_args(args: &[OsString]) -> Result<(Option<Limits>, &[OsString]), SandboxError> {
        match args {
            [flag, processes, file_size, address_space, rest @ ..] if flag == LIMITS_FLAG => {
                let number = |value: &OsString| {
                    value.to_str().and_then(|text| text.parse::<u64>().ok()).ok_or_else(|| {
                        SandboxError::BadArguments(format!("'{}' is not a limit", value.to_string_lossy()))
                    })
                };
                let limits = Limits {
                    processes: number(processes)?,
                    file_size: number(file_size)?,
                    address_space: number(address_space)?,
                };
                Ok((Some(limits), rest))
            }
            _ => Ok((None, args)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_survive_the_trip_through_arguments() {
        let mut args = Limits::DEFAULT.to_args();
        args.push(OsString::from("--"));
        let (limits, rest) = Limits::from_args(&args).unwrap();
        assert_eq!(limits, Some(Limits::DEFAULT));
        assert_eq!(rest, [OsString::from("--")]);
        let bad: Vec<OsString> = [LIMITS_FLAG, "1", "x", "3"].iter().map(OsString::from).collect();
        assert!(Limits::from_args(&bad).is_err());
    }
}

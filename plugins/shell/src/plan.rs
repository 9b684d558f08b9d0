//! [`Plan`]: everything that confines one command, in the command-line form the guardian and
//! the helper modes after it ([`crate::contain`], [`crate::confine`]) pass along.
//!
//! The form is `[--container SCRATCH UID GID [--protect PATH]…] [--limits N N N] [POLICY] --
//! PROGRAM [ARGS…]`, POLICY being an [`oxibot_sandbox::Policy`] in its argument form.

use std::ffi::OsString;
use std::path::PathBuf;

use oxibot_sandbox::limits::Limits;
use oxibot_sandbox::namespaces::Ids;
use oxibot_sandbox::{Policy, SandboxError};

/// The flag that starts a container's description.
const CONTAINER_FLAG: &str = "--container";
/// The flag before a path of the workspace that stays read-only in the container.
const PROTECT_FLAG: &str = "--protect";

/// How a command is confined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The container to build around it; `None` confines it with Landlock, seccomp and the
    /// limits only (no user namespaces on this system).
    pub container: Option<Container>,
    /// Its resource limits.
    pub limits: Option<Limits>,
    /// What it may reach (in container paths when there is a container); `None` runs it
    /// unconfined.
    pub policy: Option<Policy>,
}

/// A container to build around a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// A private host directory: `root/` becomes the container's root, `tmp/` its `/tmp`.
    pub scratch: PathBuf,
    /// Who the command runs as (the user who started oxibot).
    pub ids: Ids,
    /// Paths in the workspace bound read-only (the assistant's own state).
    pub protected: Vec<PathBuf>,
}

impl Container {
    /// The directory that becomes the container's root.
    pub fn mount_point(&self) -> PathBuf {
        self.scratch.join("root")
    }

    /// The host directory bound at the container's `/tmp`.
    pub fn tmp(&self) -> PathBuf {
        self.scratch.join("tmp")
    }
}

impl Plan {
    /// The plan as arguments, ending before `--`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        if let Some(container) = &self.container {
            args.push(CONTAINER_FLAG.into());
            args.push(container.scratch.clone().into());
            args.push(container.ids.uid.to_string().into());
            args.push(container.ids.gid.to_string().into());
            for path in &container.protected {
                args.push(PROTECT_FLAG.into());
                args.push(path.clone().into());
            }
        }
        if let Some(limits) = &self.limits {
            args.extend(limits.to_args());
        }
        if let Some(policy) = &self.policy {
            args.extend(policy.to_args());
        }
        args
    }

    /// Reads a plan from the start of `args`; returns it and the arguments after it.
    pub fn from_args(args: &[OsString]) -> Result<(Plan, &[OsString]), SandboxError> {
        let (container, rest) = container_from_args(args)?;
        let (limits, rest) = Limits::from_args(rest)?;
        let (policy, rest) = Policy::from_args(rest)?;
        Ok((Plan { container, limits, policy }, rest))
    }
}

/// Reads `--container SCRATCH UID GID [--protect PATH]…` from the start of `args`.
fn container_from_args(args: &[OsString]) -> Result<(Option<Container>, &[OsString]), SandboxError> {
    let [flag, scratch, uid, gid, rest @ ..] = args else { return Ok((None, args)) };
    if flag != CONTAINER_FLAG {
        return Ok((None, args));
    }
    let id = |value: &OsString| {
        value
            .to_str()
            .and_then(|text| text.parse::<u32>().ok())
            .ok_or_else(|| SandboxError::BadArguments(format!("'{}' is not an id", value.to_string_lossy())))
    };
    let mut container =
        Container { scratch: PathBuf::from(scratch), ids: Ids { uid: id(uid)?, gid: id(gid)? }, protected: Vec::new() };
    let mut rest = rest;
    while let [flag, path, after @ ..] = rest
        && flag == PROTECT_FLAG
    {
        container.protected.push(PathBuf::from(path));
        rest = after;
    }
    Ok((Some(container), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_the_trip_through_arguments() {
        let mut policy = Policy::new();
        policy.allow_read_write("/ws").deny_network();
        let plan = Plan {
            container: Some(Container {
                scratch: PathBuf::from("/tmp/s"),
                ids: Ids { uid: 1000, gid: 100 },
                protected: vec![PathBuf::from("/ws/.git"), PathBuf::from("/ws/memory")],
            }),
            limits: Some(Limits::DEFAULT),
            policy: Some(policy),
        };
        let mut args = plan.to_args();
        args.extend(["--", "sh"].map(OsString::from));
        let (parsed, rest) = Plan::from_args(&args).unwrap();
        assert_eq!(parsed, plan);
        assert_eq!(rest, ["--", "sh"].map(OsString::from));
    }

    #[test]
    fn no_arguments_are_an_empty_plan() {
        let args = ["--", "sh"].map(OsString::from);
        let (plan, rest) = Plan::from_args(&args).unwrap();
        assert_eq!(plan, Plan::default());
        assert_eq!(rest, args);
    }
}

//! Confining the calling process with Landlock ([`apply`]), and finding out whether the running
//! kernel can ([`detect`]).

use std::fmt;

use crate::error::SandboxError;
use crate::policy::Policy;

/// Environment variable that, set to anything but empty or `0`, makes [`detect`] and [`apply`]
/// behave as on a kernel without Landlock. For tests of the refusal paths; it can only turn the
/// sandbox off, never widen a policy.
pub const DISABLE_VAR: &str = "OXIBOT_SANDBOX_DISABLE";

/// Which sandbox the running system offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock, with the kernel's ABI version.
    Landlock {
        /// The Landlock ABI version of the running kernel.
        abi: u32,
    },
    /// No sandbox.
    Unavailable {
        /// Why, in words a user can act on.
        reason: String,
    },
}

impl Support {
    /// Whether a sandbox can be applied.
    pub fn is_available(&self) -> bool {
        matches!(self, Support::Landlock { .. })
    }
}

impl fmt::Display for Support {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Support::Landlock { abi } => write!(f, "landlock (ABI {abi})"),
            Support::Unavailable { reason } => write!(f, "none available ({reason})"),
        }
    }
}

/// What an [`apply`] enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The Landlock ABI version of the running kernel.
    pub abi: u32,
    /// Whether every filesystem right this crate handles is enforced (false on kernels older
    /// than ABI 5, where truncation, cross-directory renames or device ioctls may stay open).
    pub filesystem_fully_enforced: bool,
    /// Whether TCP was taken away (asked for, and ABI 4 or newer).
    pub network_restricted: bool,
    /// Whether signals and abstract unix sockets are scoped to the sandbox (ABI 6 or newer).
    pub scoped: bool,
}

/// Whether [`DISABLE_VAR`] turns the sandbox off.
fn disabled_by_environment() -> bool {
    std::env::var_os(DISABLE_VAR).is_some_and(|value| !value.is_empty() && value != "0")
}

/// Which sandbox the running system offers. Has no effect on the calling process.
pub fn detect() -> Support {
    if disabled_by_environment() {
        return Support::Unavailable { reason: format!("disabled by the environment variable {DISABLE_VAR}") };
    }
    imp::detect()
}

/// Confines the calling thread, and every process it starts from now on, to `policy`.
///
/// Sets `no_new_privs` (no setuid or file-capability gains through `exec`). Landlock confines
/// the calling *thread*: call this in a single-threaded process, or right before `exec`.
/// Fails with [`SandboxError::Unavailable`] when nothing could be enforced, leaving the process
/// as it was.
pub fn apply(policy: &Policy) -> Result<Status, SandboxError> {
    match detect() {
        Support::Landlock { abi } => imp::apply(policy, abi),
        Support::Unavailable { reason } => Err(SandboxError::Unavailable { reason }),
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, LandlockStatus, RestrictSelf, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };

    use super::{Status, Support};
    use crate::error::SandboxError;
    use crate::policy::Policy;

    /// The Landlock ABI whose rights this crate asks for: the newest one it was tested with.
    /// Newer kernels enforce exactly these rights; older ones as many as they know.
    const TARGET: ABI = ABI::V7;

    pub(super) fn detect() -> Support {
        // With no flag to set and no `no_new_privs`, this only asks the kernel for its version.
        let probe = RestrictSelf::default().no_new_privs(false).apply();
        match probe.map(|status| status.landlock) {
            Ok(LandlockStatus::Available { effective_abi, kernel_abi }) => {
                let abi = kernel_abi.and_then(|abi| u32::try_from(abi).ok()).unwrap_or(effective_abi as u32);
                Support::Landlock { abi }
            }
            Ok(LandlockStatus::NotEnabled) => Support::Unavailable {
                reason: "Landlock is built into this kernel but not enabled; add landlock to the lsm= boot parameter"
                    .to_owned(),
            },
            Ok(LandlockStatus::NotImplemented) => Support::Unavailable {
                reason: "this kernel has no Landlock; it needs Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK"
                    .to_owned(),
            },
            Err(error) => Support::Unavailable { reason: format!("cannot ask the kernel about Landlock: {error}") },
        }
    }

    pub(super) fn apply(policy: &Policy, abi: u32) -> Result<Status, SandboxError> {
        let failed = |error: landlock::RulesetError| SandboxError::Landlock(error.to_string());
        let all = AccessFs::from_all(TARGET);
        let execute = AccessFs::from_read(TARGET);
        let read = execute & !AccessFs::Execute;
        let mut ruleset = Ruleset::default().handle_access(all).map_err(failed)?;
        if !policy.network_allowed() {
            ruleset = ruleset.handle_access(AccessNet::from_all(TARGET)).map_err(failed)?;
        }
        let status = ruleset
            .scope(Scope::from_all(TARGET))
            .map_err(failed)?
            .create()
            .map_err(failed)?
            .add_rules(path_beneath_rules(policy.read_write(), all))
            .map_err(failed)?
            .add_rules(path_beneath_rules(policy.read_only(), read))
            .map_err(failed)?
            .add_rules(path_beneath_rules(policy.executable(), execute))
            .map_err(failed)?
            .restrict_self()
            .map_err(failed)?;
        let filesystem_fully_enforced = match status.ruleset {
            RulesetStatus::FullyEnforced => true,
            RulesetStatus::PartiallyEnforced => abi >= 5,
            RulesetStatus::NotEnforced => {
                return Err(SandboxError::Unavailable { reason: "the kernel enforced none of the rules".to_owned() });
            }
        };
        Ok(Status {
            abi,
            filesystem_fully_enforced,
            network_restricted: !policy.network_allowed() && abi >= 4,
            scoped: abi >= 6,
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Status, Support};
    use crate::error::SandboxError;
    use crate::policy::Policy;

    pub(super) fn detect() -> Support {
        Support::Unavailable { reason: "Landlock exists only on Linux".to_owned() }
    }

    pub(super) fn apply(_policy: &Policy, _abi: u32) -> Result<Status, SandboxError> {
        Err(SandboxError::Unavailable { reason: "Landlock exists only on Linux".to_owned() })
    }
}

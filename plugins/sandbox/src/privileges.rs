//! Dropping the capabilities a root process would carry into a confined command.

use crate::error::SandboxError;

/// Empties the calling thread's effective, permitted and inheritable capability sets.
///
/// For a command run as root this removes what Landlock does not cover: raw disk and kernel
/// memory access, mounts, module loading, overriding file permissions. Combined with
/// `no_new_privs` (set by [`crate::apply`]) the capabilities stay gone across `exec`. A process
/// without capabilities is unaffected.
pub fn drop_capabilities() -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CapabilitySet, CapabilitySets, set_capabilities};
        let none = CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        };
        set_capabilities(None, none).map_err(|error| SandboxError::Capabilities(error.into()))
    }
    #[cfg(not(target_os = "linux"))]
    Ok(())
}

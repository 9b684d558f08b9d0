//! The seccomp filter of every `exec` command ([`apply_filter`]): system calls that reach
//! outside a sandbox in ways Landlock does not mediate are refused.
//!
//! Refused with `EPERM`: the key ring (`keyctl`, `add_key`, `request_key`), System V IPC
//! (shared memory, semaphores, message queues: shared with every process of the IPC namespace
//! when there is no container), reading or writing other processes (`ptrace`,
//! `process_vm_readv`/`writev`), `bpf`, `perf_event_open`, `userfaultfd`, everything that
//! mounts or changes the root or the namespaces (`mount`, `umount2`, `pivot_root`, the new
//! mount API, `setns`, `unshare` and `clone` with a namespace flag), `io_uring` (its requests
//! bypass this filter), and module, reboot, swap and accounting calls. `clone3` answers
//! `ENOSYS`, so the C library falls back to `clone`, whose flags the filter can see. A socket of
//! another family than `AF_UNIX` and `AF_NETLINK` — plus `AF_INET` and `AF_INET6` when the
//! network is allowed — answers `EAFNOSUPPORT` (no raw packets, no vsock, no Bluetooth; with
//! the network off not even TCP Fast Open or MPTCP). On x86-64 the x32 system call numbers,
//! which would pass the filter under other numbers, answer `ENOSYS`.
//!
//! The filter is compiled by `seccompiler` (rust-vmm's, in pure Rust) and applied to the
//! calling thread with `no_new_privs`; it stays across `exec` and passes to every child.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};

use crate::error::SandboxError;

/// System calls refused outright.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
];

/// The `clone`/`unshare` flags that create namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Applies the filter to the calling thread (and so to what it executes and starts);
/// `network` allows `AF_INET` and `AF_INET6` sockets.
pub fn apply_filter(network: bool) -> Result<(), SandboxError> {
    for program in programs(network)? {
        seccompiler::apply_filter(&program).map_err(|error| SandboxError::Seccomp(error.to_string()))?;
    }
    Ok(())
}

/// The compiled programs, each with its own answer.
fn programs(network: bool) -> Result<Vec<BpfProgram>, SandboxError> {
    let arch =
        TargetArch::try_from(std::env::consts::ARCH).map_err(|error| SandboxError::Seccomp(error.to_string()))?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    refused.insert(libc::SYS_clone, namespace_rules()?);
    refused.insert(libc::SYS_unshare, namespace_rules()?);
    let mut programs = vec![
        compile(refused, libc::EPERM, arch)?,
        compile(BTreeMap::from([(libc::SYS_socket, vec![family_rule(network)?])]), libc::EAFNOSUPPORT, arch)?,
        compile(BTreeMap::from([(libc::SYS_clone3, Vec::new())]), libc::ENOSYS, arch)?,
    ];
    if arch == TargetArch::x86_64 {
        programs.push(no_x32());
    }
    Ok(programs)
}

/// A filter answering `errno` to the calls of `rules` whose conditions hold, allowing the rest.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32, arch: TargetArch) -> Result<BpfProgram, SandboxError> {
    let errno = u32::try_from(errno).map_err(|_| SandboxError::Seccomp("negative errno".to_owned()))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
        .map_err(|error| SandboxError::Seccomp(error.to_string()))?;
    BpfProgram::try_from(filter).map_err(|error| SandboxError::Seccomp(error.to_string()))
}

/// One rule per namespace flag: the call matches when its first argument has that bit.
fn namespace_rules() -> Result<Vec<SeccompRule>, SandboxError> {
    NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let bit = u64::from(flag.unsigned_abs());
            rule(vec![condition(0, SeccompCmpOp::MaskedEq(bit), bit)?])
        })
        .collect()
}

/// The rule that matches a `socket` call of a family the policy does not allow.
fn family_rule(network: bool) -> Result<SeccompRule, SandboxError> {
    let mut allowed = vec![libc::AF_UNIX, libc::AF_NETLINK];
    if network {
        allowed.extend([libc::AF_INET, libc::AF_INET6]);
    }
    let conditions = allowed
        .into_iter()
        .map(|family| condition(0, SeccompCmpOp::Ne, u64::from(family.unsigned_abs())))
        .collect::<Result<Vec<_>, _>>()?;
    rule(conditions)
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|error| SandboxError::Seccomp(error.to_string()))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|error| SandboxError::Seccomp(error.to_string()))
}

/// A hand-written program for x86-64 that answers `ENOSYS` to every x32 system call number
/// (bit 30 set): they reach the same kernel functions under numbers the other filters do not
/// list. Calls of another architecture are killed.
fn no_x32() -> BpfProgram {
    const LOAD_WORD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JUMP_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JUMP_AT_LEAST: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LOAD_WORD_ABS, 0, 0, ARCH_OFFSET),
        op(JUMP_EQUAL, 1, 0, AUDIT_ARCH_X86_64),
        op(RETURN, 0, 0, RET_KILL_PROCESS),
        op(LOAD_WORD_ABS, 0, 0, NR_OFFSET),
        op(JUMP_AT_LEAST, 0, 1, X32_SYSCALL_BIT),
        op(RETURN, 0, 0, RET_ERRNO | libc::ENOSYS.unsigned_abs()),
        op(RETURN, 0, 0, RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_machine_with_and_without_network() {
        for network in [true, false] {
            let programs = programs(network).unwrap();
            assert!(programs.len() >= 3 && programs.iter().all(|program| !program.is_empty()));
        }
    }

    #[test]
    fn the_network_changes_only_the_socket_filter() {
        let (on, off) = (programs(true).unwrap(), programs(false).unwrap());
        assert_eq!(on[0], off[0]);
        assert_ne!(on[1], off[1]);
    }
}

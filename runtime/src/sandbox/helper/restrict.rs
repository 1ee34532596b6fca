//! What the environment's process applies to itself before any command
//! runs, and every command inherits: Landlock on the file system and a
//! seccomp filter on system calls.

/// Landlock: everything visible may be read and run; only `writable` (the
/// workdir, `/tmp`, `/dev`) may be written. The first ABI's rights are a
/// hard requirement unless `required` is off; later ones apply where the
/// kernel has them.
pub(super) fn restrict_files(writable: &[String], required: bool) -> Result<(), String> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, ABI,
    };
    let newest = ABI::V5;
    let first = if required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let status = Ruleset::default()
        .set_compatibility(first)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| {
            r.set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(newest))
        })
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(newest))))
        .and_then(|r| r.add_rules(path_beneath_rules(writable, AccessFs::from_all(newest))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            format!(
                "Landlock could not be applied ({e}); it needs Linux 5.13 or later with Landlock \
                 enabled (CONFIG_SECURITY_LANDLOCK, `landlock` in the `lsm=` boot parameter), or \
                 [environments] landlock = \"best_effort\" in config.toml"
            )
        })?;
    if required && status.ruleset == RulesetStatus::NotEnforced {
        return Err(
            "Landlock is not enforced by this kernel; it needs Linux 5.13 or later with \
                    Landlock enabled, or [environments] landlock = \"best_effort\""
                .into(),
        );
    }
    Ok(())
}

/// The system calls refused with `EPERM`: debugging other processes,
/// mounting, new namespaces, the kernel's modules, keyrings, BPF,
/// performance counters, clocks, swap and reboot.
const REFUSED_CALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_fanotify_init,
];

/// The namespace flags `clone` is refused with.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// Installs the seccomp filters: [`REFUSED_CALLS`] and `clone` with a
/// namespace flag answer `EPERM`; `clone3` answers `ENOSYS`, so the C
/// library falls back to `clone`, whose flags the filter can read.
pub(super) fn filter_system_calls() -> Result<(), String> {
    use seccompiler::{
        apply_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
        SeccompFilter, SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp filters are not built for this machine: {e}"))?;
    let fail = |e: seccompiler::BackendError| format!("the seccomp filter could not be built: {e}");
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = REFUSED_CALLS
        .iter()
        .map(|call| (*call, Vec::new()))
        .collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(*flag),
            *flag,
        )
        .map_err(fail)?;
        clone_rules.push(SeccompRule::new(vec![condition]).map_err(fail)?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    let refuse = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(fail)?;
    for filter in [refuse, clone3] {
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e: seccompiler::BackendError| fail(e))?;
        apply_filter(&program)
            .map_err(|e| format!("the seccomp filter could not be installed: {e}"))?;
    }
    Ok(())
}

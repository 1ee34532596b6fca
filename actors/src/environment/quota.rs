//! An environment's workdir quota: bytes and files.
//!
//! The workdir is a folder of the machine's file system, so no file system
//! quota holds it; the environment actor measures it instead — before each
//! command (refused while over) and every 250 ms while one runs (killed
//! when it passes). Bytes alone are not enough: an empty file costs no
//! block but costs the kernel an inode and a name, charged to the
//! environment's memory, so a quota in bytes lets a command make hundreds
//! of thousands of files. Every entry counts as a file here — a file, a
//! folder, a link — and folders' own blocks count as bytes.
//!
//! While over, the only command the environment runs is one the house's
//! owner runs to free space (`troupe env exec --free-space`); it is killed
//! if it makes the workdir grow, in bytes or in files.

use std::path::Path;

use troupe_runtime::environment::EnvironmentSettings;

/// What a workdir holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of the blocks its files and folders take.
    pub bytes: u64,
    /// Its files, folders and links, itself not counted.
    pub files: u64,
}

/// How much a workdir may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Bytes.
    pub bytes: u64,
    /// Files, folders and links.
    pub files: u64,
    /// Whether this is what a command freeing space is held to (what the
    /// workdir held when it started), not the environment's quota.
    pub freeing: bool,
}

const MIB: u64 = 1024 * 1024;

impl Quota {
    /// `[environments] disk_mib` and `disk_files`.
    pub fn of(settings: &EnvironmentSettings) -> Quota {
        Quota {
            bytes: settings.disk_bytes(),
            files: settings.disk_files(),
            freeing: false,
        }
    }

    /// What a command freeing space is held to, given what the workdir
    /// holds now: while the workdir is over this quota, what it holds now,
    /// in bytes *and* in files — it may only shrink the workdir, not grow
    /// it in the measure it is still under (a workdir over in bytes may
    /// not gain files, nor one over in files bytes); within the quota,
    /// the quota itself.
    pub fn at_least(self, now: Usage) -> Quota {
        if self.passed(now).is_none() {
            return self;
        }
        Quota {
            bytes: now.bytes,
            files: now.files,
            freeing: true,
        }
    }

    /// What `used` passes, in words (`None`: within the quota).
    pub fn passed(&self, used: Usage) -> Option<String> {
        let mut over = Vec::new();
        if used.files > self.files {
            over.push(format!(
                "{} files, folders and links (quota {})",
                used.files, self.files
            ));
        }
        if used.bytes > self.bytes {
            over.push(format!(
                "{} MiB (quota {} MiB)",
                used.bytes.div_ceil(MIB),
                self.bytes / MIB
            ));
        }
        (!over.is_empty()).then(|| over.join(" and "))
    }

    /// The killed command's ending, naming what it passed.
    pub fn ending(&self, used: Usage) -> String {
        if self.freeing {
            let grew = if used.files > self.files {
                format!("from {} to {} files", self.files, used.files)
            } else {
                format!(
                    "from {} to {} KiB",
                    self.bytes.div_ceil(1024),
                    used.bytes.div_ceil(1024)
                )
            };
            return format!(
                "[killed: freeing space, the command made the workdir grow ({grew}); while \
                 it is over its quota, a command may only shrink it]"
            );
        }
        let what = if used.files > self.files {
            format!("{} files", self.files)
        } else {
            format!("{} MiB", self.bytes / MIB)
        };
        format!("[killed: the workdir passed its quota of {what}]")
    }
}

/// The refusal of a command while the workdir is over its quota.
pub fn refusal(passed: &str, house: &str, environment: &str, workdir: &Path) -> String {
    format!(
        "environment over its quota: its workdir holds {passed}; nothing was run. Free space \
         with `troupe env exec --free-space {house} {environment} 'rm -rf …'` (the house's \
         owner, on the machine; it may only shrink the workdir), or by deleting files in {} on \
         the machine; then commands run again",
        workdir.display()
    )
}

/// What `dir` holds, symbolic links not followed.
pub fn usage(dir: &Path) -> Usage {
    use std::os::unix::fs::MetadataExt;
    let mut used = Usage::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            used.files += 1;
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            used.bytes += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn files_folders_and_links_count_and_folders_take_blocks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/empty"), "").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("link")).unwrap();
        let used = usage(dir.path());
        assert_eq!(used.files, 4);
        assert!(used.bytes > 0, "{used:?}");
    }

    #[test]
    fn what_is_passed_is_named_and_a_freeing_command_is_held_to_now() {
        let quota = Quota {
            bytes: 16 * MIB,
            files: 1024,
            freeing: false,
        };
        let many = Usage {
            bytes: MIB,
            files: 5000,
        };
        assert_eq!(
            quota.passed(many).as_deref(),
            Some("5000 files, folders and links (quota 1024)")
        );
        assert_eq!(
            quota.ending(many),
            "[killed: the workdir passed its quota of 1024 files]"
        );
        assert_eq!(quota.passed(Usage::default()), None);
        let freeing = quota.at_least(many);
        assert_eq!(freeing.passed(many), None);
        assert!(freeing
            .passed(Usage {
                bytes: MIB,
                files: 5001
            })
            .is_some());
        // Nor may it grow in the measure still under the quota: a workdir
        // over in files may not gain bytes, one over in bytes not files.
        let grown = Usage {
            bytes: MIB + 4096,
            files: 5000,
        };
        assert!(freeing.passed(grown).is_some());
        assert!(freeing.ending(grown).contains("over its quota"));
        let big = Usage {
            bytes: 20 * MIB,
            files: 3,
        };
        let touched = Usage {
            bytes: 20 * MIB,
            files: 4,
        };
        assert!(quota.at_least(big).passed(touched).is_some());
        assert!(quota.at_least(big).passed(big).is_none());
        // Within the quota, a freeing command is held to the quota.
        assert_eq!(quota.at_least(Usage::default()), quota);
    }
}

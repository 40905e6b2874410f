//! Child processes of the sim (moto, the upstream cluster's programs) die with the thread that
//! started them: an orphan would keep its port and any descriptor it inherited.

use std::process::Command;

/// Has `command`'s child sent `signal` when the thread that spawns it ends (Linux
/// `prctl(PR_SET_PDEATHSIG)`; elsewhere nothing). Spawn from a thread that lives as long as the
/// child should (the main thread, a runtime's worker), never from a short-lived blocking thread.
pub fn die_with_parent(command: &mut Command, signal: i32) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches only the child being spawned.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (command, signal);
}

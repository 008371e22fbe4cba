//! A process's CPU time and memory from `/proc`: parsing is pure, reading is one file each.

use std::path::PathBuf;

use anyhow::Context;

/// Clock ticks per second of `/proc/<pid>/stat` times. Linux reports them in USER_HZ, which is
/// 100 on every architecture it exposes to user space (`sysconf(_SC_CLK_TCK)`).
const USER_HZ: f64 = 100.0;

/// User plus system CPU seconds from the text of `/proc/<pid>/stat`.
pub fn cpu_seconds_from_stat(stat: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces or ')': the fields that
    // follow start after the last ')'. utime and stime are fields 14 and 15.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// The machine's CPU time so far from the text of `/proc/stat`: (busy, total) seconds over all
/// cores, where idle and iowait are the time not busy.
pub fn machine_cpu_from_stat(stat: &str) -> Option<(f64, f64)> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: f64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0.0);
    Some(((total - idle) / USER_HZ, total / USER_HZ))
}

/// The machine's (busy, total) CPU seconds so far, from `/proc/stat`.
pub fn machine_cpu() -> anyhow::Result<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    machine_cpu_from_stat(&stat).with_context(|| format!("unexpected /proc/stat: {stat:.200}"))
}

/// A `kB` field (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`, in MiB.
pub fn status_field_mib(status: &str, field: &str) -> Option<f64> {
    let line = status
        .lines()
        .find(|line| line.split(':').next() == Some(field))?;
    let value = line.split(':').nth(1)?.split_whitespace().next()?;
    value.parse::<f64>().ok().map(|kib| kib / 1024.0)
}

/// A process measured through `/proc`.
#[derive(Debug, Clone, Copy)]
pub struct Process {
    pub pid: u32,
}

impl Process {
    fn read(&self, file: &str) -> anyhow::Result<String> {
        let path = PathBuf::from(format!("/proc/{}/{file}", self.pid));
        std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (has process {} exited?)",
                path.display(),
                self.pid
            )
        })
    }

    /// CPU seconds (user + system) used so far.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = self.read("stat")?;
        cpu_seconds_from_stat(&stat)
            .with_context(|| format!("unexpected /proc/{}/stat: {stat:.200}", self.pid))
    }

    /// Resident memory now (`VmRSS`), in MiB.
    pub fn rss_mib(&self) -> anyhow::Result<f64> {
        self.status_mib("VmRSS")
    }

    /// Peak resident memory since start or the last [`Process::reset_peak_rss`] (`VmHWM`), MiB.
    pub fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        self.status_mib("VmHWM")
    }

    fn status_mib(&self, field: &str) -> anyhow::Result<f64> {
        let status = self.read("status")?;
        status_field_mib(&status, field)
            .with_context(|| format!("no {field} in /proc/{}/status", self.pid))
    }

    /// Resets the peak (`VmHWM`) to the current resident size (`clear_refs` value 5); returns
    /// whether the kernel allowed it (it needs the same user or root).
    pub fn reset_peak_rss(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_cpu_counts_idle_and_iowait_as_not_busy() {
        let stat = "cpu  100 5 45 800 50 0 0 0 0 0\ncpu0 50 2 20 400 25 0 0 0 0 0\nintr 1\n";
        assert_eq!(machine_cpu_from_stat(stat), Some((1.5, 10.0)));
        assert_eq!(machine_cpu_from_stat("intr 1\n"), None);
    }

    #[test]
    fn cpu_seconds_are_utime_plus_stime() {
        let cases = [
            (
                "1234 (skyhook-controller) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 8 0 100 0 0",
                Some(3.0),
            ),
            (
                "42 (a (weird) name) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0",
                Some(0.1),
            ),
            ("42 (short) R 1", None),
            ("no parentheses", None),
        ];
        for (stat, expected) in cases {
            assert_eq!(cpu_seconds_from_stat(stat), expected, "{stat}");
        }
    }

    #[test]
    fn status_fields_in_mib() {
        let status =
            "Name:\tskyhook-controller\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t8\n";
        let cases = [
            ("VmRSS", Some(10.0)),
            ("VmHWM", Some(20.0)),
            ("VmSwap", None),
            ("Name", None),
        ];
        for (field, expected) in cases {
            assert_eq!(status_field_mib(status, field), expected, "{field}");
        }
    }
}

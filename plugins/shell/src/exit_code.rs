//! The exit status a shell reports for a finished process, as one byte.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The exit status byte a shell would report for `status`: its code, or 128 plus the signal.
pub fn exit_status_byte(status: ExitStatus) -> u8 {
    let code = status.code().or_else(|| status.signal().map(|signal| 128 + signal)).unwrap_or(1);
    u8::try_from(code).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_map_to_codes_and_signals_to_128_plus_the_signal() {
        assert_eq!(exit_status_byte(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_status_byte(ExitStatus::from_raw(9)), 137);
    }
}

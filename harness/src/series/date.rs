//! RFC 2822 dates as `git format-patch` writes them (`Mon, 22 Dec 2025 10:00:00 +0100`), to and
//! from git's (seconds since the epoch, offset in minutes), by `jiff`.
use jiff::fmt::rfc2822;
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

/// Formats git's time as format-patch does (day of month unpadded).
pub fn format(seconds: i64, offset_minutes: i32) -> String {
    let zoned = Timestamp::from_second(seconds).and_then(|t| {
        Ok(t.to_zoned_datetime(TimeZone::fixed(Offset::from_seconds(offset_minutes * 60)?)))
    });
    zoned.and_then(|z| rfc2822::to_string(&z)).unwrap_or_else(|_| {
        // git never stores a time jiff cannot hold (years -9999..=9999, offsets under 26 h).
        format!("@{seconds} {offset_minutes:+}")
    })
}

/// `YYYYMMDD-HHMMSS` in UTC: sortable, for folder names.
pub fn compact_utc(seconds: i64) -> String {
    let t = Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH);
    t.strftime("%Y%m%d-%H%M%S").to_string()
}

/// Parses `[Day, ]D Mon YYYY HH:MM[:SS] +ZZZZ`; `None` for anything else.
pub fn parse(text: &str) -> Option<(i64, i32)> {
    let zoned = rfc2822::parse(text.trim()).ok()?;
    Some((zoned.timestamp().as_second(), zoned.offset().seconds() / 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_round_trip() {
        // 2025-12-22T09:00:00Z, written at +0100.
        assert_eq!(format(1_766_394_000, 60), "Mon, 22 Dec 2025 10:00:00 +0100");
        assert_eq!(parse("Mon, 22 Dec 2025 10:00:00 +0100"), Some((1_766_394_000, 60)));
        assert_eq!(format(0, -330), "Wed, 31 Dec 1969 18:30:00 -0530");
        assert_eq!(parse("Wed, 31 Dec 1969 18:30:00 -0530"), Some((0, -330)));
        assert_eq!(format(951_782_400, 0), "Tue, 29 Feb 2000 00:00:00 +0000");
        assert_eq!(parse("29 Feb 2000 00:00 +0000"), Some((951_782_400, 0)));
        assert_eq!(format(1_767_225_600, 0), "Thu, 1 Jan 2026 00:00:00 +0000");
        assert_eq!(compact_utc(1_766_394_000), "20251222-090000");
        assert_eq!(parse("yesterday"), None);
    }
}

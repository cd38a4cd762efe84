//! RFC 2822 dates as `git format-patch` writes them (`Mon, 22 Dec 2025 10:00:00 +0100`), to and
//! from git's (seconds since the epoch, offset in minutes).

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Formats git's time as format-patch does (day of month unpadded).
pub fn format(seconds: i64, offset_minutes: i32) -> String {
    let local = seconds + offset_minutes as i64 * 60;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let off = offset_minutes.abs();
    format!(
        "{}, {d} {} {y} {:02}:{:02}:{:02} {sign}{:02}{:02}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[m as usize - 1],
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        off / 60,
        off % 60
    )
}

/// `YYYYMMDD-HHMMSS` in UTC: sortable, for folder names.
pub fn compact_utc(seconds: i64) -> String {
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    let s = seconds.rem_euclid(86_400);
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Parses `[Day, ]D Mon YYYY HH:MM[:SS] +ZZZZ`; `None` for anything else.
pub fn parse(text: &str) -> Option<(i64, i32)> {
    let text = text.trim();
    let text = text.split_once(", ").map_or(text, |(_, rest)| rest);
    let mut parts = text.split_whitespace();
    let d: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let m = MONTHS.iter().position(|&x| x.eq_ignore_ascii_case(month))? as i64 + 1;
    let y: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<i64>());
    let (h, min) = (hms.next()?.ok()?, hms.next()?.ok()?);
    let s = hms.next().map_or(Some(0), |r| r.ok())?;
    let zone = parts.next()?;
    if zone.len() != 5 || parts.next().is_some() {
        return None;
    }
    let zh: i32 = zone[1..3].parse().ok()?;
    let zm: i32 = zone[3..5].parse().ok()?;
    let offset = match &zone[..1] {
        "+" => zh * 60 + zm,
        "-" => -(zh * 60 + zm),
        _ => return None,
    };
    if !(1..=31).contains(&d) || h > 23 || min > 59 || s > 60 {
        return None;
    }
    let local = days_from_civil(y, m, d) * 86_400 + h * 3600 + min * 60 + s;
    Some((local - offset as i64 * 60, offset))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
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
        assert_eq!(parse("yesterday"), None);
    }
}

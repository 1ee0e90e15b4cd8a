//! The one clock: now in epoch milliseconds (the store's unit), and RFC 3339 UTC timestamps
//! from it, without a date crate: the days-to-civil conversion is the classic proleptic
//! Gregorian one.

/// `2026-12-01T08:43:57.123Z` for epoch ms `ms`.
pub fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{millis:03}Z");
    }
    // Digits written by hand: every tool call and event of a run is stamped twice or more
    // (`format!` with padding was ~3,400 instructions a stamp, issue 39).
    let mut out = [0u8; 24];
    let mut put = |at: usize, mut n: i64, width: usize| {
        for k in (at..at + width).rev() {
            out[k] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, y, 4);
    put(5, i64::from(m), 2);
    put(8, i64::from(d), 2);
    put(11, h, 2);
    put(14, min, 2);
    put(17, s, 2);
    put(20, millis, 3);
    for (at, sep) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ] {
        out[at] = sep;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// (year, month, day) of the day `z` days after 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Now, in epoch ms: the store's clock (an event's `createdAt`).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Epoch ms of `2026-12-01` (midnight UTC), `2026-12-01T08:43:57Z`, with optional fraction
/// (`.123`) and a `Z` or `±HH:MM` offset: the times the run API's filters take. `None` for
/// anything else (including impossible dates such as `2026-02-30`).
pub fn parse_time_ms(s: &str) -> Option<i64> {
    let num = |t: &str| -> Option<i64> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let (date, time) = match s.split_once(['T', 't']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d) = (num(y)?, num(m)?, num(d)?);
    let days = days_from_civil(y, m, d)?;
    let mut ms = days * 86_400_000;
    if let Some(t) = time {
        let (clock, offset_min) = if let Some(c) = t.strip_suffix(['Z', 'z']) {
            (c, 0)
        } else {
            let at = t.rfind(['+', '-'])?;
            let (c, off) = t.split_at(at);
            let sign = if off.starts_with('-') { -1 } else { 1 };
            let (oh, om) = off[1..].split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            let (oh, om) = (num(oh)?, num(om)?);
            if oh > 23 || om > 59 {
                return None;
            }
            (c, sign * (oh * 60 + om))
        };
        let (hms, frac) = match clock.split_once('.') {
            Some((hms, f)) => (hms, Some(f)),
            None => (clock, None),
        };
        let mut hms = hms.split(':');
        let (h, mi, sec) = (hms.next()?, hms.next()?, hms.next()?);
        if hms.next().is_some() || h.len() != 2 || mi.len() != 2 || sec.len() != 2 {
            return None;
        }
        let (h, mi, sec) = (num(h)?, num(mi)?, num(sec)?);
        if h > 23 || mi > 59 || sec > 60 {
            return None;
        }
        let millis = match frac {
            Some(f) => {
                num(f)?;
                let digits: String = f.chars().chain("000".chars()).take(3).collect();
                num(&digits)?
            }
            None => 0,
        };
        ms += ((h * 60 + mi) * 60 + sec) * 1000 + millis - offset_min * 60_000;
    }
    Some(ms)
}

/// Days from 1970-01-01 to `y-m-d`, or `None` for a day that does not exist.
fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if d > month_days[(m - 1) as usize] {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @1764578637 -> 2025-12-01T08:43:57Z
        assert_eq!(rfc3339_ms(1_764_578_637_123), "2025-12-01T08:43:57.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        // Past the four-digit years: formatted as before.
        assert_eq!(rfc3339_ms(253_402_300_800_000), "10000-01-01T00:00:00.000Z");
    }

    #[test]
    fn the_digits_written_by_hand_are_those_format_writes() {
        let slow = |ms: i64| {
            let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            let (h, min, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
            format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{millis:03}Z")
        };
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01
        while ms < 253_402_300_800_000 {
            assert_eq!(rfc3339_ms(ms), slow(ms));
            ms += 7_919_999_937;
        }
    }

    #[test]
    fn times_parse_back_and_bad_ones_are_refused() {
        assert_eq!(
            parse_time_ms("2025-12-01T08:43:57.123Z"),
            Some(1_764_578_637_123)
        );
        assert_eq!(
            parse_time_ms("2025-12-01T09:43:57.1+01:00"),
            Some(1_764_578_637_100)
        );
        assert_eq!(parse_time_ms("2000-02-29"), Some(951_782_400_000));
        assert_eq!(parse_time_ms("1970-01-01"), Some(0));
        for bad in [
            "",
            "yesterday",
            "2026-02-30",
            "2026-13-01",
            "2026-1-01",
            "2026-12-01T25:00:00Z",
            "2026-12-01T08:00:00",
            "2026-12-01T08:00Z",
            "1764578637",
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad}");
        }
    }
}

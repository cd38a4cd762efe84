//! A record's id: its track and its number on that track (`#29`, `a3`), and the track table,
//! the one place that says what a track is. A new track is a row of [`TRACKS`], its manifests
//! (`records/<prefix>N.toml` with `track = "<key>"`) and its patches (`patches/<prefix>N.patch`).
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A line of records, each one's parent the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Track {
    /// The world records (`records/NN.toml`): the checkout's trainer is its newest.
    #[default]
    Main,
    /// Tyler Romero's six steps from llm.c's baseline (`records/aN.toml`), branching from #1.
    Act1,
}

/// The lab budget's rule on a track: a record with `official` steps upstream trains `lab` lab
/// steps, and every record from number `from` on is budgeted in proportion (rounded half up).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabAnchor {
    /// The record whose official steps map to `lab` (#29, a1).
    pub record: u32,
    pub official: u64,
    pub lab: u64,
    /// The first number the rule binds (#29: #1 sets its own budget; a1: every step).
    pub from: u32,
}

/// What a track is: how its ids read, where its files live, where it branches and its lab rule.
#[derive(Debug)]
pub struct TrackDef {
    pub track: Track,
    /// `track = "..."` in a manifest (absent: main).
    pub key: &'static str,
    /// Its name in headings.
    pub name: &'static str,
    /// One line that says what it is (`records list`, the site's index).
    pub line: &'static str,
    /// Written before the number when a record is named (`#29`, `a3`).
    pub mark: &'static str,
    /// What one of its records is called on a chart's axis.
    pub unit: &'static str,
    /// Before the number in file stems and folders (`29.toml`, `a3.toml`), and the number's
    /// width there (two digits on main: `01.toml`).
    pub prefix: &'static str,
    pub width: usize,
    /// Its hardware, short, for a column header ("official (8xH100)").
    pub hardware: &'static str,
    /// The record numbers the track may hold, oldest first.
    pub members: &'static [u32],
    /// The record whose trainer its first record changes; `None`: the track is the checkout's
    /// own (its newest record's trainer is `src/` at HEAD, older ones are reverse-applied).
    pub branch: Option<RecordId>,
    pub anchor: LabAnchor,
}

/// Every track, main first.
pub static TRACKS: [TrackDef; 2] = [
    TrackDef {
        track: Track::Main,
        key: "main",
        name: "Main",
        line: "The world records on 8×H100",
        mark: "#",
        unit: "upstream record",
        prefix: "",
        width: 2,
        hardware: "8xH100",
        members: &super::SERIES,
        branch: None,
        anchor: LabAnchor { record: 29, official: 1670, lab: 250, from: 29 },
    },
    TrackDef {
        track: Track::Act1,
        key: "act1",
        name: "Act 1",
        line: "Act 1: Tyler Romero's 2×RTX 4090 steps from the llm.c baseline",
        mark: "a",
        unit: "Act 1 step",
        prefix: "a",
        width: 1,
        hardware: "2xRTX4090",
        members: &[1, 2, 3, 4, 5, 6],
        branch: Some(RecordId { track: Track::Main, n: 1 }),
        anchor: LabAnchor { record: 1, official: 24_576, lab: 250, from: 1 },
    },
];

impl Track {
    pub fn def(self) -> &'static TrackDef {
        TRACKS.iter().find(|d| d.track == self).expect("every track has its row")
    }

    /// Every track, main first.
    pub fn all() -> impl Iterator<Item = Track> {
        TRACKS.iter().map(|d| d.track)
    }

    /// `main`, `act1`: as a manifest's `track =` writes it.
    pub fn key(self) -> &'static str {
        self.def().key
    }

    pub fn is_main(&self) -> bool {
        *self == Track::Main
    }
}

impl fmt::Display for Track {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.key())
    }
}

impl FromStr for Track {
    type Err = String;
    fn from_str(s: &str) -> Result<Track, String> {
        TRACKS.iter().find(|d| d.key.eq_ignore_ascii_case(s.trim())).map(|d| d.track).ok_or_else(
            || {
                let keys: Vec<&str> = TRACKS.iter().map(|d| d.key).collect();
                format!("unknown track {s:?}; the tracks are {}", keys.join(", "))
            },
        )
    }
}

impl Serialize for Track {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.key())
    }
}

impl<'de> Deserialize<'de> for Track {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Track, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A record of the catalog: `#29` on the main track, `a3` on Act 1. Ordered by track (main
/// first), then number. An upstream record inside a main record's step (#30-#84) is a main id
/// too.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordId {
    pub track: Track,
    pub n: u32,
}

impl RecordId {
    pub const fn new(track: Track, n: u32) -> RecordId {
        RecordId { track, n }
    }

    /// Record `n` of the main track.
    pub const fn main(n: u32) -> RecordId {
        RecordId { track: Track::Main, n }
    }

    pub fn is_main(self) -> bool {
        self.track.is_main()
    }

    /// Its name in file stems and folders: `29`, `01` (two digits on main), `a3`.
    pub fn slug(self) -> String {
        let d = self.track.def();
        format!("{}{:0w$}", d.prefix, self.n, w = d.width)
    }

    /// As it is typed on the command line: `29`, `1`, `a3`.
    pub fn bare(self) -> String {
        format!("{}{}", self.track.def().prefix, self.n)
    }

    /// The record before it on its track (`None` for a number the track does not hold), or for a
    /// track's first record its branch point (a1's is #1; main's first has none).
    pub fn expected_parent(self) -> Option<RecordId> {
        let d = self.track.def();
        let i = d.members.iter().position(|&n| n == self.n)?;
        match i.checked_sub(1) {
            Some(p) => Some(RecordId::new(self.track, d.members[p])),
            None => d.branch,
        }
    }

    /// The `[lab] steps` its track's lab rule gives it with `steps` official steps (rounded half
    /// up); `None` before the anchor (main's #1 sets its own).
    pub fn lab_steps_rule(self, steps: u64) -> Option<u64> {
        let a = self.track.def().anchor;
        (self.n >= a.from).then(|| (a.lab * steps + a.official / 2) / a.official)
    }

    /// The record its track's lab rule is anchored at (#29, a1).
    pub fn anchor(self) -> RecordId {
        RecordId::new(self.track, self.track.def().anchor.record)
    }
}

impl From<u32> for RecordId {
    /// A bare number is a main record (`29`).
    fn from(n: u32) -> RecordId {
        RecordId::main(n)
    }
}

impl PartialEq<u32> for RecordId {
    /// A bare number is a main record.
    fn eq(&self, n: &u32) -> bool {
        self.is_main() && self.n == *n
    }
}

impl fmt::Display for RecordId {
    /// `#29`, `a3` (padded as a string: `{:<4}` gives `#1  `).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{}{}", self.track.def().mark, self.n))
    }
}

impl fmt::Debug for RecordId {
    /// As typed: `29`, `a3` (as a bare number printed before there were tracks).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.bare())
    }
}

impl FromStr for RecordId {
    type Err = String;

    /// `29`, `#29`, `01`, `a3`, `A3`.
    fn from_str(s: &str) -> Result<RecordId, String> {
        let t = s.trim();
        let bad = || {
            let tracks: Vec<String> = TRACKS
                .iter()
                .filter(|d| !d.prefix.is_empty())
                .map(|d| format!("{}3 for {}", d.prefix, d.name))
                .collect();
            format!(
                "`{s}` is not a record: give a main record's number (29 or #29) or a track's \
                 record ({})",
                tracks.join(", ")
            )
        };
        let digits = |d: &str| -> Option<u32> {
            (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())).then(|| d.parse().ok())?
        };
        if let Some(n) = digits(t.strip_prefix('#').unwrap_or(t)) {
            return Ok(RecordId::main(n));
        }
        let split = t.find(|c: char| c.is_ascii_digit()).ok_or_else(bad)?;
        let (prefix, number) = t.split_at(split);
        let def = TRACKS
            .iter()
            .find(|d| !d.prefix.is_empty() && d.prefix.eq_ignore_ascii_case(prefix))
            .ok_or_else(bad)?;
        Ok(RecordId::new(def.track, digits(number).ok_or_else(bad)?))
    }
}

impl Serialize for RecordId {
    /// A main record as its number (as files wrote it before there were tracks), another
    /// track's as its slug (`"a3"`).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.track {
            Track::Main => s.serialize_u32(self.n),
            _ => s.serialize_str(&self.slug()),
        }
    }
}

impl<'de> Deserialize<'de> for RecordId {
    /// An integer (a main record: `parent = 29`) or a string (`parent = "a2"`, `"#1"`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RecordId, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RecordId;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a record: a main record's number (29) or a string (\"a2\", \"#1\")")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RecordId, E> {
                u32::try_from(v).map(RecordId::main).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RecordId, E> {
                u32::try_from(v).map(RecordId::main).map_err(E::custom)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RecordId, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_print_and_order() {
        let a3 = RecordId::new(Track::Act1, 3);
        for (s, id) in [("29", RecordId::main(29)), ("#29", 29.into()), ("01", 1.into())] {
            assert_eq!(s.parse::<RecordId>(), Ok(id), "{s}");
        }
        assert_eq!("a3".parse::<RecordId>(), Ok(a3));
        assert_eq!("A3".parse::<RecordId>(), Ok(a3));
        assert_eq!(" a3 ".parse::<RecordId>(), Ok(a3));
        for bad in ["", "#", "x3", "a", "a-1", "3a", "#a3", "29.5", "aa3", "a3x"] {
            let e = bad.parse::<RecordId>().unwrap_err();
            assert!(e.contains(&format!("`{bad}` is not a record")) && e.contains("a3"), "{e}");
        }
        assert_eq!(a3.to_string(), "a3");
        assert_eq!(RecordId::main(29).to_string(), "#29");
        assert_eq!(format!("{:<4}|", RecordId::main(1)), "#1  |");
        assert_eq!(format!("{:?}", Some(RecordId::main(29))), "Some(29)");
        assert_eq!(format!("{a3:?}"), "a3");
        assert_eq!(
            (RecordId::main(1).slug(), RecordId::main(84).slug(), a3.slug()),
            ("01".to_string(), "84".to_string(), "a3".to_string())
        );
        assert_eq!((RecordId::main(1).bare(), a3.bare()), ("1".to_string(), "a3".to_string()));
        // Main first, then Act 1, each by number.
        let mut ids = vec![a3, RecordId::main(84), RecordId::new(Track::Act1, 1), 1.into()];
        ids.sort();
        assert_eq!(ids, [RecordId::main(1), RecordId::main(84), RecordId::new(Track::Act1, 1), a3]);
        assert!(RecordId::main(29) == 29 && a3 != 3);
    }

    #[test]
    fn ids_serialize_as_before_on_main() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct P {
            parent: RecordId,
        }
        let main = P { parent: 29.into() };
        assert_eq!(toml::to_string(&main).unwrap(), "parent = 29\n");
        assert_eq!(serde_json::to_string(&main).unwrap(), "{\"parent\":29}");
        let act = P { parent: RecordId::new(Track::Act1, 2) };
        assert_eq!(toml::to_string(&act).unwrap(), "parent = \"a2\"\n");
        for (text, want) in [
            ("parent = 29", 29.into()),
            ("parent = \"#1\"", 1.into()),
            ("parent = \"a2\"", RecordId::new(Track::Act1, 2)),
        ] {
            assert_eq!(toml::from_str::<P>(text).unwrap().parent, want, "{text}");
        }
        assert!(toml::from_str::<P>("parent = \"b2\"").is_err());
        assert!(toml::from_str::<P>("parent = -1").is_err());
    }

    #[test]
    fn each_track_has_its_parents_and_lab_rule() {
        let a = |n| RecordId::new(Track::Act1, n);
        assert_eq!(a(1).expected_parent(), Some(RecordId::main(1)));
        assert_eq!(a(4).expected_parent(), Some(a(3)));
        assert_eq!(a(7).expected_parent(), None);
        assert_eq!(RecordId::main(29).expected_parent(), Some(RecordId::main(1)));
        assert_eq!(RecordId::main(1).expected_parent(), None);
        assert_eq!(a(1).lab_steps_rule(24_576), Some(250));
        assert_eq!(a(2).lab_steps_rule(12_288), Some(125));
        assert_eq!(a(3).lab_steps_rule(49), Some(0)); // 0.498 rounds down
        assert_eq!(a(3).lab_steps_rule(50), Some(1)); // 0.509 rounds up
        assert_eq!(RecordId::main(1).lab_steps_rule(19_560), None);
        assert_eq!(RecordId::main(38).lab_steps_rule(1670), Some(250));
        assert_eq!((a(5).anchor(), RecordId::main(84).anchor()), (a(1), RecordId::main(29)));
        assert_eq!("act1".parse::<Track>(), Ok(Track::Act1));
        assert!("act2".parse::<Track>().unwrap_err().contains("main, act1"));
    }
}

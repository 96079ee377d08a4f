//! What a crash test knows about its writes: the content each write carries (self-checking,
//! so a partial object is recognised), and per object the last acknowledged state and the
//! one write in flight. After a restart each object must show the acknowledged state or the
//! in-flight write, whole.
//!
//! Shared by `steady soak kill` and the SIGKILL test (crates/cli/tests/durability.rs, which
//! includes this file by path), so it depends on std only.

use std::collections::BTreeMap;

/// A ConfigMap's `data`.
pub type Data = BTreeMap<String, String>;

/// What is known about one object.
#[derive(Debug, Default)]
pub struct Record {
    /// The last acknowledged state: resourceVersion and data.
    pub acked: Option<(u64, Data)>,
    /// A write sent but not acknowledged (at most one: each writer waits for its answer).
    pub in_flight: Option<Data>,
}

/// How an object found after a restart relates to its record.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Stored as acknowledged; `in_flight_lost` if a write in flight did not land.
    AsAcknowledged { in_flight_lost: bool },
    /// The write in flight at the crash landed, whole (after the acknowledged state).
    InFlightLanded,
    /// An unacknowledged create did not land: allowed.
    InFlightLost,
    /// The in-flight write landed with a revision not above the acknowledged one.
    RevisionWentBack,
    /// Neither the acknowledged state nor the write in flight: an acknowledged write is lost
    /// (or something nobody wrote is stored).
    Lost,
}

/// Compare what is stored for one object with what its record allows.
pub fn classify(record: &Record, found: Option<&(u64, Data)>) -> Outcome {
    match (&record.acked, &record.in_flight, found) {
        (Some(acked), pending, Some(found)) if acked == found => Outcome::AsAcknowledged {
            in_flight_lost: pending.is_some(),
        },
        (Some((acked_rv, _)), Some(pending), Some((rv, data))) if data == pending => {
            if rv > acked_rv {
                Outcome::InFlightLanded
            } else {
                Outcome::RevisionWentBack
            }
        }
        (None, Some(pending), Some((_, data))) if data == pending => Outcome::InFlightLanded,
        (None, Some(_), None) => Outcome::InFlightLost,
        _ => Outcome::Lost,
    }
}

pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub fn checksum(name: &str, version: &str, payload: &str) -> String {
    format!(
        "{:016x}",
        fnv64(format!("{name}\n{version}\n{payload}").as_bytes())
    )
}

/// The content of version `version` of object `name`: 2–6 KiB of pseudo-random text.
pub fn content(name: &str, version: u32) -> Data {
    let mut state = fnv64(format!("{name}/{version}").as_bytes()) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let len = 2048 + (next() % 4096) as usize;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    let payload: String = (0..len)
        .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
        .collect();
    let version = version.to_string();
    BTreeMap::from([
        ("checksum".to_string(), checksum(name, &version, &payload)),
        ("version".to_string(), version),
        ("payload".to_string(), payload),
    ])
}

/// Whether a stored ConfigMap is whole: all fields there and the checksum right.
pub fn is_complete(name: &str, data: &Data) -> bool {
    match (
        data.get("version"),
        data.get("payload"),
        data.get("checksum"),
    ) {
        (Some(v), Some(p), Some(c)) => data.len() == 3 && *c == checksum(name, v, p),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(acked: Option<(u64, u32)>, in_flight: Option<u32>) -> Record {
        Record {
            acked: acked.map(|(rv, v)| (rv, content("o", v))),
            in_flight: in_flight.map(|v| content("o", v)),
        }
    }

    #[test]
    fn an_acknowledged_write_must_be_found_or_overtaken_by_the_write_in_flight() {
        let found = |rv: u64, v: u32| Some((rv, content("o", v)));
        let acked = record(Some((5, 1)), None);
        assert_eq!(
            classify(&acked, found(5, 1).as_ref()),
            Outcome::AsAcknowledged {
                in_flight_lost: false
            }
        );
        assert_eq!(classify(&acked, None), Outcome::Lost);
        assert_eq!(
            classify(&acked, found(5, 0).as_ref()),
            Outcome::Lost,
            "an older version"
        );
        let pending = record(Some((5, 1)), Some(2));
        assert_eq!(
            classify(&pending, found(5, 1).as_ref()),
            Outcome::AsAcknowledged {
                in_flight_lost: true
            }
        );
        assert_eq!(
            classify(&pending, found(6, 2).as_ref()),
            Outcome::InFlightLanded
        );
        assert_eq!(
            classify(&pending, found(4, 2).as_ref()),
            Outcome::RevisionWentBack
        );
        let create = record(None, Some(0));
        assert_eq!(classify(&create, None), Outcome::InFlightLost);
        assert_eq!(
            classify(&create, found(3, 0).as_ref()),
            Outcome::InFlightLanded
        );
    }

    #[test]
    fn content_checks_itself() {
        let mut data = content("o", 3);
        assert!(is_complete("o", &data));
        assert!(!is_complete("p", &data), "another object's content");
        data.insert("payload".into(), "cut".into());
        assert!(!is_complete("o", &data));
    }
}

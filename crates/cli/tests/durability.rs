//! Crash durability of `steady server`: SIGKILL the process in the middle of a stream of
//! acknowledged writes, restart it on the same data directory, and find every acknowledged
//! write and no partial one.
//!
//! Eight writer tasks create ConfigMaps (a few KiB each, with a checksum of their content)
//! and update some of them, recording what the server acknowledged. The only writes whose
//! outcome is open are the ones in flight when the process died: each object has at most
//! one, and after the restart it shows either the acknowledged state or that write, whole.
//!
//! The last round stops the writers and lets every answer arrive before the SIGKILL, so
//! that a server which makes a write durable only when the next one comes is caught too.

mod common;
// The writes' content, the per-object record and its check are shared with `steady soak kill`.
#[allow(dead_code)]
#[path = "../src/soak/ledger.rs"]
mod ledger;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, assert_rv_above, object_rv, rv_number};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use ledger::{Data, Outcome, Record, content, is_complete};
use serde_json::json;

const WRITERS: usize = 8;
/// Acknowledged writes per round before the process is killed (more in later rounds, so
/// that the kill lands at different points).
const ACKS_BEFORE_KILL: usize = 300;
const ROUNDS: usize = 6;
const LABEL: &str = "steady-test=durability";
const TIMEOUT: Duration = Duration::from_secs(120);

type Records = Arc<Mutex<HashMap<String, Record>>>;

fn configmap(name: &str, data: Data, resource_version: Option<u64>) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"steady-test": "durability"},
            "resourceVersion": resource_version.map(|rv| rv.to_string()),
        },
        "data": data,
    }))
    .unwrap()
}

struct Shared {
    records: Records,
    /// Set (under the records lock) just before the SIGKILL: errors after it are expected.
    killed: AtomicBool,
    /// Set to make the writers stop before their next write.
    stop: AtomicBool,
    acks: tokio::sync::watch::Sender<usize>,
    /// The resourceVersion of every acknowledged write, in the order recorded.
    acked_rvs: Mutex<Vec<u64>>,
}

/// One writer: creates its own objects and updates them (with the acknowledged
/// resourceVersion as precondition) until a request fails after the kill.
async fn writer(api: Api<ConfigMap>, prefix: String, shared: Arc<Shared>) {
    let pp = PostParams::default();
    // This writer's objects: name, acknowledged resourceVersion and version number.
    let mut mine: Vec<(String, u64, u32)> = Vec::new();
    let mut seq = 0usize;
    while !shared.stop.load(Ordering::SeqCst) {
        seq += 1;
        let update = seq.is_multiple_of(3) && !mine.is_empty();
        let (name, data, index) = if update {
            let index = (seq * 7919) % mine.len();
            let (name, _, version) = &mine[index];
            (name.clone(), content(name, version + 1), Some(index))
        } else {
            let name = format!("{prefix}-{seq}");
            (name.clone(), content(&name, 0), None)
        };
        shared
            .records
            .lock()
            .unwrap()
            .entry(name.clone())
            .or_default()
            .in_flight = Some(data.clone());
        let result = match index {
            Some(i) => {
                let cm = configmap(&name, data.clone(), Some(mine[i].1));
                api.replace(&name, &pp, &cm).await
            }
            None => api.create(&pp, &configmap(&name, data.clone(), None)).await,
        };
        let stored = match result {
            Ok(stored) => stored,
            // The server is gone: this write stays in flight.
            Err(_) if shared.killed.load(Ordering::SeqCst) => return,
            Err(e) => panic!("{name}: write failed before the kill: {e:?}"),
        };
        let rv = object_rv(&stored);
        assert_eq!(
            stored.data.as_ref(),
            Some(&data),
            "{name}: the answer carries the data written"
        );
        {
            let mut records = shared.records.lock().unwrap();
            let record = records.get_mut(&name).unwrap();
            record.in_flight = None;
            record.acked = Some((rv, data));
        }
        match index {
            Some(i) => {
                mine[i].1 = rv;
                mine[i].2 += 1;
            }
            None => mine.push((name, rv, 0)),
        }
        shared.acked_rvs.lock().unwrap().push(rv);
        shared.acks.send_modify(|n| *n += 1);
    }
}

/// Check the restarted server against the records, then settle the records to what is
/// stored (the in-flight writes are decided now). Returns the largest revision seen.
async fn verify(client: &kube::Client, records: &Records, round: usize) -> u64 {
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let list = api
        .list(&ListParams::default().labels(LABEL))
        .await
        .unwrap();
    let list_rv = rv_number(list.metadata.resource_version.as_ref());
    let stored: HashMap<String, (u64, Data)> = list
        .items
        .into_iter()
        .map(|cm| {
            let rv = object_rv(&cm);
            (cm.metadata.name.unwrap(), (rv, cm.data.unwrap_or_default()))
        })
        .collect();

    let mut records = records.lock().unwrap();
    let mut max_rv = list_rv;
    let (mut lost_in_flight, mut landed_in_flight) = (0, 0);
    // No partial object, and nothing the writers did not write.
    for (name, (rv, data)) in &stored {
        assert!(
            is_complete(name, data),
            "round {round}: {name} at RV {rv} is partial or corrupt: {:?}",
            data.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>()
        );
        assert!(
            records.contains_key(name),
            "round {round}: {name} was never written"
        );
        assert!(
            *rv <= list_rv,
            "{name}: RV {rv} above the list RV {list_rv}"
        );
        max_rv = max_rv.max(*rv);
    }
    // Every acknowledged write is there, as acknowledged or overtaken by the one write
    // that was in flight; an unacknowledged create is there whole or not at all.
    for (name, record) in records.iter() {
        let found = stored.get(name);
        match ledger::classify(record, found) {
            Outcome::AsAcknowledged { in_flight_lost } => {
                if in_flight_lost {
                    lost_in_flight += 1;
                }
            }
            Outcome::InFlightLanded => landed_in_flight += 1,
            Outcome::InFlightLost => lost_in_flight += 1,
            Outcome::RevisionWentBack => panic!("round {round}: {name}: RV went back"),
            Outcome::Lost => panic!(
                "round {round}: {name}: acknowledged {:?}, in flight {:?}, stored {:?}",
                record.acked.as_ref().map(|(rv, d)| (rv, &d["version"])),
                record.in_flight.as_ref().map(|d| &d["version"]),
                found.map(|(rv, d)| (rv, d.get("version"))),
            ),
        }
    }
    for (acked_rv, _) in records.values().filter_map(|r| r.acked.as_ref()) {
        assert!(
            *acked_rv <= list_rv,
            "round {round}: acknowledged RV {acked_rv} above the list RV {list_rv}"
        );
    }
    eprintln!(
        "round {round}: {} objects stored, {} acknowledged; in-flight writes: {landed_in_flight} landed, {lost_in_flight} lost",
        stored.len(),
        records.values().filter(|r| r.acked.is_some()).count(),
    );

    // Settle: what is stored is now the acknowledged state.
    records.retain(|name, _| stored.contains_key(name));
    for (name, record) in records.iter_mut() {
        record.acked = Some(stored[name].clone());
        record.in_flight = None;
    }
    max_rv
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_during_acknowledged_writes_loses_nothing_acknowledged() {
    let started = Instant::now();
    let (_dir, data_dir, kubeconfig) = common::workdir();
    let records: Records = Arc::default();
    let mut all_acked_rvs: Vec<u64> = Vec::new();
    let mut max_rv_before = 0u64;
    let mut server = Server::start(&data_dir, &kubeconfig).await;

    for round in 0..ROUNDS {
        let mut config = server.config().await;
        // One attempt per write: a retried create would blur what was acknowledged.
        config.default_retry = false;
        let client = kube::Client::try_from(config).unwrap();
        let (acks, mut acks_rx) = tokio::sync::watch::channel(0usize);
        let shared = Arc::new(Shared {
            records: records.clone(),
            killed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            acks,
            acked_rvs: Mutex::default(),
        });
        let mut writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                tokio::spawn(writer(
                    Api::default_namespaced(client.clone()),
                    format!("r{round}-w{w}"),
                    shared.clone(),
                ))
            })
            .collect();

        let threshold = ACKS_BEFORE_KILL + round * 77;
        tokio::time::timeout(TIMEOUT, acks_rx.wait_for(|n| *n >= threshold))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "round {round}: fewer than {threshold} acknowledgements in {TIMEOUT:?}\n{}",
                    server.output()
                )
            })
            .unwrap();
        let quiesced = round == ROUNDS - 1;
        if quiesced {
            // Let every write in flight be answered, then kill an idle server.
            shared.stop.store(true, Ordering::SeqCst);
            for w in writers.iter_mut() {
                tokio::time::timeout(TIMEOUT, w)
                    .await
                    .expect("a writer did not stop")
                    .expect("writer failed");
            }
            writers.clear();
        }
        // Kill with the records locked: every write in flight now was sent before the kill
        // or will fail, and no acknowledgement can be recorded meanwhile.
        let in_flight_at_kill = {
            let records = records.lock().unwrap();
            shared.killed.store(true, Ordering::SeqCst);
            let in_flight = records.values().filter(|r| r.in_flight.is_some()).count();
            server.send_sigkill();
            in_flight
        };
        let exit = server.wait_exit().await;
        assert!(!exit.success(), "SIGKILL: {exit:?}");
        for w in writers {
            tokio::time::timeout(TIMEOUT, w)
                .await
                .expect("a writer did not stop after the kill")
                .expect("writer failed");
        }
        let acked_this_round = *acks_rx.borrow();
        if quiesced {
            assert_eq!(in_flight_at_kill, 0, "round {round}: writes left in flight");
        } else {
            assert!(
                in_flight_at_kill > 0,
                "round {round}: no write was in flight at the kill"
            );
        }
        eprintln!(
            "round {round}: {acked_this_round} writes acknowledged, {in_flight_at_kill} in flight at SIGKILL"
        );
        // Every write acknowledged in this round comes after everything stored before it.
        let round_rvs = std::mem::take(&mut *shared.acked_rvs.lock().unwrap());
        assert_eq!(round_rvs.len(), acked_this_round);
        if let Some(min) = round_rvs.iter().min() {
            assert!(
                *min > max_rv_before,
                "round {round}: a write acknowledged at RV {min}, not above {max_rv_before} stored before the restart"
            );
        }
        all_acked_rvs.extend(round_rvs);

        // Restart on the same directory and check.
        server = Server::start(&data_dir, &kubeconfig).await;
        let client = server.client().await;
        let max_rv = verify(&client, &records, round).await;
        assert!(max_rv >= max_rv_before);
        max_rv_before = max_rv;
    }

    // Acknowledged revisions are all distinct.
    let distinct: HashSet<u64> = all_acked_rvs.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all_acked_rvs.len(),
        "two acknowledged writes share a revision"
    );

    // Revisions go on increasing after the last restart.
    let api: Api<ConfigMap> = Api::default_namespaced(server.client().await);
    let created = api
        .create(
            &PostParams::default(),
            &configmap("after-crash", content("after-crash", 0), None),
        )
        .await
        .unwrap();
    assert_rv_above(&created, max_rv_before, "the first write after the restart");
    let exit = server.terminate().await;
    assert!(exit.success(), "{exit:?}\n{}", server.output());
    eprintln!("took {:?}", started.elapsed());
}

//! Whether the host a server shares with the client was busy with other work. A server cause
//! said strongly rests on a server that had its cores. Where the server runs on the client's
//! host (the embedded server, a loopback target) and that host's cores went to other work —
//! beyond the client's own CPU and, when its scrapes measured it, the server's — the server
//! may have been kept off its cores: it fell behind or queued because something else ran, not
//! because of what it is. The cause is then said weakly, and the evidence names the host. The
//! threshold is `contract/verdict.json`'s `busy_host_other_share`, held by its `host_vectors`.

use super::rule::T;
use crate::sysmon::ClientSummary;

/// The host's cores that went to other work during the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyHost {
    /// The host's busy cores beyond this process's (the client's, an embedded server's) and,
    /// when its scrapes measured it, the server's own CPU.
    pub other_cores: f64,
    pub host_cores: usize,
    /// The server's own CPU was measured (its scrapes' `process_cpu_seconds_total`) and is not in
    /// `other_cores`.
    pub server_counted: bool,
}

/// The contract's rule: other work on at least `busy_host_other_share` of the host's cores.
pub fn is_busy(other_cores: f64, host_cores: usize) -> bool {
    host_cores > 0 && other_cores >= T.busy_host_other_share * host_cores as f64
}

/// The busy host a run's server shared with the client; `None` where the server is elsewhere,
/// the host was not sampled, or its cores had room.
pub fn busy_host(client: &ClientSummary, server_cpu_cores: Option<f64>) -> Option<BusyHost> {
    if !client.server_shares_cores {
        return None;
    }
    let (host_cores, beyond) = (client.host_cores?, client.host_other_cores?);
    let other_cores = beyond - server_cpu_cores.unwrap_or(0.0);
    is_busy(other_cores, host_cores).then_some(BusyHost {
        other_cores,
        host_cores,
        server_counted: server_cpu_cores.is_some(),
    })
}

/// A host whose cores the server and this client took from each other: the server shares the
/// client's host, the host's cores were busy (`cpu_saturated_share` of them, every process's),
/// and the client's own CPU was a good share of them (`shared_host_client_share`). The
/// server's queue then says what the cores left it, not what it is: the host's cores were the
/// limit (issue 59: the embedded demo said "server (strong)" with the client on one of the
/// two cores).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedHost {
    pub busy_cores: f64,
    pub client_cores: f64,
    pub host_cores: usize,
}

/// The contract's rule, as its `shared_host_vectors` hold it.
pub fn is_shared(busy_cores: f64, client_cores: f64, host_cores: usize) -> bool {
    let cores = host_cores as f64;
    host_cores > 0
        && busy_cores >= T.cpu_saturated_share * cores - 1e-9
        && client_cores >= T.shared_host_client_share * cores - 1e-9
}

/// The shared host of a run whose server ran on the client's cores; `None` where it did not,
/// the host was not sampled, or the cores had room or went mostly to the server.
pub fn shared_host(client: &ClientSummary) -> Option<SharedHost> {
    if !client.server_shares_cores {
        return None;
    }
    let (host_cores, busy_cores) = (client.host_cores?, client.host_busy_cores?);
    let client_cores = client.mean_cpu_utilisation * client.cpu_limit_cores;
    is_shared(busy_cores, client_cores, host_cores).then_some(SharedHost {
        busy_cores,
        client_cores,
        host_cores,
    })
}

impl SharedHost {
    /// "the server and this client shared this host's 2 cores and kept 1.9 of them busy …".
    pub fn sentence(&self) -> String {
        format!(
            "the server and this client shared this host's {} cores and kept {:.1} of them \
             busy, the client {:.1} of them: the host's cores were the limit, not the server \
             alone — run the server on another host to measure its own",
            self.host_cores, self.busy_cores, self.client_cores
        )
    }
}

impl BusyHost {
    /// "other work kept 1.6 of this host's 2 cores busy beside the client …".
    pub fn sentence(&self) -> String {
        let beside = match self.server_counted {
            true => "beside loadgen and the server's own CPU",
            false => "beside loadgen (the server's own CPU among it, not measured)",
        };
        format!(
            "other work kept {:.1} of this host's {} cores busy {beside}: the server, which \
             shares this host, may have been kept off its cores — run it on a quiet host{}",
            self.other_cores,
            self.host_cores,
            match self.server_counted {
                true => "",
                false => {
                    ", or scrape an endpoint with its process_cpu_seconds_total \
                     (--server-metrics) to see its own CPU"
                }
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysmon::summary::tests::summary;

    /// contract/verdict.json's `shared_host_vectors`: the host's busy cores and the client's.
    #[test]
    fn a_shared_host_is_told_as_the_contracts_vectors_say() {
        let contract: serde_json::Value =
            serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap();
        let vectors = contract["shared_host_vectors"].as_array().unwrap();
        assert!(vectors.len() >= 4);
        for v in vectors {
            let mut client = summary();
            client.server_shares_cores = true;
            client.host_cores = v["host_cores"].as_u64().map(|c| c as usize);
            client.host_busy_cores = v["host_busy_cores"].as_f64();
            client.cpu_limit_cores = 2.0;
            client.mean_cpu_utilisation = v["client_cores"].as_f64().unwrap() / 2.0;
            let shared = shared_host(&client);
            assert_eq!(shared.is_some(), v["shared"].as_bool().unwrap(), "{v}");
            client.server_shares_cores = false;
            assert_eq!(shared_host(&client), None, "{v}: the server was elsewhere");
        }
    }

    /// contract/verdict.json's `host_vectors`: other work's cores against the host's.
    #[test]
    fn a_busy_host_is_told_as_the_contracts_vectors_say() {
        let contract: serde_json::Value =
            serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap();
        let vectors = contract["host_vectors"].as_array().unwrap();
        assert!(vectors.len() >= 4);
        for v in vectors {
            let mut client = summary();
            client.server_shares_cores = true;
            client.host_cores = Some(v["host_cores"].as_u64().unwrap() as usize);
            client.host_other_cores = v["host_other_cores"].as_f64();
            let busy = busy_host(&client, v["server_cpu_cores"].as_f64());
            assert_eq!(busy.is_some(), v["busy"].as_bool().unwrap(), "{v}");
        }
    }

    /// A server elsewhere, or a host not sampled: nothing to say about this host.
    #[test]
    fn only_a_sampled_host_the_server_shares_is_judged() {
        let mut client = summary();
        client.host_cores = Some(2);
        client.host_other_cores = Some(1.8);
        assert_eq!(busy_host(&client, None), None);
        client.server_shares_cores = true;
        let busy = busy_host(&client, None).unwrap();
        assert!((busy.other_cores - 1.8).abs() < 1e-9);
        assert!(busy.sentence().contains("--server-metrics"));
        client.host_other_cores = None;
        assert_eq!(busy_host(&client, None), None);
    }
}

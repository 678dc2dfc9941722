//! The record path: rows per second from workers' batches through the writer thread into
//! Parquet segments (encoding, compression, exact aggregates), and bytes per row on disk.
//! `cargo bench -p loadgen --bench record`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use loadgen::record::{ErrorClass, Labels, RequestRecord};
use loadgen::stats::Aggregator;
use loadgen::store::writer::{self, WriterConfig};

const ROWS: usize = 200_000;
/// Rows per batch, as workers hand them over.
const BATCH: usize = 256;

/// Rows shaped like a closed-model run: 50 workers, ~0.5 ms latency, a few errors.
fn rows() -> Vec<RequestRecord> {
    let mut rng = fastrand::Rng::with_seed(1);
    (0..ROWS)
        .map(|i| {
            let latency_ns = 400_000 + rng.i64(0..200_000);
            let failed = i % 500 == 0;
            RequestRecord {
                start_ns: i as i64 * 10_000 + rng.i64(0..5_000),
                intended_ns: None,
                latency_ns,
                connect_ns: (i < 50).then_some(80_000),
                send_ns: Some(15_000 + rng.i64(0..5_000)),
                ttfb_ns: Some(latency_ns - 20_000),
                queue_wait_ns: None,
                buffer_wait_ns: None,
                op: 0,
                status: if failed { 500 } else { 200 },
                error: failed.then_some(ErrorClass::HttpStatus),
                bytes_sent: 79,
                bytes_received: 136,
                worker: (i % 50) as u32,
                phase: 0,
                attempt: 1,
                check: None,
                trace_id: None,
                grpc_status: None,
                grpc_message: None,
                retry_after_s: None,
            }
        })
        .collect()
}

fn record_path(c: &mut Criterion) {
    let rows = rows();
    let batches: Vec<Vec<RequestRecord>> = rows.chunks(BATCH).map(<[_]>::to_vec).collect();
    let mut group = c.benchmark_group("record");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    let mut bytes_per_row = 0.0;
    group.bench_function("200k rows to parquet", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().unwrap();
            let (tx, thread) = writer::spawn(WriterConfig {
                dir: dir.path().to_path_buf(),
                metadata: vec![("loadgen.schema_version".into(), "3".into())],
                labels: Labels {
                    ops: vec!["GET /".into()],
                    phases: vec!["main".into()],
                    checks: Vec::new(),
                },
                segment_interval: Duration::from_secs(3600),
                stats: Aggregator::new(1, 1, 0, 1, i64::MAX),
                closed: None,
                publish: None,
                samples: None,
            })
            .unwrap();
            for batch in &batches {
                tx.send(batch.clone()).unwrap();
            }
            drop(tx);
            let report = thread.finish().unwrap();
            assert_eq!(report.rows, ROWS as u64);
            bytes_per_row = report.bytes_on_disk as f64 / ROWS as f64;
        })
    });
    group.finish();
    println!("record: {bytes_per_row:.2} bytes per row on disk");
}

criterion_group!(benches, record_path);
criterion_main!(benches);

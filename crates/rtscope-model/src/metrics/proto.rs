//! The protobuf exposition (`io.prometheus.client.MetricFamily`, each
//! message preceded by its length as a varint), which Prometheus asks for
//! when its native histograms are on. Written by hand: a few message types
//! of prometheus/client_model's `metrics.proto`, their field numbers below.
//! A histogram carries its classic buckets and its native buckets
//! ([`super::NATIVE_SCHEMA`]) side by side.

use super::{Family, HistValue, Kind, NATIVE_SCHEMA, NATIVE_ZERO_THRESHOLD, Sample, Value};

// MetricFamily
const FAMILY_NAME: u32 = 1;
const FAMILY_HELP: u32 = 2;
const FAMILY_TYPE: u32 = 3;
const FAMILY_METRIC: u32 = 4;
// MetricType
const COUNTER: u64 = 0;
const GAUGE: u64 = 1;
const HISTOGRAM: u64 = 4;
// Metric
const METRIC_LABEL: u32 = 1;
const METRIC_GAUGE: u32 = 2;
const METRIC_COUNTER: u32 = 3;
const METRIC_HISTOGRAM: u32 = 7;
// LabelPair, and Gauge's and Counter's value
const LABEL_NAME: u32 = 1;
const LABEL_VALUE: u32 = 2;
const VALUE: u32 = 1;
// Histogram
const SAMPLE_COUNT: u32 = 1;
const SAMPLE_SUM: u32 = 2;
const BUCKET: u32 = 3;
const SCHEMA: u32 = 5;
const ZERO_THRESHOLD: u32 = 6;
const ZERO_COUNT: u32 = 7;
const NEGATIVE_SPAN: u32 = 9;
const NEGATIVE_DELTA: u32 = 10;
const POSITIVE_SPAN: u32 = 12;
const POSITIVE_DELTA: u32 = 13;
// Bucket
const CUMULATIVE_COUNT: u32 = 1;
const UPPER_BOUND: u32 = 2;
// BucketSpan
const SPAN_OFFSET: u32 = 1;
const SPAN_LENGTH: u32 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

fn sint(out: &mut Vec<u8>, field: u32, v: i64) {
    key(out, field, 0);
    varint(out, zigzag(v));
}

fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A sub-message, built by `f`.
fn message(out: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut m = Vec::new();
    f(&mut m);
    bytes(out, field, &m);
}

/// Native buckets as spans of consecutive indexes and count deltas.
fn native(out: &mut Vec<u8>, buckets: &[(i32, u64)], span_field: u32, delta_field: u32) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut next = 0i32;
    for (n, &(i, _)) in buckets.iter().enumerate() {
        match spans.last_mut() {
            Some((_, len)) if n > 0 && i == next => *len += 1,
            _ => {
                let offset = if spans.is_empty() { i } else { i - next };
                spans.push((offset, 1));
            }
        }
        next = i + 1;
    }
    for (offset, length) in spans {
        message(out, span_field, |m| {
            sint(m, SPAN_OFFSET, i64::from(offset));
            uint(m, SPAN_LENGTH, u64::from(length));
        });
    }
    let mut prev = 0i64;
    for &(_, c) in buckets {
        sint(out, delta_field, c as i64 - prev);
        prev = c as i64;
    }
}

fn histogram(out: &mut Vec<u8>, h: &HistValue) {
    uint(out, SAMPLE_COUNT, h.count);
    double(out, SAMPLE_SUM, h.sum_s);
    for &(le, c) in &h.buckets {
        message(out, BUCKET, |b| {
            uint(b, CUMULATIVE_COUNT, c);
            double(b, UPPER_BOUND, le);
        });
    }
    sint(out, SCHEMA, i64::from(NATIVE_SCHEMA));
    double(out, ZERO_THRESHOLD, NATIVE_ZERO_THRESHOLD);
    uint(out, ZERO_COUNT, h.zero);
    native(out, &h.neg, NEGATIVE_SPAN, NEGATIVE_DELTA);
    native(out, &h.pos, POSITIVE_SPAN, POSITIVE_DELTA);
}

fn metric(out: &mut Vec<u8>, kind: Kind, s: &Sample) {
    for (k, v) in &s.labels {
        message(out, METRIC_LABEL, |l| {
            bytes(l, LABEL_NAME, k.as_bytes());
            bytes(l, LABEL_VALUE, v.as_bytes());
        });
    }
    match (&s.value, kind) {
        (Value::Histogram(h), _) => message(out, METRIC_HISTOGRAM, |m| histogram(m, h)),
        (Value::Number(v), Kind::Counter) => message(out, METRIC_COUNTER, |m| double(m, VALUE, *v)),
        (Value::Number(v), _) => message(out, METRIC_GAUGE, |m| double(m, VALUE, *v)),
    }
}

/// The families as delimited `MetricFamily` messages.
pub(super) fn encode(families: &[Family]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8192);
    for f in families {
        let (name, kind) = match f.kind {
            Kind::Counter => (format!("{}_total", f.base), COUNTER),
            Kind::Gauge => (f.base.to_string(), GAUGE),
            Kind::Histogram => (f.base.to_string(), HISTOGRAM),
            Kind::Info => (format!("{}_info", f.base), GAUGE),
        };
        let mut m = Vec::new();
        bytes(&mut m, FAMILY_NAME, name.as_bytes());
        bytes(&mut m, FAMILY_HELP, f.help.as_bytes());
        uint(&mut m, FAMILY_TYPE, kind);
        for s in &f.samples {
            message(&mut m, FAMILY_METRIC, |x| metric(x, f.kind, s));
        }
        varint(&mut out, m.len() as u64);
        out.extend_from_slice(&m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_are_protobufs() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
    }

    #[test]
    fn native_buckets_become_spans_and_deltas() {
        let mut out = Vec::new();
        native(&mut out, &[(-3, 5), (-2, 7), (4, 1)], POSITIVE_SPAN, POSITIVE_DELTA);
        let mut want = Vec::new();
        // span (offset -3, length 2), span (offset 4 - (-1) = 5, length 1)
        message(&mut want, POSITIVE_SPAN, |m| {
            sint(m, SPAN_OFFSET, -3);
            uint(m, SPAN_LENGTH, 2);
        });
        message(&mut want, POSITIVE_SPAN, |m| {
            sint(m, SPAN_OFFSET, 5);
            uint(m, SPAN_LENGTH, 1);
        });
        for d in [5, 2, -6] {
            sint(&mut want, POSITIVE_DELTA, d);
        }
        assert_eq!(out, want);
    }
}

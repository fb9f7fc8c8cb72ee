"""pipelines.replicate.transforms on a real SparkSession, shaped like the Kafka source."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import types as T

from pipelines.replicate import sink
from pipelines.replicate.transforms import kafka_records

pytestmark = pytest.mark.spark

# The Kafka connector's schema with includeHeaders=true.
SOURCE_SCHEMA = T.StructType([
    T.StructField("key", T.BinaryType()),
    T.StructField("value", T.BinaryType()),
    T.StructField("topic", T.StringType()),
    T.StructField("partition", T.IntegerType()),
    T.StructField("offset", T.LongType()),
    T.StructField("timestamp", T.TimestampType()),
    T.StructField("timestampType", T.IntegerType()),
    T.StructField("headers", T.ArrayType(T.StructType([
        T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))),
])

HEADERS = [
    [("trace", b"\xff\x00\x01"), ("null", None), ("empty", b""), ("trace", b"again")],
    [('quote"back\\slash \u00e9\u4e2d', b"{\"not\": json}")],
    [],
    None,
]


def test_kafka_records_columns_and_headers_round_trip(spark):
    ts = dt.datetime(2026, 11, 22, 1, 2, 3, 456000)
    rows = [(b"k", None if i == 1 else b"v", "orders", 3, 10 + i, ts, 0,
             None if h is None else [{"key": k, "value": v} for k, v in h])
            for i, h in enumerate(HEADERS)]
    out = kafka_records(spark.createDataFrame(rows, SOURCE_SCHEMA)).collect()

    assert tuple(out[0].__fields__) == sink.RECORD_COLUMNS
    assert [sink.decode_headers(r.headers_json) for r in out] == \
        [h or None for h in HEADERS]  # no header and no array both produce without headers
    assert [r.headers_json for r in out[2:]] == [None, None]
    assert [r.offset for r in out] == [10, 11, 12, 13]
    assert out[1].value is None
    expected_ms = int(ts.astimezone(dt.UTC).timestamp() * 1000)
    assert {r.timestamp_ms for r in out} == {expected_ms}

#!/usr/bin/env python3
"""Writes the binary fixtures of this directory from the kafka-journal wire
format description (docs/journal.md), independently of the Go codec, so the
Go tests check the codec against a second implementation.

  payload = u8 version | i32 n | n x (i32 len | event) | metadata JSON (v1 only)
  event   = i64 seqNr | i32 len | (i32 len | utf8 tag)* | u8 kind | i32 len | body
  kind    = 0 none, 1 binary, 2 json, 3 text
"""
import struct

def event(seq, tags, kind, body=b""):
    t = b"".join(struct.pack(">i", len(x.encode())) + x.encode() for x in tags)
    e = struct.pack(">q", seq) + struct.pack(">i", len(t)) + t + bytes([kind]) + struct.pack(">i", len(body)) + body
    return struct.pack(">i", len(e)) + e

def payload(version, events, metadata=b""):
    return bytes([version]) + struct.pack(">i", len(events)) + b"".join(events) + metadata

evs = [
    event(7, ["orders", "eu"], 1, bytes([0, 1, 2, 255])),
    event(8, [], 2, b'{"total":12.5,"items":["a","b"]}'),
    event(9, ["x"], 3, "naïve text".encode()),
    event(10, [], 0),
]
open("payload-binary-v1.bin", "wb").write(payload(1, evs, b'{"expireAfter":"2 hours","data":{"tenant":"t1"}}'))
open("payload-binary-v1-nometa.bin", "wb").write(payload(1, evs[:1], b"{}"))
open("payload-binary-v0.bin", "wb").write(payload(0, evs[:2]))

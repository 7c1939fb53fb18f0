#!/usr/bin/env python3
"""Scrubs one disk of a DINGO cluster declaratively, through the IO planner.

The complete example of docs/CLIENT_GUIDE.md. It uses only Python stubs
generated from DINGO's published .proto files:

    python -m grpc_tools.protoc -I crates/dingo-proto/proto \\
        --python_out=gen --grpc_python_out=gen planner.proto dingo.proto
    PYTHONPATH=gen python examples/python/scrub_disk.py \\
        --planner 127.0.0.1:7500 --token secret-1 --disk 3 --deadline-s 600 \\
        --secret-file /tmp/dingo/cluster.secret

It declares "every chunk on this disk, that exact copy" with a deadline,
then carries out callbacks as the planner sends them: each callback names
the chunks to read now, on which node, and reading exactly that copy is
what lets one disk read serve several tasks. The storage node verifies
every chunk against its checksums while reading it, so a read that
succeeds is a chunk scrubbed; a corrupt chunk fails with DATA_LOSS and is
reported (the node has told the metadata service, which repairs it).

Prints one JSON object: what was read, and what was found corrupt.
"""

import argparse
import json
import queue
import sys
import threading
import time

import grpc

import dingo_pb2
import dingo_pb2_grpc
import planner_pb2
import planner_pb2_grpc


def main() -> int:
    args = parse_args()
    auth = (("authorization", f"Bearer {args.token}"),)
    planner = planner_pb2_grpc.PlannerStub(grpc.insecure_channel(args.planner))

    # 1. Declare: every chunk on the disk, that exact copy, one set each.
    deadline_ms = int(time.time() * 1000) + args.deadline_s * 1000
    declared = planner.Declare(
        planner_pb2.DeclareRequest(task="scrubbing", deadline_ms=deadline_ms, chunks_on_disk=args.disk),
        metadata=auth,
    )
    print(f"declaration {declared.declaration}: {declared.total_sets} chunks on disk {args.disk}", file=sys.stderr)

    # 2. Subscribe. The stream is read on a thread so that the main loop can
    # also notice the declaration finishing.
    callbacks: "queue.Queue" = queue.Queue()
    stream = subscribe(planner, auth, callbacks)
    # The storage nodes require the cluster secret on every call: standard
    # per-call credentials, over local (loopback, plain-text) channel
    # credentials; use grpc.ssl_channel_credentials(ca) for a TLS cluster.
    with open(args.secret_file) as f:
        secret = f.read().strip()
    node_credentials = grpc.composite_channel_credentials(
        grpc.local_channel_credentials(), grpc.access_token_call_credentials(secret))
    nodes = {}  # node address -> stub
    done_deliveries = set()
    report = {"declaration": declared.declaration, "disk": args.disk, "chunks_read": 0,
              "bytes_read": 0, "corrupt": [], "redeliveries": 0}

    # 3. Carry out callbacks until the planner reports the declaration done.
    while True:
        try:
            item = callbacks.get(timeout=1.0)
        except queue.Empty:
            item = None
        if isinstance(item, grpc.RpcError):
            if item.code() == grpc.StatusCode.ABORTED:
                # Another process subscribed with our token: stop, do not fight.
                print(f"stream replaced: {item.details()}", file=sys.stderr)
                return 2
            time.sleep(0.5)  # planner restarting: subscribe again
            stream = subscribe(planner, auth, callbacks)
        elif isinstance(item, StreamEnded):
            stream = subscribe(planner, auth, callbacks)
        elif item is not None:
            cb = item
            # A redelivery of a callback we carried out (the ack was lost)
            # needs only the ack; deliveries are deduplicated by id.
            if cb.delivery not in done_deliveries:
                report["redeliveries"] += int(cb.redelivery)
                for s in cb.sets:
                    for r in s.reads:
                        scrub_chunk(nodes, node_credentials, r, cb.declaration, report)
                done_deliveries.add(cb.delivery)
            planner.Ack(planner_pb2.AckRequest(deliveries=[cb.delivery]), metadata=auth)
        status = planner.Status(planner_pb2.StatusRequest(declarations=[declared.declaration]), metadata=auth)
        d = status.declarations[0]
        if d.done or d.cancelled:
            report["done"] = d.done
            report["missed_deadline"] = d.missed_deadline
            break
    stream.cancel()
    print(json.dumps(report))
    return 0


def scrub_chunk(nodes, credentials, read, declaration, report):
    """Reads one chunk copy where the planner said. ReadChunkStream sends it
    in pieces of at most 1 MiB, which a channel with default settings
    accepts (ReadChunk would send an 8 MB chunk in one message)."""
    stub = nodes.get(read.node_addr)
    if stub is None:
        stub = nodes[read.node_addr] = dingo_pb2_grpc.NodeStub(grpc.secure_channel(read.node_addr, credentials))
    request = dingo_pb2.ReadChunkRequest(
        chunk=dingo_pb2.ChunkId(block=read.block, copy=read.copy),
        offset=0,
        len=read.bytes,
        io_class=dingo_pb2.IoClass(task="scrubbing", declaration_id=declaration),
    )
    try:
        got = sum(len(piece.data) for piece in stub.ReadChunkStream(request))
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.DATA_LOSS:
            raise
        report["corrupt"].append({"block": read.block, "copy": read.copy, "error": e.details()})
        return
    if got != read.bytes:
        raise RuntimeError(f"block {read.block} copy {read.copy}: {got} bytes, expected {read.bytes}")
    report["chunks_read"] += 1
    report["bytes_read"] += got


class StreamEnded:
    """The stream ended without an error (the planner shut down cleanly)."""


def subscribe(planner, auth, out: "queue.Queue"):
    call = planner.Subscribe(planner_pb2.SubscribeRequest(), metadata=auth)

    def pump():
        try:
            for cb in call:
                out.put(cb)
            out.put(StreamEnded())
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:  # our own cancel at the end
                out.put(e)

    threading.Thread(target=pump, daemon=True).start()
    return call


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--planner", required=True, help="planner address, host:port")
    p.add_argument("--token", required=True, help="this task client's token")
    p.add_argument("--disk", type=int, required=True, help="disk id to scrub")
    p.add_argument("--deadline-s", type=int, default=600, help="seconds from now")
    p.add_argument("--secret-file", required=True, help="the cluster secret (dingo cluster up: DATA/cluster.secret)")
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())

"""The planner protocol as docs/PLANNER_SERVICE.md and docs/CLIENT_GUIDE.md
describe it, driven by a client DINGO did not write: Python stubs generated
from the published .proto files. Each test names the documented behaviour it
checks; `crates/dingo/tests/conformance.rs` runs the same cases with DINGO's
Rust client.
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

import dingo_env
from conftest import FILES, file_bytes

# How long a test waits for the planner (quanta are 1 s).
PATIENCE_S = 30


# ----------------------------------------------------------------- helpers --

def planner_stub(pb, planner):
    return pb.planner_grpc.PlannerStub(dingo_env.channel(planner.addr))


def meta_stub(pb, cluster):
    return pb.dingo_grpc.MetaStub(dingo_env.storage_channel(cluster.meta_addr))


def auth(token):
    return dingo_env.bearer(token)


def deadline_in(seconds):
    return int(time.time() * 1000) + int(seconds * 1000)


def file_blocks(pb, cluster, path):
    """The file's blocks in file order (BlockRecord)."""
    return list(meta_stub(pb, cluster).Stat(pb.dingo.StatRequest(path=path)).blocks)


def code_of(call):
    """The status code a call fails with (None if it succeeds)."""
    try:
        call()
    except grpc.RpcError as e:
        return e.code(), e.details()
    return None, None


class Stream:
    """A Subscribe stream read on a thread: callbacks and the final error (or
    None for a clean end) arrive on a queue."""

    def __init__(self, pb, stub, token):
        self.call = stub.Subscribe(pb.planner.SubscribeRequest(), metadata=auth(token))
        self.items = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        try:
            for cb in self.call:
                self.items.put(cb)
            self.items.put(None)
        except grpc.RpcError as e:
            self.items.put(e)

    def next(self, timeout_s=PATIENCE_S):
        """The next callback; raises the stream's error, or AssertionError on
        a clean end or a timeout."""
        try:
            item = self.items.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no callback within {timeout_s} s")
        if isinstance(item, grpc.RpcError):
            raise item
        assert item is not None, "the stream ended"
        return item

    def quiet_for(self, seconds):
        """True if nothing arrives for `seconds`."""
        try:
            self.items.get(timeout=seconds)
            return False
        except queue.Empty:
            return True

    def close(self):
        self.call.cancel()


def status_of(pb, stub, token, declaration):
    reply = stub.Status(pb.planner.StatusRequest(declarations=[declaration]), metadata=auth(token))
    return reply.declarations[0]


def carry_out(pb, stub, token, stream, declaration, on_callback=lambda cb: None):
    """Acks every callback of `declaration` until Status says done; returns
    the callbacks (in arrival order)."""
    seen = []
    deadline = time.monotonic() + PATIENCE_S
    while not status_of(pb, stub, token, declaration).done:
        assert time.monotonic() < deadline, status_of(pb, stub, token, declaration)
        try:
            cb = stream.next(timeout_s=1.0)
        except AssertionError:
            continue
        assert cb.declaration == declaration
        on_callback(cb)
        stub.Ack(pb.planner.AckRequest(deliveries=[cb.delivery]), metadata=auth(token))
        seen.append(cb)
    return seen


def read_stream(pb, read, task, declaration):
    """Reads one chunk the way the guide says: ReadChunkStream on the node the
    callback names, with a default channel."""
    node = pb.dingo_grpc.NodeStub(dingo_env.storage_channel(read.node_addr))
    request = pb.dingo.ReadChunkRequest(
        chunk=pb.dingo.ChunkId(block=read.block, copy=read.copy),
        offset=0,
        len=read.bytes,
        io_class=pb.dingo.IoClass(task=task, declaration_id=declaration),
    )
    return b"".join(piece.data for piece in node.ReadChunkStream(request))


# ------------------------------------------------------------------- cases --

def test_a_file_of_8_mb_blocks_is_declared_read_with_default_settings_and_finished(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    blocks = file_blocks(pb, cluster, "/conf/big.bin")
    sets = pb.planner.BlockSets(
        sets=[pb.planner.BlockSet(members=[pb.planner.Member(block=b.id)]) for b in blocks]
    )
    declared = stub.Declare(
        pb.planner.DeclareRequest(task="fsck", deadline_ms=deadline_in(20), sets=sets), metadata=auth(token)
    )
    assert declared.total_sets == len(blocks) == 3
    stream = Stream(pb, stub, token)
    data = {}

    def read_all(cb):
        assert cb.task == "fsck" and not cb.redelivery
        for s in cb.sets:
            for r in s.reads:
                assert r.node_addr, "the callback names the node serving the disk"
                data[s.key] = read_stream(pb, r, cb.task, cb.declaration)

    carry_out(pb, stub, token, stream, declared.declaration, read_all)
    stream.close()
    # Set keys are indices into `sets`, so the file comes back in order.
    assert b"".join(data[i] for i in range(len(blocks))) == file_bytes("/conf/big.bin")
    # A unary ReadChunk of a whole 8 MB chunk exceeds the default 4 MiB limit.
    first = blocks[0]
    node = pb.dingo_grpc.NodeStub(dingo_env.storage_channel(first.chunks[0].addr))
    request = pb.dingo.ReadChunkRequest(
        chunk=pb.dingo.ChunkId(block=first.id, copy=first.chunks[0].copy), offset=0, len=first.size
    )
    assert code_of(lambda: node.ReadChunk(request))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Done declarations leave the default listing, and are reported by id.
    listing = stub.Status(pb.planner.StatusRequest(), metadata=auth(token))
    assert declared.declaration not in [d.declaration for d in listing.declarations]
    done = status_of(pb, stub, token, declared.declaration)
    assert done.done and done.acked_sets == 3 and not done.missed_deadline


def test_a_set_needing_some_of_its_members_is_served_by_that_many(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    blocks = [b.id for b in file_blocks(pb, cluster, "/conf/big.bin")]
    one_set = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=b) for b in blocks], needed=2)])
    declared = stub.Declare(
        P.DeclareRequest(task="reconstruction", deadline_ms=deadline_in(20), sets=one_set), metadata=auth(token)
    )
    assert declared.total_sets == 1
    stream = Stream(pb, stub, token)
    seen = carry_out(pb, stub, token, stream, declared.declaration)
    stream.close()
    reads = [r.block for cb in seen for s in cb.sets for r in s.reads]
    assert len(reads) == 2 and len(set(reads)) == 2 and set(reads) <= set(blocks), reads


def test_files_are_declared_by_path_and_erasure_coded_ones_read_their_data_members(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    segment = pb.planner.FileSegment
    declared = stub.DeclareFiles(
        pb.planner.DeclareFilesRequest(
            task="file-scrubbing",
            deadline_ms=deadline_in(20),
            sets=[
                pb.planner.SegmentSet(segments=[segment(path="/conf/ec.bin")]),
                pb.planner.SegmentSet(segments=[segment(path="/conf/small.bin", offset=1_500_000, length=1)]),
            ],
        ),
        metadata=auth(token),
    )
    assert declared.total_sets == 2
    stream = Stream(pb, stub, token)
    read_blocks = {}

    def record(cb):
        for s in cb.sets:
            read_blocks[s.key] = sorted(r.block for r in s.reads)

    carry_out(pb, stub, token, stream, declared.declaration, record)
    stream.close()
    ec = file_blocks(pb, cluster, "/conf/ec.bin")
    assert read_blocks[0] == sorted(b.id for b in ec if b.ec_index < 2), "data members only"
    small = file_blocks(pb, cluster, "/conf/small.bin")
    assert read_blocks[1] == [small[1].id], "one byte at 1.5 MB lies in the second 1 MB block"


def test_member_keys_fit_a_signed_64_bit_integer(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    blocks = file_blocks(pb, cluster, "/conf/small.bin")
    members = P.Members(members=[P.Member(block=blocks[0].id), P.Member(block=blocks[1].id, copy=2)])
    declared = stub.Declare(
        P.DeclareRequest(task="rebalancing", deadline_ms=deadline_in(20), each_member=members), metadata=auth(token)
    )
    stream = Stream(pb, stub, token)
    keys = sorted(s.key for cb in carry_out(pb, stub, token, stream, declared.declaration) for s in cb.sets)
    stream.close()
    # Exact copy: copy number in the top byte; any copy: 0x7F there.
    assert keys == [(2 << 56) | blocks[1].id, (0x7F << 56) | blocks[0].id]
    assert all(k < 2**63 for k in keys)


def test_refused_requests_get_the_documented_codes_and_change_nothing(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    block = file_blocks(pb, cluster, "/conf/small.bin")[0].id
    one_set = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=block)])])
    ok = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60), sets=one_set), metadata=auth(token))
    other = dingo_env.client_token(31)
    cases = [
        ("no token", lambda: stub.Status(P.StatusRequest()), grpc.StatusCode.UNAUTHENTICATED, "authorization"),
        ("unknown token", lambda: stub.Status(P.StatusRequest(), metadata=auth("nope")),
         grpc.StatusCode.UNAUTHENTICATED, "unknown token"),
        ("deadline in the past", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(-1), sets=one_set), metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "deadline"),
        ("unknown task", lambda: stub.Declare(
            P.DeclareRequest(task="defrag", deadline_ms=deadline_in(60), sets=one_set), metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "defrag"),
        ("no read sets", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60)), metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "no read sets"),
        ("unknown block", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60),
                             sets=P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=999_999)])])),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "999999"),
        ("a set needing more members than it names", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60),
                             sets=P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=block)], needed=2)])),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "needs 2 of its 1 members"),
        ("sets_needed 0", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60), sets=one_set, sets_needed=0),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "sets_needed"),
        ("bytes_needed 0", lambda: stub.Declare(
            P.DeclareRequest(task="rebalancing", deadline_ms=deadline_in(60), sets=one_set, bytes_needed=0),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "bytes_needed"),
        ("sets_needed and bytes_needed", lambda: stub.Declare(
            P.DeclareRequest(task="rebalancing", deadline_ms=deadline_in(60), sets=one_set, sets_needed=1,
                             bytes_needed=1),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "both"),
        ("more bytes than the sets hold", lambda: stub.Declare(
            P.DeclareRequest(task="rebalancing", deadline_ms=deadline_in(60), sets=one_set, bytes_needed=10**15),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "bytes_needed"),
        ("announced block out of range", lambda: stub.AnnounceDeletions(
            P.AnnounceDeletionsRequest(members=[P.Member(block=2**60)]), metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "block"),
        ("no such file", lambda: stub.DeclareFiles(
            P.DeclareFilesRequest(task="fsck", deadline_ms=deadline_in(60),
                                  sets=[P.SegmentSet(segments=[P.FileSegment(path="/conf/nope")])]),
            metadata=auth(token)),
         grpc.StatusCode.NOT_FOUND, "/conf/nope"),
        ("segment past the end", lambda: stub.DeclareFiles(
            P.DeclareFilesRequest(task="fsck", deadline_ms=deadline_in(60),
                                  sets=[P.SegmentSet(segments=[P.FileSegment(path="/conf/small.bin",
                                                                             offset=10**9)])]),
            metadata=auth(token)),
         grpc.StatusCode.INVALID_ARGUMENT, "past the end"),
        ("another client's declaration", lambda: stub.Status(
            P.StatusRequest(declarations=[ok.declaration]), metadata=auth(other)),
         grpc.StatusCode.PERMISSION_DENIED, "another client"),
        ("SetBudget without the admin token", lambda: stub.SetBudget(
            P.SetBudgetRequest(cluster_bytes=1), metadata=auth(token)),
         grpc.StatusCode.PERMISSION_DENIED, "admin"),
        ("the admin token on Declare", lambda: stub.Declare(
            P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60), sets=one_set),
            metadata=auth(dingo_env.ADMIN_TOKEN)),
         grpc.StatusCode.PERMISSION_DENIED, "admin"),
        ("SetBudget naming no limit", lambda: stub.SetBudget(
            P.SetBudgetRequest(), metadata=auth(dingo_env.ADMIN_TOKEN)),
         grpc.StatusCode.INVALID_ARGUMENT, "no limit"),
        ("ack of a delivery never made", lambda: stub.Ack(
            P.AckRequest(deliveries=[987_654]), metadata=auth(token)),
         grpc.StatusCode.NOT_FOUND, "987654"),
        ("unknown declaration", lambda: stub.Cancel(
            P.CancelRequest(declaration=987_654), metadata=auth(token)),
         grpc.StatusCode.NOT_FOUND, "987654"),
    ]
    before = stub.Status(P.StatusRequest(), metadata=auth(token))
    for name, call, code, fragment in cases:
        got, details = code_of(call)
        assert got == code, f"{name}: {got} {details!r}, expected {code}"
        assert fragment in details, f"{name}: {details!r} does not mention {fragment!r}"
    after = stub.Status(P.StatusRequest(), metadata=auth(token))
    assert [d.declaration for d in after.declarations] == [d.declaration for d in before.declarations]
    assert [d.declaration for d in after.declarations] == [ok.declaration], "nothing was declared"


def test_status_reports_a_cancelled_declaration_beside_live_ones(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    block = file_blocks(pb, cluster, "/conf/small.bin")[0].id
    one_set = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=block)])])
    live = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60), sets=one_set), metadata=auth(token))
    gone = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(60), sets=one_set), metadata=auth(token))
    assert stub.Cancel(P.CancelRequest(declaration=gone.declaration), metadata=auth(token)).delivered_sets == 0
    got, details = code_of(lambda: stub.Cancel(P.CancelRequest(declaration=gone.declaration), metadata=auth(token)))
    assert got == grpc.StatusCode.FAILED_PRECONDITION and "cancelled" in details
    reply = stub.Status(P.StatusRequest(declarations=[live.declaration, gone.declaration]), metadata=auth(token))
    assert [(d.declaration, d.cancelled) for d in reply.declarations] == [
        (live.declaration, False), (gone.declaration, True)]


def test_bytes_needed_is_met_with_some_sets_and_announced_deletions_elide_others(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    blocks = file_blocks(pb, cluster, "/conf/big.bin")
    sets = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=b.id)]) for b in blocks])
    # Any sets holding one block's bytes: one set is enough.
    flexible = stub.Declare(
        P.DeclareRequest(task="rebalancing", deadline_ms=deadline_in(20), sets=sets, bytes_needed=blocks[0].size),
        metadata=auth(token))
    # A declaration of every block, whose last block another task is about
    # to delete (a whole block: no copy named).
    whole = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(20), sets=sets), metadata=auth(token))
    announced = stub.AnnounceDeletions(
        P.AnnounceDeletionsRequest(members=[P.Member(block=blocks[-1].id)]), metadata=auth(token))
    assert announced.elided_sets >= 1
    stream = Stream(pb, stub, token)
    got = carry_out(pb, stub, token, stream, flexible.declaration)
    assert sum(len(cb.sets) for cb in got) == 1
    status = status_of(pb, stub, token, flexible.declaration)
    assert status.bytes_needed == blocks[0].size and status.delivered_sets == 1
    got = carry_out(pb, stub, token, stream, whole.declaration)
    stream.close()
    assert sorted(s.key for cb in got for s in cb.sets) == list(range(len(blocks) - 1))
    assert status_of(pb, stub, token, whole.declaration).elided_sets == 1


def test_acks_are_idempotent(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    block = file_blocks(pb, cluster, "/conf/small.bin")[1].id
    sets = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=block)])])
    declared = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(20), sets=sets), metadata=auth(token))
    stream = Stream(pb, stub, token)
    cb = stream.next()
    for _ in range(2):
        stub.Ack(P.AckRequest(deliveries=[cb.delivery]), metadata=auth(token))
    dingo_env.wait_for("done", lambda: status_of(pb, stub, token, declared.declaration).done)
    # After the declaration finished, acknowledging again still succeeds.
    stub.Ack(P.AckRequest(deliveries=[cb.delivery]), metadata=auth(token))
    stream.close()


def test_a_newer_subscribe_ends_the_older_stream_with_aborted(pb, planner, token):
    stub = planner_stub(pb, planner)
    first = Stream(pb, stub, token)
    time.sleep(0.5)
    second = Stream(pb, stub, token)
    with pytest.raises(grpc.RpcError) as ended:
        first.next(timeout_s=10)
    assert ended.value.code() == grpc.StatusCode.ABORTED, ended.value
    assert "replaced" in ended.value.details()
    assert second.quiet_for(1.0), "the newer stream stays open"
    second.close()


def test_nothing_is_dispatched_while_the_client_has_no_stream(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    blocks = file_blocks(pb, cluster, "/conf/small.bin")
    sets = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=b.id)]) for b in blocks])
    declared = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(20), sets=sets), metadata=auth(token))
    time.sleep(3.0)  # three quanta
    assert status_of(pb, stub, token, declared.declaration).delivered_sets == 0
    stream = Stream(pb, stub, token)
    keys = sorted(s.key for cb in carry_out(pb, stub, token, stream, declared.declaration) for s in cb.sets)
    stream.close()
    assert keys == list(range(len(blocks))), "every set once, after subscribing"
    assert not status_of(pb, stub, token, declared.declaration).missed_deadline


def test_a_budget_change_keeps_the_limit_it_does_not_name(pb, planner):
    stub = planner_stub(pb, planner)
    P = pb.planner
    admin = auth(dingo_env.ADMIN_TOKEN)
    stub.SetBudget(P.SetBudgetRequest(cluster_bytes=500_000_000, disk_head_time_us=900_000), metadata=admin)
    stub.SetBudget(P.SetBudgetRequest(cluster_bytes=400_000_000), metadata=admin)
    budget = stub.Status(P.StatusRequest(), metadata=admin).budget
    assert (budget.cluster_bytes, budget.disk_head_time_us) == (400_000_000, 900_000)
    stub.SetBudget(P.SetBudgetRequest(cluster_bytes=0, disk_head_time_us=0), metadata=admin)  # unlimited again


def test_tokens_pass_as_lowercase_bearer_and_as_standard_call_credentials(pb, planner, token):
    P = pb.planner
    stub = planner_stub(pb, planner)
    stub.Status(P.StatusRequest(), metadata=(("authorization", f"bearer {token}"),))
    # gRPC's own per-call credentials need a channel it deems secure: on
    # loopback that is local_channel_credentials (TLS elsewhere).
    credentials = grpc.composite_channel_credentials(
        grpc.local_channel_credentials(), grpc.access_token_call_credentials(token))
    secure = pb.planner_grpc.PlannerStub(grpc.secure_channel(planner.addr, credentials))
    secure.Status(P.StatusRequest())


def test_over_tls_the_standard_call_credentials_carry_the_token(pb, tls_planner, token):
    P = pb.planner
    credentials = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(root_certificates=tls_planner.ca.read_bytes()),
        grpc.access_token_call_credentials(token))
    stub = pb.planner_grpc.PlannerStub(grpc.secure_channel(tls_planner.addr, credentials))
    stub.Status(P.StatusRequest())
    # Without credentials the call is refused; in plaintext it does not connect.
    anonymous = grpc.ssl_channel_credentials(root_certificates=tls_planner.ca.read_bytes())
    stub = pb.planner_grpc.PlannerStub(grpc.secure_channel(tls_planner.addr, anonymous))
    assert code_of(lambda: stub.Status(P.StatusRequest()))[0] == grpc.StatusCode.UNAUTHENTICATED
    plain = pb.planner_grpc.PlannerStub(dingo_env.channel(tls_planner.addr))
    got, _ = code_of(lambda: plain.Status(P.StatusRequest(), metadata=auth(token), timeout=5))
    assert got == grpc.StatusCode.UNAVAILABLE


def test_a_planner_crash_redelivers_exactly_what_was_not_acknowledged(pb, cluster, planner, token):
    stub = planner_stub(pb, planner)
    P = pb.planner
    blocks = file_blocks(pb, cluster, "/conf/small.bin") + file_blocks(pb, cluster, "/conf/ec.bin")
    sets = P.BlockSets(sets=[P.BlockSet(members=[P.Member(block=b.id)]) for b in blocks])
    declared = stub.Declare(P.DeclareRequest(task="fsck", deadline_ms=deadline_in(25), sets=sets), metadata=auth(token))
    stream = Stream(pb, stub, token)
    acked = set()
    acked_keys = []
    while len(acked_keys) < 3:
        cb = stream.next()
        stub.Ack(P.AckRequest(deliveries=[cb.delivery]), metadata=auth(token))
        acked.add(cb.delivery)
        acked_keys += [s.key for s in cb.sets]
    held = stream.next()  # never acknowledged before the crash
    planner.kill()
    with pytest.raises(grpc.RpcError):
        while True:  # callbacks already on the wire may still come
            stream.next(timeout_s=10)
    planner.start()
    stream = dingo_env.wait_for("resubscribed", lambda: _try_subscribe(pb, stub, token))
    held_seen = False
    while len(acked_keys) < len(blocks):
        cb = stream.next()
        assert cb.delivery not in acked, f"acknowledged delivery {cb.delivery} came again"
        if cb.delivery == held.delivery:
            assert cb.redelivery and list(cb.sets) == list(held.sets)
            held_seen = True
        stub.Ack(P.AckRequest(deliveries=[cb.delivery]), metadata=auth(token))
        acked.add(cb.delivery)
        acked_keys += [s.key for s in cb.sets]
    stream.close()
    assert held_seen, "the unacknowledged callback came again, flagged as a redelivery"
    assert sorted(acked_keys) == list(range(len(blocks))), "every set acknowledged exactly once"
    dingo_env.wait_for("done", lambda: status_of(pb, stub, token, declared.declaration).done)


def _try_subscribe(pb, stub, token):
    stream = Stream(pb, stub, token)
    time.sleep(0.2)
    if not stream.items.empty():
        item = stream.items.queue[0]
        if isinstance(item, grpc.RpcError) or item is None:
            return None
    return stream


def test_the_client_guide_example_scrubs_a_disk(pb, cluster, planner, token, work):
    meta = meta_stub(pb, cluster)
    status = meta.ClusterStatus(pb.dingo.ClusterStatusRequest())
    disk = max((d for n in status.nodes for d in n.disks), key=lambda d: d.chunks)
    on_disk = meta.ChunksOnDisk(pb.dingo.ChunksOnDiskRequest(disk=disk.id)).chunks
    assert len(on_disk) > 0
    example = Path(__file__).resolve().parent.parent / "examples" / "python" / "scrub_disk.py"
    run = subprocess.run(
        [sys.executable, str(example), "--planner", planner.addr, "--token", token,
         "--disk", str(disk.id), "--deadline-s", "30", "--secret-file", str(cluster.secret_file)],
        env={**os.environ, "PYTHONPATH": str(work / "gen")},
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["done"] and not report["missed_deadline"], report
    assert report["chunks_read"] == len(on_disk) and not report["corrupt"], report

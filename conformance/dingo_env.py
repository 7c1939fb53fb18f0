"""A local DINGO cluster and planner for the conformance suite.

Everything here is what a third-party client author has: the `dingo`
executable (named by the DINGO_EXE environment variable), the published
`.proto` files (DINGO_PROTO_DIR) and stubs generated from them with
grpcio-tools. Nothing imports DINGO code.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from grpc_tools import protoc

# Quanta are one second so that the suite runs in seconds.
QUANTUM_MS = 1000
ADMIN_TOKEN = "admin-token"
# Task clients in the planner's config: one per test, plenty to spare.
CLIENTS = {f"client-{i}": f"token-{i}" for i in range(32)}


def client_token(i: int) -> str:
    return CLIENTS[f"client-{i}"]
STORAGE_CONFIG = """
[meta]
dead_after_ms = 1000
[node]
heartbeat_ms = 200
cache = "32MB"
pinned = "32MB"
"""


def generate_stubs(proto_dir: Path, out_dir: Path):
    """Runs protoc (from grpcio-tools) on the published protos; returns the
    generated modules (planner_pb2, planner_pb2_grpc, dingo_pb2,
    dingo_pb2_grpc)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{proto_dir}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        "planner.proto",
        "dingo.proto",
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {proto_dir}")
    sys.path.insert(0, str(out_dir))
    return tuple(
        importlib.import_module(m) for m in ("planner_pb2", "planner_pb2_grpc", "dingo_pb2", "dingo_pb2_grpc")
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout_s: float = 30.0, every_s: float = 0.1):
    """Polls `check` until it returns something truthy; returns that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(every_s)


class Cluster:
    """`dingo cluster up` (metadata service and storage nodes, no
    maintenance supervisor) in a temporary directory."""

    def __init__(self, exe: str, work: Path, nodes: int = 3, disks_per_node: int = 2):
        self.exe = exe
        self.work = work
        config = work / "storage.toml"
        config.write_text(STORAGE_CONFIG)
        self.log = open(work / "cluster.log", "w")
        # `cluster up` prints the metadata service's address once every node
        # is up; with --base-port 0 the daemons take any free ports.
        self.proc = subprocess.Popen(
            [exe, "cluster", "up", "--nodes", str(nodes), "--disks-per-node", str(disks_per_node),
             "--data", str(work / "data"), "--base-port", "0", "--config", str(config), "--no-maintain"],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
        )
        for line in self.proc.stdout:
            self.log.write(line)
            if line.startswith("cluster up: metadata service at "):
                self.meta_addr = line.split()[5]
                break
        else:
            raise RuntimeError(f"cluster did not start; see {work / 'cluster.log'}")
        # `cluster up` made the cluster secret every storage call carries.
        self.secret_file = work / "data" / "cluster.secret"
        global STORAGE_SECRET
        STORAGE_SECRET = self.secret_file.read_text().strip()

    def put(self, local: Path, path: str, redundancy: str, block_size: str):
        subprocess.run(
            [self.exe, "fs", "put", "--meta", self.meta_addr, "--secret-file", str(self.secret_file),
             "--redundancy", redundancy,
             "--block-size", block_size, str(local), path],
            check=True, capture_output=True,
        )

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Planner:
    """A `dingo planner` process on fixed free ports, so that a client's
    channel reconnects to the same address after a crash and restart."""

    def __init__(self, exe: str, work: Path, cluster: Cluster, name: str = "planner", tls_dir: Path | None = None):
        """With `tls_dir` (from `dingo tls dev-certs`), gRPC is served over
        TLS with its cert.pem and key.pem."""
        self.exe = exe
        self.addr = f"127.0.0.1:{free_port()}"
        self.metrics_addr = f"127.0.0.1:{free_port()}"
        self.config = work / f"{name}.toml"
        clients = "".join(f'[[clients]]\nname = "{n}"\ntoken = "{t}"\n' for n, t in CLIENTS.items())
        tls = f'[tls]\ncert = "{tls_dir / "cert.pem"}"\nkey = "{tls_dir / "key.pem"}"\n' if tls_dir else ""
        self.config.write_text(
            f'meta = "{cluster.meta_addr}"\nquantum_ms = {QUANTUM_MS}\ndispatch_spacing_ms = 250\n'
            f'pin_grace_ms = 3000\nadmin_token = "{ADMIN_TOKEN}"\n{clients}{tls}'
            f'[storage]\nsecret_file = "{cluster.secret_file}"\n'
        )
        self.data = work / name
        self.log_path = work / f"{name}.log"
        self.proc = None
        self.start()

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.exe, "planner", "--config", str(self.config), "--data", str(self.data),
             "--listen", self.addr, "--metrics", self.metrics_addr],
            stdout=log, stderr=log,
        )
        log.close()

        def listening():
            if self.proc.poll() is not None:
                raise RuntimeError(f"planner exited with {self.proc.returncode}; see {self.log_path}")
            host, port = self.addr.rsplit(":", 1)
            with socket.socket() as s:
                return s.connect_ex((host, int(port))) == 0

        wait_for("planner listening", listening)

    def kill(self):
        """SIGKILL: a crash with no chance to clean up."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def dev_certificates(exe: str, out: Path) -> Path:
    """A throwaway authority and server certificate for 127.0.0.1
    (`dingo tls dev-certs`); returns the directory with ca.pem, cert.pem and
    key.pem."""
    subprocess.run([exe, "tls", "dev-certs", "--out", str(out)], check=True, capture_output=True)
    return out


def bearer(token: str):
    """Per-call metadata carrying a token (the way that works on a plaintext
    channel, which is what DINGO serves without TLS)."""
    return (("authorization", f"Bearer {token}"),)


def make_temp_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="dingo-conformance-"))


def exe_and_protos() -> tuple[str, Path]:
    exe = os.environ.get("DINGO_EXE")
    protos = os.environ.get("DINGO_PROTO_DIR")
    if not exe or not protos:
        raise RuntimeError("set DINGO_EXE (the dingo executable) and DINGO_PROTO_DIR (its .proto files)")
    return exe, Path(protos)


# The running cluster's secret, which the storage services (metadata and
# nodes) require on every call; set when the cluster starts.
STORAGE_SECRET = None


def channel(addr: str) -> grpc.Channel:
    """A channel with gRPC's default settings (4 MiB receive limit)."""
    return grpc.insecure_channel(addr)


def storage_channel(addr: str) -> grpc.Channel:
    """A channel to a storage service (metadata, node) with gRPC's default
    settings and the cluster secret as standard per-call credentials (over
    local credentials: plain text on loopback, where gRPC still attaches
    call credentials)."""
    credentials = grpc.composite_channel_credentials(
        grpc.local_channel_credentials(), grpc.access_token_call_credentials(STORAGE_SECRET))
    return grpc.secure_channel(addr, credentials)

"""pytest fixtures: generated stubs, one cluster with files, one planner."""

import itertools
import os
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import dingo_env


@pytest.fixture(scope="session")
def work():
    path = dingo_env.make_temp_dir()
    yield path
    if os.environ.get("DINGO_CONFORMANCE_KEEP"):
        print(f"kept {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pb(work):
    """The generated modules, as `pb.planner`, `pb.planner_grpc`, `pb.dingo`,
    `pb.dingo_grpc`."""
    _, protos = dingo_env.exe_and_protos()
    planner, planner_grpc, dingo, dingo_grpc = dingo_env.generate_stubs(protos, work / "gen")
    return SimpleNamespace(planner=planner, planner_grpc=planner_grpc, dingo=dingo, dingo_grpc=dingo_grpc)


# Files the suite reads: name -> (bytes, redundancy, block size). The 8 MB
# blocks are DINGO's default and larger than gRPC's default 4 MiB message.
FILES = {
    "/conf/big.bin": (20_000_000, "replicated:3", "8MB"),
    "/conf/ec.bin": (6_000_000, "ec:2+1", "1MB"),
    "/conf/small.bin": (3_000_000, "replicated:3", "1MB"),
}


def file_bytes(path: str) -> bytes:
    """Deterministic contents of a suite file."""
    return random.Random(path).randbytes(FILES[path][0])


@pytest.fixture(scope="session")
def cluster(work):
    exe, _ = dingo_env.exe_and_protos()
    c = dingo_env.Cluster(exe, work)
    for path in FILES:
        local = work / path.strip("/").replace("/", "_")
        local.write_bytes(file_bytes(path))
        size, redundancy, block = FILES[path]
        c.put(local, path, redundancy, block)
    yield c
    c.stop()


@pytest.fixture(scope="session")
def planner_process(work, cluster):
    exe, _ = dingo_env.exe_and_protos()
    p = dingo_env.Planner(exe, work, cluster)
    yield p
    p.stop()


@pytest.fixture(scope="session")
def tls_planner(work, cluster):
    """A second planner on the same cluster, serving gRPC over TLS; its
    `ca` attribute is the authority's PEM file."""
    exe, _ = dingo_env.exe_and_protos()
    certs = dingo_env.dev_certificates(exe, work / "tls")
    p = dingo_env.Planner(exe, work, cluster, name="tls-planner", tls_dir=certs)
    p.ca = certs / "ca.pem"
    yield p
    p.stop()


@pytest.fixture()
def planner(planner_process):
    """The running planner (restarted if an earlier test crashed it)."""
    if planner_process.proc.poll() is not None:
        planner_process.start()
    return planner_process


_tokens = itertools.count()


@pytest.fixture()
def token():
    """A task client of its own for each test, so that one test's
    declarations and deliveries never reach another's streams."""
    return dingo_env.client_token(next(_tokens))

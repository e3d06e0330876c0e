"""numerics.units: the results store refusing an entry whose recorded spec is not the one asked for, and the
scheduler address: its form checked before any work, and what answers at it checked (within a timeout) before
any unit is submitted, against throwaway local servers that are not dask schedulers."""
from __future__ import annotations

import json
import socket
import time

import pytest

from numerics import units
from tests import _servers
from theory.validation import SettingError

# ------------------------------------------------------------------------------------------------
# the store


def _entry(store: units.Store, key: str) -> dict:
    return json.loads(store.path(key).read_text())


def test_an_entry_recorded_for_another_configuration_is_corrupt_not_reused(tmp_path):
    """A forged entry: the file of the key asked for, its key field and its result digest intact, but the spec
    it records is another configuration (batch 65 for 64).  Reusing it would hand the asked-for unit another
    unit's result; the store moves it to corrupt/ and reports it missing, so the unit is trained again."""
    store = units.Store(tmp_path / "store")
    spec = {"kind": "search", "fn": "m:f", "config": {"batch": 64, "d": 8}, "task": "OR"}
    other = {**spec, "config": {**spec["config"], "batch": 65}}
    key = units.key_of(spec)
    store.put(key, other, {"result": {"lr": 0.5}, "cpu_s": 1.0, "wall_s": 1.0})
    forged = _entry(store, key)
    assert forged["key"] == key and forged["spec"] == other           # key and digest as put wrote them
    assert store.get(key, other) is not None                          # whole, for the spec it records
    assert store.get(key, spec) is None
    assert not store.path(key).exists() and store.corrupt_found == [key]
    moved = list((tmp_path / "store" / "corrupt").iterdir())
    assert len(moved) == 1 and json.loads(moved[0].read_text())["spec"] == other
    # the same spec written back whole is reused
    store.put(key, spec, {"result": {"lr": 0.25}, "cpu_s": 1.0, "wall_s": 1.0})
    assert store.get(key, spec)["result"] == {"lr": 0.25}


def test_an_entry_with_a_spec_differing_in_one_nested_value_is_corrupt(tmp_path):
    """The spec comparison is whole: one value deep in the recorded reading differs (the momentum constant)."""
    store = units.Store(tmp_path / "store")
    spec = {"kind": "seed", "fn": "m:f", "reading": {"optimizer": "momentum", "momentum": 0.9}, "seed": 1}
    key = units.key_of(spec)
    store.put(key, {**spec, "reading": {"optimizer": "momentum", "momentum": 0.5}},
              {"result": {"risk": 0.1}, "cpu_s": 0.0, "wall_s": 0.0})
    assert store.get(key, spec) is None and store.corrupt_found == [key]


# ------------------------------------------------------------------------------------------------
# the scheduler address


@pytest.mark.parametrize("text, want", [
    ("tcp://127.0.0.1:8786", ("tcp", "127.0.0.1", 8786)),
    ("127.0.0.1:8786", ("tcp", "127.0.0.1", 8786)),
    ("tcp://[::1]:8786", ("tcp", "::1", 8786)),
    ("tls://host.example:8786", ("tls", "host.example", 8786)),
])
def test_scheduler_addresses_of_dasks_form_are_accepted(text, want):
    assert units.scheduler_address(text) == want


@pytest.mark.parametrize("text, why", [
    ("", "empty"), ("  ", "empty"), ("foo", "no port"), ("tcp://host", "no port"), ("tcp://host:0", "port 0"),
    ("tcp://host:99999", "bad port"), ("tcp://host:x", "bad port"), ("http://host:8787", "unknown protocol"),
    ("inproc://host:1", "unknown protocol"), ("tcp://:8786", "no host"), ("tcp://host:8786/status", "after the port"),
])
def test_malformed_scheduler_addresses_are_refused_naming_the_form(text, why):
    with pytest.raises(SettingError) as exc:
        units.scheduler_address(text)
    assert why in str(exc.value) and "tcp://host:port" in str(exc.value) and repr(text) in str(exc.value)
    with pytest.raises(SettingError):
        units.Cluster(text)                                           # refused at once, before any connection


@pytest.fixture
def http_server():
    with _servers.http_server() as address:
        yield address


@pytest.fixture
def banner_server():
    with _servers.banner_server() as address:
        yield address


def test_an_http_port_is_given_up_after_the_timeout_as_not_a_scheduler(http_server):
    """An HTTP server accepts the connection and waits for a request line that dask never sends: the check
    gives up after its timeout with an error naming the address, instead of waiting for ever."""
    cluster = units.Cluster(http_server, timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(units.SchedulerUnreachable) as exc:
        cluster.connect()
    assert time.monotonic() - t0 < 10
    assert str(exc.value).startswith(f"{http_server}: did not answer as a dask scheduler within 1 s")
    assert cluster.opened == []


def test_a_service_speaking_another_protocol_is_not_a_scheduler(banner_server):
    """The banner read as dask's frame length asks for exabytes (a MemoryError inside dask): the check says
    what is at the address, a usage error, not "out of memory"."""
    with pytest.raises(units.SchedulerUnreachable) as exc:
        units.Cluster(banner_server, timeout=5.0).connect()
    assert str(exc.value).startswith(f"{banner_server}: not a dask scheduler")
    assert isinstance(exc.value, SettingError)


def test_a_closed_port_cannot_connect():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(units.SchedulerUnreachable, match="cannot connect"):
        units.Cluster(f"tcp://127.0.0.1:{port}", timeout=2.0).check_scheduler()


@pytest.mark.slow  # a dask scheduler in this process
def test_a_dask_scheduler_passes_the_check_and_a_worker_does_not():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      dashboard_address=":0") as cluster:
        units.Cluster(cluster.scheduler_address, timeout=10.0).check_scheduler()
        worker = next(iter(cluster.scheduler_info["workers"]))
        with pytest.raises(units.SchedulerUnreachable, match="not a dask scheduler .a dask Worker answers there"):
            units.Cluster(worker, timeout=10.0).check_scheduler()

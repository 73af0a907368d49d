"""The P4Runtime server's digest streams (``softswitch.p4rt.digests``): lists by size and by
timeout, the duplicate filter until an ack or the ack timeout, config checks. A fake clock
drives the timeouts (``tick``), so nothing here waits."""
from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2

from hina.softswitch.p4rt.digests import DigestStreams, check_config
from hina.softswitch.p4rt.errors import P4RuntimeError

ID = 401


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def streams():
    sent: list = []
    clock = Clock()
    s = DigestStreams(sent.append, clock)
    s.sent, s.clock = sent, clock
    yield s
    s.close()


def config(max_timeout_ns=0, max_list_size=0, ack_timeout_ns=0):
    c = p4runtime_pb2.DigestEntry.Config()
    c.max_timeout_ns, c.max_list_size, c.ack_timeout_ns = max_timeout_ns, max_list_size, ack_timeout_ns
    return c


def lists(streams):
    """(list id, [data as tuples of bytes]) of every DigestList sent."""
    return [(m.digest.list_id, [tuple(x.bitstring for x in d.struct.members)
                                for d in m.digest.data]) for m in streams.sent]


def test_nothing_is_sent_before_a_config(streams):
    streams.offer(ID, (b"\x01",))
    assert streams.sent == []


def test_without_timeout_each_digest_is_a_list(streams):
    streams.configure(ID, config())
    for v in (b"\x01", b"\x02", b"\x01"):
        streams.offer(ID, (v,))
    assert lists(streams) == [(1, [(b"\x01",)]), (2, [(b"\x02",)]), (3, [(b"\x01",)])]
    assert all(m.digest.digest_id == ID for m in streams.sent)


def test_a_list_goes_when_full(streams):
    streams.configure(ID, config(max_timeout_ns=10**9, max_list_size=3))
    streams.offer(ID, (b"\x01",))
    streams.offer(ID, (b"\x02",))
    assert streams.sent == []
    streams.offer(ID, (b"\x03",))
    assert lists(streams) == [(1, [(b"\x01",), (b"\x02",), (b"\x03",)])]


def test_a_list_goes_when_its_oldest_digest_waited_max_timeout(streams):
    streams.configure(ID, config(max_timeout_ns=10**9))
    streams.offer(ID, (b"\x01",))
    streams.clock.now += 0.6
    streams.offer(ID, (b"\x02",))
    assert streams.tick() == pytest.approx(101.0)      # the oldest's deadline
    assert streams.sent == []
    streams.clock.now += 0.4
    streams.tick()
    assert lists(streams) == [(1, [(b"\x01",), (b"\x02",)])]


def test_duplicates_are_dropped_until_acknowledged(streams):
    streams.configure(ID, config(ack_timeout_ns=5 * 10**9))
    streams.offer(ID, (b"\x01",))
    streams.offer(ID, (b"\x01",))          # sent in list 1, not acknowledged: dropped
    streams.offer(ID, (b"\x02",))
    assert lists(streams) == [(1, [(b"\x01",)]), (2, [(b"\x02",)])]
    streams.ack(ID, 7)                     # an unknown list: ignored
    streams.offer(ID, (b"\x01",))
    assert len(streams.sent) == 2
    streams.ack(ID, 1)
    streams.offer(ID, (b"\x01",))
    assert lists(streams)[-1] == (3, [(b"\x01",)])


def test_an_ack_timeout_lets_the_data_through_again(streams):
    streams.configure(ID, config(ack_timeout_ns=10**9))
    streams.offer(ID, (b"\x01",))
    streams.clock.now += 0.5
    streams.tick()
    streams.offer(ID, (b"\x01",))
    assert len(streams.sent) == 1
    streams.clock.now += 0.5
    streams.tick()
    streams.offer(ID, (b"\x01",))
    assert lists(streams) == [(1, [(b"\x01",)]), (2, [(b"\x01",)])]


def test_a_duplicate_of_a_pending_digest_is_dropped(streams):
    streams.configure(ID, config(max_timeout_ns=10**9, ack_timeout_ns=10**9))
    streams.offer(ID, (b"\x01",))
    streams.offer(ID, (b"\x01",))
    streams.clock.now += 1
    streams.tick()
    assert lists(streams) == [(1, [(b"\x01",)])]


def test_removing_a_config_drops_its_pending_list(streams):
    streams.configure(ID, config(max_timeout_ns=10**9))
    streams.offer(ID, (b"\x01",))
    streams.configure(ID, None)
    streams.clock.now += 2
    streams.tick()
    assert streams.sent == [] and not streams.configured(ID)


@pytest.mark.parametrize("bad", [dict(max_timeout_ns=-1), dict(ack_timeout_ns=-5),
                                 dict(max_list_size=-1), dict(max_timeout_ns=10**18)])
def test_configs_p4runtime_cannot_mean_are_refused(bad):
    with pytest.raises(P4RuntimeError, match="digest d"):
        check_config(config(**bad), "digest d")

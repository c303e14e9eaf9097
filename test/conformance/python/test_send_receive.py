"""Batches with partition keys and to explicit partitions, read back from
the earliest position with order and keys preserved."""

import unittest

import support


class SendReceiveTest(unittest.TestCase):
    # One hub per test, so no test sees another's events.

    def test_partition_key_batches(self):
        hub = "sendkeys"
        bodies = {key: [f"{key}-{i}" for i in range(5)] for key in ("alpha", "beta", "gamma")}
        for key, b in bodies.items():
            support.send(hub, b, partition_key=key)
        with support.Receiver(support.consumer(hub), starting_position="-1") as r:
            got = r.wait_for(15)
        by_key = {}
        partition_of = {}
        for partition, ev in got:
            key = ev.partition_key.decode() if isinstance(ev.partition_key, bytes) else ev.partition_key
            by_key.setdefault(key, []).append(ev.body_as_str())
            partition_of.setdefault(key, set()).add(partition)
        for key, b in bodies.items():
            self.assertEqual(by_key.get(key), b, f"events of key {key} out of order or missing")
            self.assertEqual(len(partition_of[key]), 1, f"key {key} spread over partitions {partition_of[key]}")

    def test_explicit_partition(self):
        hub = "sendparts"
        support.send(hub, [f"p2-{i}" for i in range(10)], partition_id="2")
        support.send(hub, ["p2-10", "p2-11"], partition_id="2")
        support.send(hub, ["p0-0"], partition_id="0")
        got = support.receive_partition(hub, "2", 12)
        self.assertEqual([ev.body_as_str() for ev in got], [f"p2-{i}" for i in range(12)])
        self.assertEqual([ev.sequence_number for ev in got], list(range(12)))
        self.assertTrue(all(ev.partition_key is None for ev in got))
        offsets = [int(ev.offset) for ev in got]
        self.assertEqual(offsets, sorted(offsets))
        self.assertEqual(len(set(offsets)), len(offsets))

    def test_properties_round_trip(self):
        from azure.eventhub import EventData
        hub = "sendprops"
        with support.producer(hub) as p:
            batch = p.create_batch(partition_id="3")
            ev = EventData(b"\x00\x01binary")
            ev.properties = {"kind": "test", "n": 7}
            ev.content_type = "application/octet-stream"
            ev.correlation_id = "corr-1"
            ev.message_id = "msg-1"
            batch.add(ev)
            p.send_batch(batch)
        got = support.receive_partition(hub, "3", 1)[0]
        self.assertEqual(b"".join(got.body), b"\x00\x01binary")
        props = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                 for k, v in got.properties.items()}
        self.assertEqual(props, {"kind": "test", "n": 7})
        self.assertEqual(got.content_type, "application/octet-stream")
        self.assertEqual(got.correlation_id, "corr-1")
        self.assertEqual(got.message_id, "msg-1")
        self.assertIsNotNone(got.enqueued_time)


if __name__ == "__main__":
    unittest.main()

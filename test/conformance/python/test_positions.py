"""Start positions: earliest, sequence number, offset, enqueued time,
latest (each exclusive by default, inclusive on request)."""

import time
import unittest

import support


class PositionsTest(unittest.TestCase):
    HUB = "positions"

    @classmethod
    def setUpClass(cls):
        # Two sends, so the second half has a later enqueued time than the
        # first (the emulator stamps whole batches with one millisecond).
        support.send(cls.HUB, [f"e{i}" for i in range(5)], partition_id="0")
        time.sleep(0.01)  # only to make the two batches' timestamps differ
        support.send(cls.HUB, [f"e{i}" for i in range(5, 10)], partition_id="0")
        cls.all = support.receive_partition(cls.HUB, "0", 10)

    def bodies(self, events):
        return [ev.body_as_str() for ev in events]

    def test_earliest(self):
        self.assertEqual(self.bodies(self.all), [f"e{i}" for i in range(10)])

    def test_sequence_number(self):
        self.assertEqual(self.bodies(support.receive_partition(self.HUB, "0", 5, starting_position=4)),
                         [f"e{i}" for i in range(5, 10)])
        self.assertEqual(self.bodies(support.receive_partition(self.HUB, "0", 6, starting_position=4, inclusive=True)),
                         [f"e{i}" for i in range(4, 10)])

    def test_offset(self):
        offset = self.all[6].offset
        self.assertEqual(self.bodies(support.receive_partition(self.HUB, "0", 3, starting_position=str(offset))),
                         ["e7", "e8", "e9"])
        self.assertEqual(self.bodies(support.receive_partition(self.HUB, "0", 4, starting_position=str(offset), inclusive=True)),
                         ["e6", "e7", "e8", "e9"])

    def test_enqueued_time(self):
        first, second = self.all[4].enqueued_time, self.all[5].enqueued_time
        self.assertLess(first, second, "the two batches share an enqueued time")
        self.assertEqual(self.bodies(support.receive_partition(self.HUB, "0", 5, starting_position=first)),
                         [f"e{i}" for i in range(5, 10)])
        self.assertEqual(support.receive_partition(self.HUB, "0", 5, starting_position=second, inclusive=True)[0].body_as_str(), "e5")

    def test_latest(self):
        # A receiver at @latest sees only what is sent after it attached.
        # When it attached is unknown to the caller, so markers are sent
        # until one arrives; nothing sent before may ever show up.
        hub = "latest"
        support.send(hub, ["before-0", "before-1"], partition_id="0")
        with support.Receiver(support.consumer(hub), partition_id="0", starting_position="@latest") as r:
            n = 0
            with support.producer(hub) as p:
                while r.count() == 0:
                    batch = p.create_batch(partition_id="0")
                    batch.add(support.event(f"marker-{n}"))
                    p.send_batch(batch)
                    n += 1
                    time.sleep(0.3)  # pacing the markers, not a wait for a result
                    if n > 200:
                        self.fail(f"no marker arrived after {n} sends: {r.error_list()}")
            got = r.wait_for(1)
        bodies = [ev.body_as_str() for _, ev in got]
        self.assertTrue(all(b.startswith("marker-") for b in bodies), bodies)
        seqs = [ev.sequence_number for _, ev in got]
        self.assertEqual(seqs, sorted(seqs))
        self.assertGreaterEqual(seqs[0], 2)


if __name__ == "__main__":
    unittest.main()

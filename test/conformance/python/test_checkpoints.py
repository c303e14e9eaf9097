"""Load balancing with the Python Blob checkpoint store on Azurite, resume
after checkpoints, and ehsink's Blob checkpoints read by the Python store."""

import threading
import time
import unittest

from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

import support


def store(name):
    return BlobCheckpointStore.from_connection_string(support.storage(), support.container(name))


class CheckpointTest(unittest.TestCase):

    def test_two_consumers_balance_and_resume(self):
        hub = "balance"
        container = "balance"
        options = dict(starting_position="-1")
        balancing = dict(load_balancing_interval=1, partition_ownership_expiration_interval=6)
        readers = {}  # event body -> names of the consumers that received it
        partition_of = {}  # event body -> partition
        lock = threading.Lock()

        def on_event_of(name):
            def on_event(ctx, ev):
                with lock:
                    readers.setdefault(ev.body_as_str(), set()).add(name)
                    partition_of[ev.body_as_str()] = ctx.partition_id
                ctx.update_checkpoint(ev)
            return on_event

        def read_by(body):
            with lock:
                return set(readers.get(body, ()))

        a = support.Receiver(support.consumer(hub, checkpoint_store=store(container), **balancing), _on_event=on_event_of("a"), **options)
        b = support.Receiver(support.consumer(hub, checkpoint_store=store(container), **balancing), _on_event=on_event_of("b"), **options)
        partitions = ["0", "1", "2", "3"]
        with a, b:
            ownership = store(container)

            def balanced():
                owned = ownership.list_ownership(support.namespace(), hub, "$Default")
                per_owner = {}
                for o in owned:
                    per_owner.setdefault(o["owner_id"], []).append(o["partition_id"])
                return len(owned) == 4 and sorted(len(v) for v in per_owner.values()) == [2, 2]

            support.eventually(balanced, "two consumers owning two partitions each")
            # Ownership blobs move before links do: a partition's previous
            # owner reads on until the new owner's link steals its own. So
            # probe every partition until one round is read once per
            # partition, two partitions per consumer; from then on no
            # partition may be read by both.
            rounds = 0
            while True:
                bodies = [f"probe-{rounds}-{p}" for p in partitions]
                for p, body in zip(partitions, bodies):
                    support.send(hub, [body], partition_id=p)
                rounds += 1
                support.eventually(lambda: all(read_by(x) for x in bodies), f"probe round {rounds}")
                names = [read_by(x) for x in bodies]
                if all(len(n) == 1 for n in names) and sorted(
                        sum(1 for n in names if n == {c}) for c in ("a", "b")) == [2, 2]:
                    break
                if rounds >= 30:
                    self.fail(f"the consumers never settled: last probe readers {names}")
            for key in range(20):
                support.send(hub, [f"k{key}-{i}" for i in range(2)], partition_key=f"k{key}")
            real = [f"k{key}-{i}" for key in range(20) for i in range(2)]
            support.eventually(lambda: all(read_by(x) for x in real),
                               f"40 events (errors {a.error_list() + b.error_list()})")
        per_partition = {}
        for body in real:
            per_partition.setdefault(partition_of[body], set()).update(read_by(body))
        for partition, names in per_partition.items():
            self.assertEqual(len(names), 1, f"partition {partition} read by {names}")
        self.assertEqual({n for names in per_partition.values() for n in names}, {"a", "b"})

        checkpoints = store(container).list_checkpoints(support.namespace(), hub, "$Default")
        self.assertEqual(sum(c["sequence_number"] + 1 for c in checkpoints), 40 + 4 * rounds, checkpoints)

        # A new consumer resumes after the checkpoints: only new events.
        support.send(hub, ["after-0", "after-1", "after-2"], partition_key="late")
        c = support.Receiver(support.consumer(hub, checkpoint_store=store(container), **balancing), **options)
        with c:
            c.wait_for(3)
            # A replay of old events would come with or right after these.
            time.sleep(2)
            got = c.snapshot()
        self.assertEqual([ev.body_as_str() for _, ev in got], ["after-0", "after-1", "after-2"])

    def test_reads_ehsink_checkpoints(self):
        want = support.ehsink_checkpoints()
        hub = want["eventhub"]
        got = store(want["container_suffix"]).list_checkpoints(support.namespace(), hub, "$Default")
        got = {c["partition_id"]: (c["offset"], c["sequence_number"]) for c in got}
        expected = {p: (c["offset"], c["sequence_number"]) for p, c in want["checkpoints"].items()}
        self.assertEqual(got, expected)
        # A Python consumer with the same store resumes right after them.
        c = support.Receiver(support.consumer(hub, checkpoint_store=store(want["container_suffix"]), load_balancing_interval=1), starting_position="-1")
        with c:
            n = sum(want["events"][p] - want["checkpoints"][p]["sequence_number"] - 1 for p in want["checkpoints"])
            got = c.wait_for(n)
        first = {}
        for partition, ev in got:
            first.setdefault(partition, ev.sequence_number)
        self.assertEqual(first, {p: c["sequence_number"] + 1 for p, c in want["checkpoints"].items()})


if __name__ == "__main__":
    unittest.main()

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
        owners = {}  # partition -> set of consumer names that received from it
        lock = threading.Lock()

        def on_event_of(name):
            def on_event(ctx, ev):
                with lock:
                    owners.setdefault(ctx.partition_id, set()).add(name)
                ctx.update_checkpoint(ev)
            return on_event

        a = support.Receiver(support.consumer(hub, checkpoint_store=store(container), **balancing), _on_event=on_event_of("a"), **options)
        b = support.Receiver(support.consumer(hub, checkpoint_store=store(container), **balancing), _on_event=on_event_of("b"), **options)
        with a, b:
            # Wait until each consumer owns two partitions, then send: from
            # then on no partition may be read by both.
            ownership = store(container)

            def balanced():
                owned = ownership.list_ownership(support.namespace(), hub, "$Default")
                per_owner = {}
                for o in owned:
                    per_owner.setdefault(o["owner_id"], []).append(o["partition_id"])
                return len(owned) == 4 and sorted(len(v) for v in per_owner.values()) == [2, 2]

            support.eventually(balanced, "two consumers owning two partitions each")
            for key in range(20):
                support.send(hub, [f"k{key}-{i}" for i in range(2)], partition_key=f"k{key}")
            support.eventually(lambda: a.count() + b.count() >= 40, f"40 events (a {a.count()}, b {b.count()}, errors {a.error_list() + b.error_list()})")
        for partition, names in owners.items():
            self.assertEqual(len(names), 1, f"partition {partition} read by {names}")
        self.assertEqual(a.count() + b.count(), 40)
        self.assertGreater(a.count(), 0)
        self.assertGreater(b.count(), 0)

        checkpoints = store(container).list_checkpoints(support.namespace(), hub, "$Default")
        self.assertEqual(sum(c["sequence_number"] + 1 for c in checkpoints), 40, checkpoints)

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

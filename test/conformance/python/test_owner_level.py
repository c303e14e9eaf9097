"""Owner level (epoch): a higher owner level steals the partition and the
old receiver gets the service's ownership error; a lower one is refused."""

import unittest

from azure.eventhub.exceptions import ConnectionLostError

import support


class OwnerLevelTest(unittest.TestCase):
    HUB = "steal"

    def test_steal_and_refuse(self):
        support.send(self.HUB, ["x0", "x1"], partition_id="0")
        with support.Receiver(support.consumer(self.HUB), partition_id="0", starting_position="-1", owner_level=1) as first:
            first.wait_for(2)
            with support.Receiver(support.consumer(self.HUB), partition_id="0", starting_position="-1", owner_level=2) as second:
                second.wait_for(2)
                support.eventually(lambda: first.error_list(), "the first receiver's ownership error")
                # The service's own text, as the SDK reports it.
                err = first.error_list()[0]
                self.assertIsInstance(err, ConnectionLostError)
                self.assertIn("amqp:link:stolen", str(err))
                self.assertRegex(str(err), r"New receiver '[^']+' with higher epoch of '2' is created hence current receiver '[^']+' with epoch '1' is getting disconnected")
                # A lower owner level than the current one is refused.
                with support.Receiver(support.consumer(self.HUB), partition_id="0", starting_position="-1", owner_level=1) as third:
                    support.eventually(lambda: third.error_list(), "the lower owner level's refusal")
                    refused = third.error_list()[0]
                    self.assertIsInstance(refused, ConnectionLostError)
                    refused = str(refused)
                    self.assertIn("amqp:link:stolen", refused)
                    self.assertIn("with a higher epoch '2' already exists", refused)
                    self.assertEqual(third.count(), 0)
                # The owner keeps receiving.
                support.send(self.HUB, ["x2"], partition_id="0")
                got = second.wait_for(3)
                self.assertEqual([ev.body_as_str() for _, ev in got], ["x0", "x1", "x2"])


if __name__ == "__main__":
    unittest.main()

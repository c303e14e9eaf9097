"""Hub and partition properties through $management."""

import datetime
import unittest

import support


class PropertiesTest(unittest.TestCase):
    HUB = "props"

    def test_hub_properties(self):
        with support.producer(self.HUB) as p:
            props = p.get_eventhub_properties()
            self.assertEqual(props["eventhub_name"], self.HUB)
            self.assertEqual(props["partition_ids"], ["0", "1", "2", "3"])
            self.assertIsInstance(props["created_at"], datetime.datetime)
            self.assertEqual(p.get_partition_ids(), ["0", "1", "2", "3"])

    def test_partition_properties(self):
        with support.producer(self.HUB) as p:
            empty = p.get_partition_properties("3")
            self.assertEqual(empty["eventhub_name"], self.HUB)
            self.assertEqual(empty["id"], "3")
            self.assertTrue(empty["is_empty"])
            self.assertEqual(empty["last_enqueued_sequence_number"], -1)
        support.send(self.HUB, ["a", "b", "c"], partition_id="1")
        with support.producer(self.HUB) as p:
            props = p.get_partition_properties("1")
        self.assertFalse(props["is_empty"])
        self.assertEqual(props["beginning_sequence_number"], 0)
        self.assertEqual(props["last_enqueued_sequence_number"], 2)
        self.assertIsInstance(props["last_enqueued_offset"], str)
        self.assertIsInstance(props["last_enqueued_time_utc"], datetime.datetime)

    def test_unknown_partition(self):
        with support.producer(self.HUB) as p:
            with self.assertRaises(Exception) as ctx:
                p.get_partition_properties("9")
        self.assertIn("404", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()

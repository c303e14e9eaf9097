"""Token checks: wrong key refused, rights enforced, tokens refreshed on a
long-lived receiver."""

import base64
import hashlib
import hmac
import time
import unittest
import urllib.parse

from azure.core.credentials import AccessToken
from azure.eventhub import EventHubConsumerClient
from azure.eventhub.exceptions import AuthenticationError, EventHubError

import support


class ShortLivedKeyCredential:
    """A shared key credential whose tokens live `lifetime` seconds (the
    SDK's own lasts an hour), so refreshes happen within a test. The SDK
    refreshes a token in the last tenth of its life."""

    token_type = b"servicebus.windows.net:sastoken"

    def __init__(self, key_name, key, lifetime):
        self.key_name, self.key, self.lifetime = key_name, key, lifetime
        self.issued = 0

    def get_token(self, *scopes, **kwargs):
        self.issued += 1
        expiry = int(time.time()) + self.lifetime
        sr = urllib.parse.quote_plus(scopes[0]).lower()
        mac = hmac.new(self.key.encode(), f"{sr}\n{expiry}".encode(), hashlib.sha256)
        sig = urllib.parse.quote_plus(base64.b64encode(mac.digest()).decode())
        token = f"SharedAccessSignature sr={sr}&sig={sig}&se={expiry}&skn={self.key_name}"
        return AccessToken(token.encode(), expiry)


class AuthTest(unittest.TestCase):
    HUB = "auth"

    def test_wrong_key_refused(self):
        with support.producer(self.HUB, conn_str=support.connection_string(key="d3Jvbmc=")) as p:
            with self.assertRaises(AuthenticationError) as ctx:
                p.get_eventhub_properties()
        self.assertIn("InvalidSignature", str(ctx.exception))

    def test_listen_only_key_cannot_send(self):
        listen = support.connection_string(key_name=support.env("EHSINK_PY_LISTEN_KEY_NAME"))
        with support.producer(self.HUB, conn_str=listen) as p:
            with self.assertRaises(EventHubError) as ctx:
                batch = p.create_batch(partition_id="0")
                batch.add(support.event("x"))
                p.send_batch(batch)
        self.assertIn("'Send' claim(s) are required", str(ctx.exception))
        # The same key reads properties and receives.
        support.send(self.HUB, ["y"], partition_id="1")
        with support.consumer(self.HUB, conn_str=listen) as c:
            self.assertEqual(c.get_partition_ids(), ["0", "1"])
        with support.Receiver(support.consumer(self.HUB, conn_str=listen), partition_id="1", starting_position="-1") as r:
            self.assertEqual(r.wait_for(1)[0][1].body_as_str(), "y")

    def test_token_refresh(self):
        # Tokens live 12 s; the receiver keeps receiving for three
        # lifetimes, which it can only do if it refreshes them (the
        # emulator detaches a link whose token expired).
        hub = "refresh"
        cred = ShortLivedKeyCredential(support.env("EHSINK_PY_KEY_NAME"), support.env("EHSINK_PY_KEY"), lifetime=12)
        client = EventHubConsumerClient(support.namespace(), hub, "$Default", cred, **support.client_kwargs())
        with support.Receiver(client, partition_id="0", starting_position="-1") as r:
            end = time.monotonic() + 36
            n = 0
            while time.monotonic() < end:
                support.send(hub, [f"r{n}"], partition_id="0")
                n += 1
                r.wait_for(n)
                time.sleep(1)  # pacing the sends over several token lifetimes
            got = r.wait_for(n)
            self.assertEqual(r.error_list(), [])
        self.assertEqual([ev.body_as_str() for _, ev in got], [f"r{i}" for i in range(n)])
        self.assertGreaterEqual(cred.issued, 3, "the SDK never refreshed its token")


if __name__ == "__main__":
    unittest.main()
